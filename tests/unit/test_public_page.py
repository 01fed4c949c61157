"""A public page, second round: the bench under the operator's limits, every wait bounded, dead engines
noticed while idle, one pending run per visitor, disk kept clean, replays bounded, no server internals shown,
bodies capped. No engines: FakePair, fake benches, fake engines."""

from __future__ import annotations

import json
import os
import threading
import time
from types import SimpleNamespace

import pytest

from specplay.core.events import BASELINE, SPECULATIVE
from specplay.presets.catalog import get_preset
from tests.ui_fixtures import FakePair, synthetic_events

PRESET = "smollm2-ngram"


def _wait(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.02)
    return predicate()


def _manager(factory=None, **kwargs):
    from specplay.page.manager import PairManager

    events = synthetic_events([1, 2, 3], [[1], [2, 3]])
    factory = factory or (lambda p, hw, log=print: FakePair(lambda r: events, p))
    manager = PairManager({PRESET: get_preset(PRESET)}, PRESET, pair_factory=factory, log=lambda *a: None, **kwargs)
    manager.load(PRESET)
    assert _wait(lambda: manager.status().state == "ready", 30)
    return manager


# -- 1. the bench: off on a public page, bounded by the run time limit ---------------------------------------
def test_bench_is_off_on_a_public_page_unless_the_operator_allows_it():
    from specplay.page.options import DEFAULTS, parse_args, resolve_options, settings_from_options

    assert settings_from_options(dict(DEFAULTS)).allow_bench is True  # 127.0.0.1
    assert settings_from_options({**DEFAULTS, "host": "0.0.0.0"}).allow_bench is False
    assert settings_from_options({**DEFAULTS, "share": True, "auth": ("a", "b")}).allow_bench is False
    public = resolve_options(parse_args(["--host", "0.0.0.0", "--allow-bench"]))
    assert settings_from_options(public).allow_bench is True
    assert settings_from_options(resolve_options(parse_args(["--no-bench"]))).allow_bench is False


def test_a_page_without_the_bench_has_no_bench_tab_or_route():
    from specplay.page import ui
    from specplay.page.settings import PageSettings

    manager = _manager()
    try:
        def names(demo):
            return {fn.api_name for fn in demo.fns.values()}
        assert "bench" not in names(ui.build_page(manager, PageSettings(allow_bench=False)))
        assert "bench" in names(ui.build_page(manager, PageSettings()))
    finally:
        manager.shutdown()


class FakeBench:
    """Stands in for BenchRun: a row every `step_s` until cancelled; `restore_s` / `restore_error` at the end."""

    restore_s, restore_error, restarts, step_s = 0.0, None, 0, 0.05

    def __init__(self, pair, preset, settings, prompts, hardware, cancel=None, restore=False):
        self.pair, self.preset, self.cancel = pair, preset, cancel
        self.rows, self.plan = [], SimpleNamespace(restarts=self.restarts)
        self.restored = threading.Event()

    def run(self):
        try:
            while not self.cancel.is_set() and len(self.rows) < 10_000:
                time.sleep(self.step_s)
                self.rows.append({"row": len(self.rows)})
                yield SimpleNamespace(row=self.rows[-1])
        finally:
            time.sleep(self.restore_s)  # the preset's own speculative engine loaded back
            self.restored.set()
            if self.restore_error:
                raise RuntimeError(self.restore_error)

    def result(self):
        return {"rows": list(self.rows), "advice": [], "synthetic": False}


@pytest.fixture
def fake_bench(monkeypatch, tmp_path):
    from specplay.page import bench_tab

    made = []

    class Bench(FakeBench):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            made.append(self)

    monkeypatch.setattr(bench_tab, "BenchRun", Bench)
    monkeypatch.setattr(bench_tab, "load_prompts", lambda settings, preset: {"w": []})
    monkeypatch.setattr(bench_tab, "bench_advice", lambda result: [])
    for name, fake in (("settings_from_picks", lambda preset, *picks: SimpleNamespace()), ("empty_frame", dict),
                       ("progress_html", lambda step: ""), ("table_frame", lambda rows: len(rows)),
                       ("chart_frame", lambda rows, p: {}), ("advice_html", lambda advice: ""),
                       ("exports", lambda written, rows: {"bench_file": written["csv"]})):
        monkeypatch.setattr(bench_tab.bv, name, fake)
    monkeypatch.setattr(bench_tab, "bench_figures", lambda rows, k, synthetic: {})  # rows here are stand-ins

    def write(out_dir, result, figures, png=False):
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "bench.csv").write_text(json.dumps(result["rows"]))
        return {"csv": str(out_dir / "bench.csv")}
    monkeypatch.setattr(bench_tab, "write_results", write)
    return SimpleNamespace(cls=Bench, made=made, folder=tmp_path / "bench")


