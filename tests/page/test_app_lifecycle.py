"""The page's processes over its life, with real CPU engines (the shared `python app.py`): an engine killed
mid-run is named and only it is started again, and SIGTERM, after runs and while an engine loads, leaves
nothing running. Split from test_app_e2e.py; the same shared app, the same order (conftest.suite_order)."""

from __future__ import annotations

import time

import pytest

from tests.page.page_calls import OUTPUTS, REWRITE, STOP_TOKENS, STORY, run, stopped_mid_run, wait_for, wait_streaming
from tests.procs import running, socket_files, zombie_children
from tests.ui_fixtures import engine_core_pids

STOP_BOUND_S = 10.0  # docker stop's SIGKILL comes 10 s after its SIGTERM


def _wait_for_new_engine(client, killed: int, old_cores: list[int], app, timeout=400.0) -> int:
    """The engine-core pid that replaced `killed`, once the page is ready again."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        cores = engine_core_pids(app.proc)
        if len(cores) == 2 and killed not in cores and client.predict(api_name="/status")["state"] == "ready":
            return next(pid for pid in cores if pid not in old_cores)
        time.sleep(2)
    raise AssertionError(f"the killed engine was not reloaded within {timeout} s")


@pytest.mark.order(1)  # after the tests that only run (it reloads an engine), before the switches
def test_killed_engine_is_reported_and_only_it_is_reloaded(app):
    """kill -9 on the baseline's engine core mid-run: the run ends naming it, and only that engine is started
    again, the speculative one staying loaded (half the wait: the page once reloaded both). One role only: a
    reload costs a minute of the suite, the message is one code path for either role (pair._EngineFailed),
    and test_remote.py kills the speculative server mid-stream. Seen failing on a clean clone before
    processes.end_and_reap reaped late deaths: the killed core's worker stayed <defunct> in the app."""
    import os
    import signal

    role, other = "baseline", "speculative"
    client = app.client()
    target = engine_core_pids(app.proc)[0]  # oldest first: the baseline engine starts first
    for _ in range(2):  # again if the kill reached an engine only after the run (a frozen test machine)
        cores_before = engine_core_pids(app.proc)
        assert len(cores_before) == 2 and target in cores_before
        sockets_before = socket_files(app.tmp_dir)
        assert sockets_before, "no vLLM socket in the app's temp dir: the checks below would look elsewhere"
        job = client.submit(STORY, STOP_TOKENS, 0.0, "concurrent", api_name="/run")
        wait_streaming(job, role)
        os.kill(target, signal.SIGKILL)
        out = dict(zip(OUTPUTS, job.result(timeout=300)))  # an answer, not a hang
        if out["error"] or len(out["result"][role]["token_ids"]) < STOP_TOKENS:
            break
        target = _wait_for_new_engine(client, target, cores_before, app)  # the watcher's reload of the idle pair
    assert f"the {role} engine failed" in out["error"], out["error"]
    assert f"The {role} engine is being reloaded (the other stays loaded)" in out["error"], out["error"]
    assert "stack trace" not in out["error"]  # nothing that points at a log visitors can't see
    # the other engine was stopped with it, not left generating to max tokens
    assert len(out["result"][other]["token_ids"]) < STOP_TOKENS
    status = wait_for(client, "smollm2-ngram", timeout=400)
    assert status["state"] == "ready", status
    print(f"the killed {role} engine reloaded in {status['elapsed_s']:.1f} s (the other stayed loaded)")
    assert app.proc.poll() is None  # the same app brought it back
    cores = engine_core_pids(app.proc)
    survivor = next(pid for pid in cores_before if pid != target)
    assert len(cores) == 2 and survivor in cores and target not in cores, (cores_before, target, cores)
    assert zombie_children(app.proc.pid) == []  # the killed engine's processes were reaped, not left <defunct>
    sockets = socket_files(app.tmp_dir)  # the killed engine's sockets went with its folder: no growth
    gone, new = set(sockets_before) - set(sockets), set(sockets) - set(sockets_before)
    assert len(sockets) == len(sockets_before) and gone and len(gone) == len(new), (sockets_before, sockets)
    _stop_answers_after_the_reload(client)
    again = run(client, REWRITE, max_tokens=32)["result"]
    assert again["identical"] is True and len(again["baseline"]["token_ids"]) > 5


