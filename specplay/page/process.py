"""The page process's life cycle around the engines: adopt orphaned engine workers, end every child on the
way out, and exit without the interpreter's slow teardown. Linux-specific parts degrade to no-ops."""

from __future__ import annotations

import os
import sys


def end_children(grace_s: float = 5.0, rounds: int = 3) -> None:
    """Engines still starting can't be shut down through vLLM (their constructor holds the pair's loop), so
    whatever this process started and is still running is ended here: nothing outlives the app. In rounds:
    an engine core killed mid-start may have just spawned its worker, which (this process being their
    subreaper) is re-parented here and found by the next round."""
    import psutil

    for _ in range(rounds):
        # multiprocessing's resource tracker ignores SIGTERM by design and ends when every process holding
        # its pipe has: it is left to end on its own (and clean up the engines' shared memory on the way)
        children = [c for c in psutil.Process().children(recursive=True) if not _is_resource_tracker(c)]
        if not children:
            return
        for child in children:
            try:
                child.terminate()
            except psutil.Error:
                pass
        _, alive = psutil.wait_procs(children, timeout=grace_s)
        for child in alive:
            try:
                child.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(alive, timeout=1)


def adopt_orphans() -> None:
    """Linux: become the subreaper of everything this process starts, so a process whose parent was killed
    (an engine core's worker) is re-parented here, where end_children finds it, not to init."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def _is_resource_tracker(process) -> bool:
    import psutil

    try:
        return any("resource_tracker" in part for part in process.cmdline())
    except psutil.Error:
        return False


def exit_now(code: int) -> None:
    """End the process without the interpreter's teardown: serve's `finally` has stopped everything it
    started, and the teardown spends another ~5 s in native finalizers (the engine clients' sockets)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
