"""The 2-core layout on real engines (core/hardware.core_layout): vLLM binds each worker's OpenMP thread to
its core even though the worker inherits the host core from this pinned process, and the engine-core
processes (whose schedulers busy-poll their workers) stay on the host core with the app."""

import os

import psutil
import pytest

from specplay.core.hardware import core_layout, detect


def _threads_affinity(pid: int) -> dict[str, tuple[int, ...]]:
    """Each thread's allowed cores, by thread name (and id)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            name = open(f"/proc/{pid}/task/{tid}/comm").read().strip()
            out[f"{name}/{tid}"] = tuple(sorted(os.sched_getaffinity(int(tid))))
        except OSError:  # a thread that has just ended
            pass
    return out


def test_workers_run_on_a_core_free_of_the_app_and_the_schedulers(ngram_pair):
    layout = core_layout(detect().cpu_cores)
    if layout.host is None:
        pytest.skip("no host core on this machine's core count")
    host = tuple(layout.host)
    assert set(_threads_affinity(os.getpid()).values()) == {host}, _threads_affinity(os.getpid())
    binds = {"baseline": layout.baseline, "speculative": layout.speculative}
    for role, pids in ngram_pair.process_ids().items():
        # an engine's new processes (recursive): its engine core, its worker and, for the first, the resource
        # tracker; the worker is the one whose parent is among them
        workers = [w for pid in pids for w in psutil.Process(pid).children(recursive=True)]
        assert workers, role
        for pid in set(pids) - {w.pid for w in workers}:
            assert set(_threads_affinity(pid).values()) == {host}, (role, _threads_affinity(pid))
        for worker in workers:  # its main thread is the one OpenMP thread
            assert tuple(sorted(os.sched_getaffinity(worker.pid))) == (int(binds[role]),), (
                role, worker.pid, worker.name(), _threads_affinity(worker.pid))