def _bench(manager, fake_bench, session="S", **settings):
    from specplay.page.bench_tab import run_bench
    from specplay.page.cancel import CancelRegistry
    from specplay.page.settings import PageSettings

    return run_bench(manager, CancelRegistry(), fake_bench.folder, session, ["w"], 1, [4], [0.0], [1], [], 32,
                     settings=PageSettings(**settings))


def test_a_bench_stops_at_the_run_time_limit_and_keeps_what_it_measured(fake_bench):
    manager = _manager()
    try:
        started = time.monotonic()
        outs = list(_bench(manager, fake_bench, max_run_seconds=0.5))
        assert time.monotonic() - started < 5
        last = outs[-1]
        assert "limit of 0.5 seconds" in last["bench_error"] and last["bench_table"] > 0
        with open(last["bench_file"]) as f:
            assert json.loads(f.read())  # the rows measured are in the CSV
        assert not manager.run_lock.locked()
    finally:
        manager.shutdown()


def test_a_bench_refuses_to_restart_the_engine_where_switching_is_off(fake_bench):
    fake_bench.cls.restarts = 1
    manager = _manager()
    try:
        outs = list(_bench(manager, fake_bench, allow_switching=False))
        assert "switching engines is turned off" in outs[-1]["bench_error"] and not fake_bench.made[0].rows
        assert not manager.run_lock.locked()
        outs = list(_bench(manager, fake_bench, allow_bench=False))
        assert "turned off" in outs[-1]["bench_error"]
    finally:
        manager.shutdown()


# -- 2. leaving mid-bench: cleanup off the closing thread, the lock always released --------------------------
@pytest.mark.parametrize("restore_error", [None, "the engine failed to start"])
def test_leaving_mid_bench_returns_at_once_and_releases_the_engines(fake_bench, restore_error):
    fake_bench.cls.restore_s, fake_bench.cls.restore_error = 1.5, restore_error
    manager = _manager()
    try:
        gen = _bench(manager, fake_bench)
        next(gen), next(gen)
        assert manager.run_lock.locked()
        started = time.monotonic()
        gen.close()  # what Gradio does, on its event loop, when the visitor has left
        assert time.monotonic() - started < 0.5
        bench = fake_bench.made[0]
        assert bench.cancel.is_set()
        assert _wait(lambda: not manager.run_lock.locked(), 5) and bench.restored.is_set()
    finally:
        manager.shutdown()


# -- 3. the pair read under the lock, and every wait bounded -------------------------------------------------
def test_a_run_uses_the_pair_loaded_while_it_waited_for_the_engines(tmp_path):
    from specplay.page.cancel import CancelRegistry
    from specplay.page.compare_run import RunPlace, run_comparison
    from specplay.page.settings import PageSettings

    manager = _manager()
    try:
        stale = manager.pair
        stale.stream = lambda *a, **k: iter(())  # shut down: its stream never says it finished
        fresh_events = synthetic_events([7, 8], [[7], [8]])
        fresh = FakePair(lambda r: fresh_events, manager.preset)
        outs = []
        with manager.run_lock:  # a bench holds the engines; the run reads the pair, then waits
            runner = threading.Thread(target=lambda: outs.extend(run_comparison(
                RunPlace(manager, CancelRegistry(), str(tmp_path), PageSettings()), "hi", 2, 0.0, "sequential",
                [], "S")))
            runner.start()
            time.sleep(0.3)
            with manager._lock:  # a reload replaced the pair meanwhile
                manager._pair = fresh
        runner.join(10)
        assert not runner.is_alive() and outs
        assert outs[-1]["result"]["baseline"]["token_ids"] == [7, 8], outs[-1]["result"]
    finally:
        manager.shutdown()


