"""The app's way out is bounded whatever its children do (page/process.py): docker stop sends SIGKILL 10 s
after SIGTERM. Real processes that ignore SIGTERM stand in for engines killed mid-start (slow to end, their
worker re-parented to the app once its parent dies); no engines, a few seconds each."""

import os
import subprocess
import sys
import textwrap
import time

import psutil


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# A process that answers SIGTERM by starting another like it (an engine core killed mid-start that has
# just spawned its worker) and runs on: killing it re-parents that one to the app, where end_children's
# next round must find it.
STUBBORN = textwrap.dedent("""
    import signal, subprocess, sys, time
    left = int(sys.argv[1])
    def on_term(*_):
        global left
        if left:
            subprocess.Popen([sys.executable, "-c", sys.argv[2], str(left - 1), sys.argv[2], sys.argv[3]])
            left = 0
    signal.signal(signal.SIGTERM, on_term)
    open(sys.argv[3], "w").close()  # ready: SIGTERM now starts the next one
    time.sleep(120)
""")

APP = textwrap.dedent("""
    import os, subprocess, sys, tempfile, time
    from specplay.hosting import process
    process.adopt_orphans()
    ready = os.path.join(tempfile.mkdtemp(), "ready")
    subprocess.Popen([sys.executable, "-c", {stubborn!r}, "1", {stubborn!r}, ready])
    while not os.path.exists(ready):  # started, its SIGTERM handler set (a fixed 3 s wait cost 6 s a run)
        time.sleep(0.01)
    print("started at", time.monotonic(), file=sys.stderr, flush=True)
    {body}
""")


def _run_app(body: str, timeout: float = 60) -> tuple[subprocess.CompletedProcess, float]:
    """The app's run, and how long it took once its stubborn child had started (CLOCK_MONOTONIC is the
    machine's: the app's reading and ours compare)."""
    script = APP.format(stubborn=STUBBORN, body=textwrap.dedent(body).strip())
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ, PYTHONPATH=ROOT))
    ended = time.monotonic()
    started = [line for line in done.stderr.splitlines() if line.startswith("started at ")]
    return done, ended - float(started[0].split()[-1]) if started else float("inf")


def _stubborn_left() -> list[int]:
    found = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if STUBBORN in " ".join(p.info["cmdline"] or []) and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p.pid)
        except psutil.Error:
            pass
    return found


def test_end_children_ends_stubborn_children_and_their_orphans_within_its_budget():
    try:
        done, _ = _run_app("""
            t0 = time.monotonic()
            process.end_children()
            print(round(time.monotonic() - t0, 2))
        """)
        assert done.returncode == 0, done.stderr
        assert not _stubborn_left()
        seconds = float(done.stdout.split()[-1])
        assert seconds < 5.0, seconds  # its budget is 4 s (5 s of grace a round took 10 s here)
    finally:
        _kill_stubborn()


def test_a_stop_that_hangs_is_ended_at_its_deadline_children_and_all():
    try:
        done, took = _run_app("""
            process.stop_deadline(1.0, lambda: 7)
            time.sleep(60)  # a shutdown that never returns
        """)
        assert done.returncode == 7, done.stderr
        assert took < 4.0, took
        assert "killing what is left" in done.stderr
        time.sleep(0.5)
        assert not _stubborn_left()
    finally:
        _kill_stubborn()


def _kill_stubborn() -> None:
    for pid in _stubborn_left():
        try:
            os.kill(pid, 9)
        except OSError:
            pass
