"""The page process is the subreaper of its engines (page/process.adopt_orphans): a killed engine core's
worker is re-parented to it, and it must reap that worker when it ends. Seen on a clean clone: after a
kill -9 of the baseline's core, its VLLM::Worker stayed <defunct> in the app through the reload."""

import subprocess
import sys
import textwrap

# A stand-in for the page process, in a process of its own (a subreaper stays one for life): it adopts the
# orphan of a killed parent, as the app adopts a killed core's worker, and keeps a plain child of its own.
SCRIPT = textwrap.dedent("""
    import ctypes, os, subprocess, sys, time
    from specplay.hosting.process import adopt_orphans, reap_adopted_orphans
    from tests.procs import zombie_children
    assert adopt_orphans(interval_s=3600) is not None  # the periodic look is this test's own call below
    core = subprocess.Popen([sys.executable, "-c",
        "import ctypes, os, subprocess, sys, time\\n"
        "w = subprocess.Popen([sys.executable, '-c', 'import ctypes, time; '"
        "'ctypes.CDLL(None).prctl(15, b\\"VLLM::Worker\\", 0, 0, 0); time.sleep(1.5)'])\\n"
        "print(w.pid, flush=True); time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    worker = int(core.stdout.readline())
    core.kill(); core.wait()  # kill -9 of the core: its worker is re-parented here
    plain = subprocess.Popen(["true"])
    time.sleep(3.0)  # the worker has ended: a zombie of ours now, and so has `plain`
    before = zombie_children()
    reaped = reap_adopted_orphans()
    print(repr((worker, plain.pid, before, reaped, zombie_children(), plain.wait())))
""")


def test_an_adopted_engine_worker_is_reaped_and_a_plain_child_keeps_its_exit_status():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60, cwd=".")
    assert out.returncode == 0, out.stderr
    worker, plain, before, reaped, after, plain_status = eval(out.stdout.strip().splitlines()[-1])
    assert f"{worker} VLLM::Worker" in before  # the defect: adopted, ended, and nobody reaped it
    assert reaped == [f"{worker} VLLM::Worker"]
    assert after == [f"{plain} true"]  # the Popen's child is left to the Popen ...
    assert plain_status == 0  # ... which still gets its exit status