# -- 4. a dead idle engine noticed; a failed reload retried, then the process told to exit --------------------
def test_the_watcher_notices_a_dead_idle_engine_and_reloads_both():
    pairs = []
    events = synthetic_events([1], [[1]])

    def factory(preset, hw, log=print):
        pairs.append(FakePair(lambda r: events, preset))
        return pairs[-1]

    manager = _manager(factory).watch(interval_s=0.1)
    try:
        pairs[0].engines[SPECULATIVE].is_alive = lambda: False  # its process died; nobody is running
        assert _wait(lambda: len(pairs) == 2 and manager.status().state == "ready", 10)
        assert manager.pair is pairs[1]
    finally:
        manager.shutdown()


def test_a_failed_reload_is_retried_with_backoff_then_the_app_gives_up():
    from specplay.page.health import health_response

    calls, gave_up = [], threading.Event()
    events = synthetic_events([1], [[1]])

    def factory(preset, hw, log=print):
        calls.append(time.monotonic())
        if len(calls) > 1:
            raise RuntimeError("Engine core initialization failed. See stack trace for /work/x/y.log")
        return FakePair(lambda r: events, preset)

    manager = _manager(factory, retry_delays=(0.2, 0.4), on_give_up=gave_up.set)
    try:
        manager.pair.engines[BASELINE].is_alive = lambda: False
        assert manager.reload_if_dead()
        assert health_response(manager.status()) == (503, {"status": "recovering", "preset": PRESET})
        assert gave_up.wait(10) and len(calls) == 4  # the first load, then 1 + 2 retries
        assert calls[2] - calls[1] >= 0.2 and calls[3] - calls[2] >= 0.4
        status = manager.status()
        assert status.state == "error" and health_response(status)[1]["status"] == "error"
        assert "/work" not in status.message and "See stack trace" not in status.message
    finally:
        manager.shutdown()


def test_a_reload_that_succeeds_on_a_retry_is_back_to_ok():
    from specplay.page.health import health_response

    calls = []
    events = synthetic_events([1], [[1]])

    def factory(preset, hw, log=print):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("boom")
        return FakePair(lambda r: events, preset)

    manager = _manager(factory, retry_delays=(0.1,))
    try:
        manager.pair.engines[BASELINE].is_alive = lambda: False
        assert manager.reload_if_dead()
        assert _wait(lambda: len(calls) == 3 and manager.status().state == "ready")
        assert health_response(manager.status())[0] == 200 and not manager.status().recovering
    finally:
        manager.shutdown()


@pytest.mark.parametrize("code,body,alive", [(200, {"status": "ok"}, True), (503, {"status": "recovering"}, True),
                                             (503, {"status": "loading"}, True), (503, {"status": "error"}, False)])
def test_the_container_health_check_counts_a_recovering_page_alive(code, body, alive):
    from http.server import BaseHTTPRequestHandler, HTTPServer

    from specplay.page.health import check

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.handle_request, daemon=True).start()
    try:
        assert check(f"http://127.0.0.1:{server.server_port}/health", timeout_s=5) == (0 if alive else 1)
    finally:
        server.server_close()
    assert check("http://127.0.0.1:9/health", timeout_s=1) == 1  # no answer: dead


# -- 5, 6 (uploads), 9 (bodies): on a real Gradio page ----------------------------------------------------
@pytest.fixture
def served(tmp_path, monkeypatch):
    from specplay.page import ui
    from tests.ui_fixtures import free_port

    monkeypatch.setattr(ui, "PAGE_DIR", tmp_path / "page")
    events = synthetic_events(list(range(40)), [[i] for i in range(40)])
    manager = _manager(lambda p, hw, log=print: FakePair(lambda r: events, p, step_delay=0.1))
    demo = ui.build_page(manager)
    from specplay.page.health import health_route

    ui.launch(demo, "127.0.0.1", free_port(), block=False, app_kwargs={"routes": [health_route(manager)]})
    try:
        yield SimpleNamespace(demo=demo, url=demo.local_url.rstrip("/"), manager=manager,
                              run_index=next(i for i, fn in demo.fns.items() if fn.api_name == "run"))
    finally:
        demo.close()
        manager.shutdown()


def _join(served, session, headers=None):
    import httpx

    body = {"data": ["hello", 8, 0.0, "sequential", None, None], "fn_index": served.run_index,
            "session_hash": session, "event_data": None, "trigger_id": None}
    return httpx.post(f"{served.url}/gradio_api/queue/join", json=body, headers=headers or {}, timeout=10)