def _stop_answers_after_the_reload(client) -> None:
    """Issue 44: after a kill and reload, Stop's request went unanswered for 18 s, until the baseline had
    finished. Stop is answered before Gradio's handler queue (hosting/answered_first.py): here, on the reloaded
    real engines, a streaming run is stopped short of its 900 tokens. The tight bounds (answer 0.5 s, end 1 s)
    are test_public_page_doors.py's, on a stand-in engine; a loaded 2-core machine may deliver a client's
    frames late, so these leave room, and the measured seconds are printed. And this VM at times freezes a vCPU
    for 10-60 s while the engines run (docs/benchmarks.md, "Seconds-long freezes"): in a clean-clone run Stop was
    answered and the run ended both 14.1 s after the press, to the millisecond, where the same page's Stop after
    a kill and reload took 0.05-0.09 s on a quiet machine (three runs, through gradio_client as here). So a slow
    Stop is pressed again on a new run, up to 3 times; the defect (Stop waits for the baseline) is slow every time."""
    tries = []
    for _ in range(3):
        seconds = {}
        out = stopped_mid_run(client, "concurrent", seconds=seconds)
        assert out["result"].get("cancelled") is True, out["badge"]
        tries.append(seconds)
        if seconds["answered"] <= 5.0 and seconds["ended"] <= 10.0:
            break
    print("Stop after the reload: " + "; ".join(f"answered in {s['answered']:.2f} s, the run ended {s['ended']:.2f} s "
                                                 "after the press" for s in tries))
    assert tries[-1]["answered"] <= 5.0 and tries[-1]["ended"] <= 10.0, tries


def _describe(pids: list[int]) -> list[str]:
    import psutil

    def what(pid):
        try:
            process = psutil.Process(pid)
            return f"{pid} {' '.join(process.cmdline())[:80] or process.name()} (parent {process.ppid()})"
        except psutil.Error:
            return f"{pid} (gone)"
    return [what(pid) for pid in pids]


def _running_after(pids: list[int], seconds: float) -> list[int]:
    """Which of these processes still run (zombies don't count) once they had `seconds` to end."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(map(running, pids)):
        time.sleep(0.2)
    return [p for p in pids if running(p)]


@pytest.mark.order(4)  # the app's last test: it stops the app (the in-process pairs would stop it next anyway)
def test_sigterm_after_runs_and_mid_load_ends_every_process_within_10_s(app):
    """A service manager's stop (docker stop: SIGTERM, then SIGKILL 10 s later) must find nothing left to
    kill, after runs, a kill -9 reload and switches, and while an engine loads: SIGTERM lands while a switch
    starts the new speculative engine (its constructor holds the pair's loop, so vLLM can't shut it down:
    page/process.end_children ends it) beside the resident baseline. One stop for both cases: a separate app
    stopped mid-start cost 74 s of the suite, and a switch's engine start is the initial load's code path."""
    import psutil

    from tests.ui_fixtures import stop_shared_app

    client = app.client()
    cores_before = engine_core_pids(app.proc)
    assert len(cores_before) == 2 and socket_files(app.tmp_dir)
    current = client.predict(api_name="/status")["preset"]
    client.predict("smollm2-ngram" if current != "smollm2-ngram" else "smollm2-layerskip-draft",
                   api_name="/switch_preset")
    deadline = time.monotonic() + 180
    while not set(engine_core_pids(app.proc)) - set(cores_before):  # the new engine's core: it is loading
        assert time.monotonic() < deadline, "no new engine started loading"
        time.sleep(0.2)
    family = [app.proc.pid] + [c.pid for c in psutil.Process(app.proc.pid).children(recursive=True)]
    started = time.monotonic()
    app.proc.terminate()
    left = _running_after(family, STOP_BOUND_S)
    took, code = time.monotonic() - started, app.proc.poll()
    sockets = socket_files(app.tmp_dir)  # before stop_shared_app removes the folder
    stop_shared_app()
    print(f"SIGTERM to exit mid-load, after runs, a kill -9 reload and switches: {took:.2f} s")
    assert not left, f"still running {STOP_BOUND_S:g} s after SIGTERM: {_describe(left)}"
    assert code == 0 and sockets == [], (code, sockets)  # the loading engine's too, though it never shut down
