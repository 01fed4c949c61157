"""The 2-core layout on the app's real engines (core/hardware.core_layout, the default "fair"): vLLM binds each
worker's OpenMP thread to its core even though the worker inherits the host core from the pinned app, and the
engine-core processes (whose schedulers busy-poll their workers) stay on the host core with the app. (The
suite's in-process pairs run per-engine for speed, tests/conftest.py; the page is what users run.)"""

import os

import psutil
import pytest

from specplay.core.hardware import DEFAULT_CORE_LAYOUT, core_layout, usable_cores
from tests.ui_fixtures import engine_core_pids


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


def test_workers_run_on_a_core_free_of_the_app_and_the_schedulers(app):
    layout = core_layout(usable_cores(), DEFAULT_CORE_LAYOUT)
    if layout.host is None:
        pytest.skip("no host core on this machine's core count")
    host = tuple(layout.host)
    assert set(_threads_affinity(app.proc.pid).values()) == {host}, _threads_affinity(app.proc.pid)
    cores = engine_core_pids(app.proc)
    assert len(cores) == 2, cores  # the baseline's and the speculative engine's
    binds = {str(layout.baseline), str(layout.speculative)}
    for core in cores:
        assert set(_threads_affinity(core).values()) == {host}, (core, _threads_affinity(core))
        workers = psutil.Process(core).children()
        assert workers, core
        for worker in workers:  # its main thread is the one OpenMP thread
            assert ",".join(map(str, sorted(os.sched_getaffinity(worker.pid)))) in binds, (
                core, worker.pid, worker.name(), _threads_affinity(worker.pid))
