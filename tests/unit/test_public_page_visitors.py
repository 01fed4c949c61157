"""A public page, second round, what visitors can send and see: one pending run per visitor, uploads and
bodies capped, replays bounded, no server internals shown, the prefix cache salted per session, the login off
the command line, leaving mid-run. No engines: FakePair on a real Gradio page."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from specplay.core.events import BASELINE, SPECULATIVE
from specplay.presets.catalog import get_preset
from tests.public_page_fixtures import PRESET, _manager, _wait
from tests.ui_fixtures import FakePair, synthetic_events


# -- 5, 6 (uploads), 9 (bodies): on a real Gradio page ----------------------------------------------------
@pytest.fixture
def served(tmp_path, monkeypatch):
    from specplay.page import ui
    from specplay.hosting import closing
    from tests.ui_fixtures import free_port

    monkeypatch.setattr(ui, "PAGE_DIR", tmp_path / "page")
    events = synthetic_events(list(range(40)), [[i] for i in range(40)])
    manager = _manager(lambda p, hw, log=print: FakePair(lambda r: events, p, step_delay=0.1))
    demo = ui.build_page(manager)
    from specplay.hosting.health import health_route

    ui.launch(demo, "127.0.0.1", free_port(), block=False, app_kwargs={"routes": [health_route(manager)]})
    try:
        yield SimpleNamespace(demo=demo, url=demo.local_url.rstrip("/"), manager=manager,
                              run_index=next(i for i, fn in demo.fns.items() if fn.api_name == "run"))
    finally:
        closing.close(demo)
        manager.shutdown()


def _join(served, session, headers=None):
    import httpx

    body = {"data": ["hello", 8, 0.0, "sequential", None, None], "fn_index": served.run_index,
            "session_hash": session, "event_data": None, "trigger_id": None}
    return httpx.post(f"{served.url}/gradio_api/queue/join", json=body, headers=headers or {}, timeout=10)


def test_one_pending_run_per_session_and_a_few_per_address(served):
    from specplay.hosting.guard import ADDRESS_PENDING

    first = _join(served, "s1")
    assert first.status_code == 200, first.text
    again = _join(served, "s1")  # the same session: refused at once, with a message
    assert again.status_code == 400 and "already have a run" in again.json()["detail"]  # the page shows it
    assert _join(served, "s2").status_code == 200  # another visitor on this machine (no proxy): queued
    # X-Forwarded-For from a peer the page doesn't trust is not believed: each "new client" is 127.0.0.1, and
    # having come through a proxy it is not exempt as the operator's own local client is
    spoofed = [_join(served, f"x{i}", {"X-Forwarded-For": f"203.0.113.{i}"}).status_code
               for i in range(ADDRESS_PENDING + 1)]
    assert spoofed == [200] * ADDRESS_PENDING + [400], spoofed


def test_uploads_and_oversized_bodies_are_refused_before_parsing(served):
    import httpx

    upload = httpx.post(f"{served.url}/gradio_api/upload", files={"files": ("a.txt", b"x" * 1000)}, timeout=10)
    assert upload.status_code == 403
    big = httpx.post(f"{served.url}/gradio_api/queue/join", content=b"{" + b" " * (2 << 20) + b"}",
                     headers={"Content-Type": "application/json"}, timeout=30)
    assert big.status_code == 413

    def chunks():  # no Content-Length: counted as it arrives
        for _ in range(3):
            yield b" " * (1 << 20)
    streamed = httpx.post(f"{served.url}/gradio_api/queue/join", content=chunks(),
                          headers={"Content-Type": "application/json"}, timeout=30)
    assert streamed.status_code == 413
    assert httpx.get(f"{served.url}/health", timeout=10).status_code == 200  # the page is still up
    assert served.demo.show_error is False


# -- 7. replays: their own, bounded group ------------------------------------------------------------------
def test_replays_have_their_own_concurrency_limit():
    from specplay.page import ui

    manager = _manager()
    try:
        demo = ui.build_page(manager)
        replays = [fn for fn in demo.fns.values() if getattr(fn.fn, "__name__", "") == "replay"]
        assert len(replays) == 2
        assert all(fn.concurrency_limit == ui.REPLAY_LIMIT == 4 and fn.concurrency_id == "replay" for fn in replays)
    finally:
        manager.shutdown()


# -- 8. no server internals ------------------------------------------------------------------------------
def test_the_serve_panel_names_hub_models_not_server_paths():
    from specplay.core.paths import CACHE_DIR, PROJECT_ROOT
    from specplay.page.ui import public_serve_line
    from specplay.presets.engines import serve_commands

    lines = serve_commands(get_preset("smollm2-layerskip-draft"))
    shown = {role: public_serve_line(line) for role, line in lines.items()}
    assert str(CACHE_DIR) in lines[SPECULATIVE]  # what the server runs
    assert all(str(CACHE_DIR) not in s and str(PROJECT_ROOT) not in s for s in shown.values()), shown
    assert "vllm serve HuggingFaceTB/SmolLM2-135M-Instruct " in shown[BASELINE]
    assert '"model": "<cache>/models/smollm2-135m-instruct-skip12-17"' in shown[SPECULATIVE]
    dummy = public_serve_line(serve_commands(get_preset("dummy-llama8b-eagle-k3"))[SPECULATIVE])
    assert "vllm serve specplay/presets/data/models/llama-3.1-8b-shaped" in dummy and "…" not in dummy


def test_an_error_outside_the_runs_own_try_is_scrubbed_and_run_enabled_again(tmp_path, monkeypatch):
    from specplay.page import compare_run
    from specplay.hosting.cancel import CancelRegistry
    from specplay.hosting.settings import PageSettings

    def broken(*args):
        raise OSError("[Errno 28] No space left on device: '/work/main/.cache/page/history/h.csv'")
    monkeypatch.setattr(compare_run, "_finished", broken)
    manager = _manager()
    try:
        place = compare_run.RunPlace(manager, CancelRegistry(), str(tmp_path), PageSettings())
        last = list(compare_run.run_comparison(place, "hi", 2, 0.0, "sequential", [], "S"))[-1]
        assert "No space left" in last["error"] and "/work" not in last["error"]
        assert last["run_btn"]["interactive"] is True
    finally:
        manager.shutdown()


def test_engine_load_errors_reach_status_scrubbed():
    from specplay.hosting.manager import PairManager

    raw = ("RuntimeError: Engine core initialization failed. See stack trace above for the root cause.\n"
           "Traceback (most recent call last):\n  File \"/opt/venv/lib/python3.11/site-packages/vllm/x.py\"")

    def factory(preset, hw, log=print):
        raise RuntimeError(raw)
    manager = PairManager({PRESET: get_preset(PRESET)}, PRESET, pair_factory=factory, log=lambda *a: None)
    manager.load(PRESET)
    assert _wait(lambda: manager.status().state == "error")
    message = manager.status().message
    assert message.startswith("RuntimeError: ") and "Engine core initialization failed" in message
    assert "/opt" not in message and "Traceback" not in message and "\n" not in message


# -- 9. the prefix cache salted per session; the login off the command line ----------------------------------
def test_each_session_salts_the_prefix_cache(tmp_path):
    from specplay.hosting.cancel import CancelRegistry
    from specplay.page.compare_run import RunPlace, run_comparison
    from specplay.hosting.settings import PageSettings

    salts = []
    events = synthetic_events([1], [[1]])

    def factory(preset, hw, log=print):
        return FakePair(lambda r: salts.append(r.cache_salt) or events, preset)
    manager = _manager(factory)
    try:
        place = RunPlace(manager, CancelRegistry(), str(tmp_path), PageSettings())
        for session in ("alice", "bob", "alice"):
            list(run_comparison(place, "the same prompt", 2, 0.0, "sequential", [], session))
        assert salts[0] and salts[0] == salts[2] != salts[1] and "alice" not in salts[0]
    finally:
        manager.shutdown()


def test_the_login_can_come_from_a_file_and_help_prefers_it(tmp_path, capsys):
    from specplay.hosting.options import parse_args, resolve_options

    login = tmp_path / "auth"
    login.write_text("visitor:s3cret\n")
    assert resolve_options(parse_args(["--auth-file", str(login)])).auth == ("visitor", "s3cret")
    assert resolve_options(parse_args(["--auth-file", str(login), "--auth", "a:b"])).auth == ("a", "b")
    with pytest.raises(SystemExit, match="auth-file"):
        resolve_options(parse_args(["--auth-file", str(tmp_path / "missing")]))
    with pytest.raises(SystemExit):
        parse_args(["--help"])
    assert "PLAYGROUND_AUTH" in capsys.readouterr().out


def test_leaving_mid_run_returns_at_once_and_releases_the_engines(tmp_path):
    """A run's generator closed by Gradio (the visitor left) aborts and releases the engines off that thread."""
    from specplay.hosting.cancel import CancelRegistry
    from specplay.page.compare_run import RunPlace, run_comparison
    from specplay.hosting.settings import PageSettings

    ended = threading.Event()

    class SlowToAbort(FakePair):
        def stream(self, request, schedule="concurrent", cancel=None):
            try:
                yield from super().stream(request, schedule, cancel)
            finally:
                time.sleep(1.5)  # the aborted requests take their time to end
                ended.set()

    events = synthetic_events(list(range(50)), [[i] for i in range(50)])
    manager = _manager(lambda p, hw, log=print: SlowToAbort(lambda r: events, p, step_delay=0.05))
    try:
        place = RunPlace(manager, CancelRegistry(), str(tmp_path), PageSettings())
        gen = run_comparison(place, "hi", 40, 0.0, "sequential", [], "S")
        next(gen), next(gen)
        assert manager.run_lock.locked()
        started = time.monotonic()
        gen.close()
        assert time.monotonic() - started < 0.5
        assert _wait(lambda: not manager.run_lock.locked(), 5) and ended.is_set()
    finally:
        manager.shutdown()


def test_scrubbing_drops_log_pointers_and_traces_but_keeps_what_follows():
    from specplay.hosting.settings import scrub

    message = ("The run stopped: the baseline engine failed (EngineDeadError: EngineCore encountered an issue. "
               "See stack trace (above) for the root cause.). " + "x" * 500 + " Both engines are being reloaded.")
    shown = scrub(message)
    assert "stack trace" not in shown and shown.endswith("Both engines are being reloaded.")
    assert scrub("RuntimeError: boom\nTraceback (most recent call last):\n  File \"/opt/v/x.py\"") == "RuntimeError: boom"
