"""An engine's processes are reaped even when one dies only seconds after its kill (seen in CI: a killed
engine core's worker left <defunct> in the app after a kill -9 reload, on a host that froze a vCPU)."""

import subprocess
import time

import psutil

from specplay.engine import processes


def test_a_process_that_dies_after_the_reap_deadline_is_still_reaped(monkeypatch):
    child = subprocess.Popen(["sleep", "2.5"])  # ours, as an engine's orphaned worker is the app's
    monkeypatch.setattr(psutil.Process, "kill", lambda self: None)  # the kill lands late: it ends by itself
    started = time.monotonic()
    processes.end_and_reap([psutil.Process(child.pid)], grace_s=0.2)
    assert time.monotonic() - started < 2.0  # the caller isn't held until it dies
    deadline = time.monotonic() + 10
    state = "running"
    while time.monotonic() < deadline:
        try:
            state = psutil.Process(child.pid).status()
        except psutil.NoSuchProcess:
            return  # reaped
        time.sleep(0.1)
    raise AssertionError(f"pid {child.pid} not reaped 10 s after its end: {state}")
