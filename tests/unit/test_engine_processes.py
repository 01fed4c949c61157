"""Which processes an in-process engine's start made (engine/processes.new_children), so that its shutdown
ends those and nothing else. The suite starts `specplay launch` (a child of the test process) beside an
in-process engine's start: its `vllm serve` servers, grandchildren started during that start, were taken for
the engine's and killed with it at its shutdown. Plain processes stand in for both."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil

from specplay.engine import processes

# A process that starts a child of its own after a moment and then waits (the launch and its server; the
# engine core and its worker).
PARENT_OF_ONE = "import subprocess, sys, time; time.sleep(0.3); subprocess.Popen([sys.executable, '-c', " \
                "'import time; time.sleep(60)']); time.sleep(60)"


def _with_a_child(process: subprocess.Popen) -> int:
    for _ in range(200):
        kids = psutil.Process(process.pid).children()
        if kids:
            return kids[0].pid
        time.sleep(0.05)
    raise AssertionError("the stand-in never started its child")


def test_a_start_owns_its_new_childs_tree_and_not_what_an_older_child_starts_meanwhile():
    launch = subprocess.Popen([sys.executable, "-c", PARENT_OF_ONE])  # started before the engine's start
    engine = None
    try:
        before = processes.children()
        engine = subprocess.Popen([sys.executable, "-c", PARENT_OF_ONE])  # the engine core, during the start
        server, worker = _with_a_child(launch), _with_a_child(engine)
        owned = {p.pid for p in processes.new_children(before)}
        assert owned == {engine.pid, worker}, (owned, {"launch": launch.pid, "server": server})
    finally:
        for proc in (launch, engine):
            if proc is not None:
                for p in psutil.Process(proc.pid).children(recursive=True) + [psutil.Process(proc.pid)]:
                    p.kill()
                proc.wait()
