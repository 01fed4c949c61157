"""The page process's life cycle around the engines: adopt orphaned engine workers, end every child on the
way out, and exit without the interpreter's slow teardown. Linux-specific parts degrade to no-ops."""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Callable


def end_children(grace_s: float = 2.0, budget_s: float = 4.0) -> None:
    """Engines still starting can't be shut down through vLLM (their constructor holds the pair's loop), so
    whatever this process started and is still running is ended here: nothing outlives the app. SIGTERM,
    `grace_s`, then SIGKILL; again for what turns up meanwhile (an engine core killed mid-start may have
    just spawned its worker, which, this process being their subreaper, is re-parented here), all within
    `budget_s`: the app's whole stop must fit in docker stop's 10 s even on a starved machine."""
    import psutil

    deadline = time.monotonic() + budget_s
    signal_name = "terminate"
    while True:
        children = _running_children()
        if not children or time.monotonic() >= deadline:
            return
        for child in children:
            try:
                getattr(child, signal_name)()
            except psutil.Error:
                pass
        wait = min(grace_s if signal_name == "terminate" else 1.0, max(0.1, deadline - time.monotonic()))
        _, alive = psutil.wait_procs(children, timeout=wait)
        signal_name = "kill"  # what outlived its grace, and whatever turned up since, gets no second one
        for child in alive:
            try:
                child.kill()
            except psutil.Error:
                pass


def _running_children() -> list:
    """This process's descendants still running: zombies are reaped where they are ours (waiting on one that
    isn't would spend the whole grace on a process that has already ended), and multiprocessing's resource
    tracker is left to end on its own (it ignores SIGTERM by design, ends when every process holding its
    pipe has, and cleans up the engines' shared memory on the way)."""
    import psutil

    running = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.status() == psutil.STATUS_ZOMBIE:
                if child.ppid() == os.getpid():
                    os.waitpid(child.pid, os.WNOHANG)
            elif not _is_resource_tracker(child):
                running.append(child)
        except (psutil.Error, ChildProcessError):
            pass
    return running


def stop_deadline(seconds: float, exit_code: Callable[[], int]) -> threading.Timer:
    """Started when the stop begins: should it still run `seconds` later (a hung engine, or a host so
    loaded that the app gets a sliver of a core, as a container at nice 19 under load 49 did), every child
    is killed and the process exits, within docker stop's 10 s rather than by its SIGKILL."""
    def hard_stop() -> None:
        print(f"stopping took over {seconds:g} s: killing what is left", file=sys.stderr, flush=True)
        try:
            for child in _running_children():
                child.kill()
        except Exception:  # exiting matters more than any one child
            pass
        exit_now(exit_code())

    timer = threading.Timer(seconds, hard_stop)
    timer.daemon = True
    timer.start()
    return timer


ENGINE_PREFIX = "VLLM::"  # how vLLM titles its processes (VLLM::EngineCore, VLLM::Worker...)
REAP_INTERVAL_S = 2.0


def adopt_orphans(interval_s: float = REAP_INTERVAL_S) -> threading.Thread | None:
    """Linux: become the subreaper of everything this process starts, so a process whose parent was killed
    (an engine core's worker) is re-parented here, where end_children finds it, not to init; and, as a
    subreaper must, reap what is adopted that way once it ends (reap_adopted_orphans), every `interval_s`."""
    try:
        import ctypes

        if ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
            return None
    except (OSError, AttributeError):
        return None

    def loop() -> None:
        while True:
            time.sleep(interval_s)
            try:
                for found in reap_adopted_orphans():
                    print(f"reaped an orphaned engine process: {found}", file=sys.stderr, flush=True)
            except Exception:  # the reaper must outlive whatever one look raises
                pass
    thread = threading.Thread(target=loop, name="reap-orphans", daemon=True)
    thread.start()
    return thread


def reap_adopted_orphans() -> list[str]:
    """Reap this process's ended children that only adoption made ours: vLLM's processes ("VLLM::...",
    e.g. a killed engine core's worker, left <defunct> otherwise) that multiprocessing doesn't track (its own
    it reaps itself; taking an exit status from under it would leave its Process waiting forever). Other
    children are left alone: a subprocess.Popen keeps its exit status. Returns 'PID NAME' for each."""
    import multiprocessing

    import psutil

    tracked = {p.pid for p in multiprocessing.active_children()}  # after this, a tracked one that ended is reaped
    reaped = []
    for child in psutil.Process().children():
        try:
            if child.pid in tracked or child.status() != psutil.STATUS_ZOMBIE:
                continue
            name = child.name()
            if name.startswith(ENGINE_PREFIX):
                os.waitpid(child.pid, os.WNOHANG)
                reaped.append(f"{child.pid} {name}")
        except (psutil.Error, ChildProcessError):  # gone meanwhile: reaped by whoever it belonged to
            pass
    return reaped


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
