"""A public page, second round: the pair read under the lock with every wait bounded, dead engines noticed
while idle, failed reloads retried then given up, the container's health check. No engines: FakePair."""

from __future__ import annotations

import json
import threading
import time

import pytest

from specplay.core.events import BASELINE, SPECULATIVE
from tests.public_page_fixtures import PRESET, _manager, _wait
from tests.ui_fixtures import FakePair, synthetic_events


# -- 3. the pair read under the lock, and every wait bounded -------------------------------------------------
def test_a_run_uses_the_pair_loaded_while_it_waited_for_the_engines(tmp_path):
    from specplay.hosting.cancel import CancelRegistry
    from specplay.page.compare_run import RunPlace, run_comparison
    from specplay.hosting.settings import PageSettings

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
    from specplay.hosting.health import health_response

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
    from specplay.hosting.health import health_response

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

    from specplay.hosting.health import check

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