def test_one_pending_run_per_session_and_per_forwarded_address(served):
    first = _join(served, "s1")
    assert first.status_code == 200, first.text
    again = _join(served, "s1")  # the same session: refused at once, with a message
    assert again.status_code == 400 and "already have a run" in again.json()["detail"]  # the page shows it
    assert _join(served, "s2").status_code == 200  # another visitor on this machine (no proxy): queued
    proxied = {"X-Forwarded-For": "203.0.113.7, 10.0.0.1"}
    assert _join(served, "s3", proxied).status_code == 200
    other = _join(served, "s4", {"X-Forwarded-For": "203.0.113.7"})  # same client behind the proxy, new session
    assert other.status_code == 400 and "already have a run" in other.json()["detail"]
    assert _join(served, "s5", {"X-Forwarded-For": "198.51.100.2"}).status_code == 200


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


# -- 6. disk: one folder per cache, old files cleaned ---------------------------------------------------
def test_history_and_bench_folders_are_reused_and_old_files_cleaned(tmp_path, monkeypatch, fake_bench):
    from specplay.page import ui
    from specplay.page.cancel import CancelRegistry
    from specplay.page.compare_run import RunPlace, run_comparison
    from specplay.page.settings import PageSettings

    monkeypatch.setattr(ui, "PAGE_DIR", tmp_path / "page")
    manager = _manager()
    try:
        first, second = (ui.build_page(manager, PageSettings(allow_bench=False)) for _ in range(2))
        assert first.playground_file_dirs == second.playground_file_dirs  # no new folder per start
        history_dir, bench_dir = first.playground_file_dirs
        assert sorted(p.name for p in (tmp_path / "page").iterdir()) == ["bench", "history"]
        old = os.path.join(history_dir, "history-old.csv")
        open(old, "w").close()
        os.utime(old, (time.time() - 7200,) * 2)
        place = RunPlace(manager, CancelRegistry(), history_dir, PageSettings())
        last = list(run_comparison(place, "hi", 2, 0.0, "sequential", [], "S"))[-1]
        assert not os.path.exists(old) and os.path.exists(last["history_file"])
        fake_bench.folder = bench_dir
        stale = os.path.join(bench_dir, "0123456789abcdef")
        os.makedirs(stale)
        os.utime(stale, (time.time() - 7200,) * 2)
        written = list(_bench(manager, fake_bench, max_run_seconds=0.3))[-1]["bench_file"]
        assert written.startswith(str(bench_dir)) and "/tmp/playground-bench" not in written
        assert not os.path.exists(stale)
    finally:
        manager.shutdown()


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
    from specplay.page.cancel import CancelRegistry
    from specplay.page.settings import PageSettings

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
    from specplay.page.manager import PairManager

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
    from specplay.page.cancel import CancelRegistry
    from specplay.page.compare_run import RunPlace, run_comparison
    from specplay.page.settings import PageSettings

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
    from specplay.page.options import parse_args, resolve_options

    login = tmp_path / "auth"
    login.write_text("visitor:s3cret\n")
    assert resolve_options(parse_args(["--auth-file", str(login)]))["auth"] == ("visitor", "s3cret")
    assert resolve_options(parse_args(["--auth-file", str(login), "--auth", "a:b"]))["auth"] == ("a", "b")
    with pytest.raises(SystemExit, match="auth-file"):
        resolve_options(parse_args(["--auth-file", str(tmp_path / "missing")]))
    with pytest.raises(SystemExit):
        parse_args(["--help"])
    assert "PLAYGROUND_AUTH" in capsys.readouterr().out


def test_leaving_mid_run_returns_at_once_and_releases_the_engines(tmp_path):
    """A run's generator closed by Gradio (the visitor left) aborts and releases the engines off that thread."""
    from specplay.page.cancel import CancelRegistry
    from specplay.page.compare_run import RunPlace, run_comparison
    from specplay.page.settings import PageSettings

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
    from specplay.page.settings import scrub

    message = ("The run stopped: the baseline engine failed (EngineDeadError: EngineCore encountered an issue. "
               "See stack trace (above) for the root cause.). " + "x" * 500 + " Both engines are being reloaded.")
    shown = scrub(message)
    assert "stack trace" not in shown and shown.endswith("Both engines are being reloaded.")
    assert scrub("RuntimeError: boom\nTraceback (most recent call last):\n  File \"/opt/v/x.py\"") == "RuntimeError: boom"
