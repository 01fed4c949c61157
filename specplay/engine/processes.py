"""An in-process engine's own processes and files around vLLM's start and shutdown: its ZMQ sockets in a
folder of its own (removed at shutdown), and its processes ended and reaped once vLLM has shut it down.
No vLLM import: plain processes and paths.

Why: vLLM leaves both behind. Its IPC sockets (`ipc://$VLLM_RPC_BASE_PATH/<uuid>`, the temp dir by default)
outlive a shutdown that kills the engine core, 7 files an engine start; and it kills an engine core that
outlasts its grace without waiting on it, so the core and its worker stay zombies (<defunct>) until the
app exits (the app is their subreaper: page/process.adopt_orphans)."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import tempfile
import threading
import time

import psutil

IPC_ENV = "VLLM_RPC_BASE_PATH"  # where vLLM puts its ipc:// socket files (vllm.utils.network_utils)
IPC_PREFIX = "specplay-ipc-"
LATE_REAP_S = 120.0  # how long a process still running after its kill is watched, to be reaped


_FOLDERS: set[str] = set()  # this process's folders not yet removed: an engine killed mid-start keeps its own


def ipc_folder() -> str:
    """A new private folder for one engine's sockets: under the operator's VLLM_RPC_BASE_PATH if set, else
    the temp dir (a short path: a socket path must fit in 107 bytes, and vLLM adds 37)."""
    path = tempfile.mkdtemp(prefix=IPC_PREFIX, dir=os.environ.get(IPC_ENV) or None)
    _FOLDERS.add(path)
    return path


def remove_folder(path: str | None) -> None:
    if path:
        shutil.rmtree(path, ignore_errors=True)
        _FOLDERS.discard(path)


def remove_ipc_folders() -> None:
    """Every folder ipc_folder made here and no shutdown removed (engines ended mid-start, on the way out)."""
    for path in list(_FOLDERS):
        remove_folder(path)


def new_children(before: dict[int, psutil.Process]) -> list[psutil.Process]:
    """The children of this process that aren't in `before` (an engine's start: its engine core, and the
    first time multiprocessing's resource tracker), with their descendants (the core's worker). Only new
    children's trees: a process that an older child started meanwhile (a `specplay launch` beside the engine,
    its `vllm serve` servers) is not this engine's, and its shutdown must not end it."""
    return _with_descendants([p for pid, p in children().items() if pid not in before])


def children() -> dict[int, psutil.Process]:
    """This process's children by pid; the objects notice a pid reused later (psutil checks)."""
    return {p.pid: p for p in psutil.Process().children()}


def engine_tree(processes: list[psutil.Process]) -> list[psutil.Process]:
    """These processes and their descendants now (a worker spawned since the start), without
    multiprocessing's resource tracker, which serves the whole app and outlives any one engine."""
    return [p for p in _with_descendants(processes) if not _is_resource_tracker(p)]


def _with_descendants(processes: list[psutil.Process]) -> list[psutil.Process]:
    """These processes and every descendant each has now, once each."""
    found = {p.pid: p for p in processes}
    for p in processes:
        try:
            found.update((c.pid, c) for c in p.children(recursive=True))
        except psutil.Error:  # gone already: its adopted children, if any, are among `processes`
            pass
    return list(found.values())


def end_and_reap(processes: list[psutil.Process], grace_s: float = 1.0) -> None:
    """After vLLM's shutdown: wait up to `grace_s` for these processes to end, kill what still runs (a dead
    core's orphaned worker, which vLLM no longer tracks), and reap those whose parent this process is."""
    left = _settle(processes, time.monotonic() + grace_s)
    for p in left:
        try:
            p.kill()  # psutil refuses if the pid now belongs to another process
        except psutil.Error:
            pass
    late = _settle(left, time.monotonic() + 1.0)
    if late:  # a killed process can take seconds to die on a busy or frozen host: reap it when it does,
        threading.Thread(target=_settle, args=(late, time.monotonic() + LATE_REAP_S),  # not leave a zombie
                         name="reap-late", daemon=True).start()


def _settle(processes: list[psutil.Process], deadline: float) -> list[psutil.Process]:
    """Reap what has ended until `deadline`; return what still runs."""
    pending = list(processes)
    while True:
        # multiprocessing's own children first, through it: an os.waitpid on one of them would leave its
        # Process object waiting forever for an exit status taken from it
        tracked = {p.pid for p in multiprocessing.active_children()}
        pending = [p for p in pending if not _reaped(p, tracked)]
        if not pending or time.monotonic() >= deadline:
            return pending
        time.sleep(0.05)


def _reaped(process: psutil.Process, tracked: set[int]) -> bool:
    """Whether `process` is done with: gone, reaped here now, or a zombie that is someone else's to reap."""
    try:
        if process.status() != psutil.STATUS_ZOMBIE:
            return False
        if process.ppid() != os.getpid():
            return True
    except psutil.Error:  # gone (reaped), or its pid reused by another process
        return True
    if process.pid in tracked:  # multiprocessing reaps it at its next look
        return False
    try:
        os.waitpid(process.pid, os.WNOHANG)
    except ChildProcessError:
        pass
    return True


def _is_resource_tracker(process: psutil.Process) -> bool:
    try:
        return any("resource_tracker" in part for part in process.cmdline())
    except psutil.Error:  # a zombie has no command line: nothing left to keep
        return False
