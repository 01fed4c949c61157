"""The load test's client side (loadtest/visitors.py, loadtest/scenarios.py) against a fake page."""

from __future__ import annotations

import subprocess
import time

import pytest



from specplay.presets.catalog import get_preset
from tests.ui_fixtures import FakePair, ROOT, synthetic_events



# -- many visitors (the load test's client side, playground/visitors.py) -------------------------------------
def test_fifo_is_judged_on_the_queue_places_and_run_numbers_the_page_gives():
    from loadtest.visitors import Visit, fifo, outcome, percentile

    def visit(i, run, places=(), start=None, end=None):
        v = Visit(i, f"p{i}")
        v.got = outcome({"error": "", "result": {"run_id": None if run is None else f"run-{run}"}})
        v.places, v.started_at, v.finished_at = list(places), start, end
        return v

    # visitors 1 and 2 reached the queue the other way round: the page queued [2, 1, 3] behind 0's run,
    # told each its place (size, rank) on joining and at each start, and ran them in that order
    joined = [visit(0, 7), visit(1, 9, [(2, 1), (2, 0)]), visit(2, 8, [(1, 0)]),
              visit(3, 10, [(3, 2), (2, 1), (1, 0)]), visit(4, None)]
    kept = fifo(joined)
    assert kept["kept"] and kept["verified"] and kept["runs_on_engines"] == 4 and kept["order"] == [0, 2, 1, 3]
    assert kept["inversions"] == 0 and kept["pairs_checked"] == 1 and kept["inversions_against_press_order"] == 1
    assert not fifo(joined, joins_ordered=True)["kept"]  # pressed in order, each once the last was queued
    # the queue had 2 ahead of 1, but 1's run took the engines first
    jumped = fifo([visit(1, 8, [(2, 1)]), visit(2, 9, [(2, 0)])])
    assert not jumped["kept"] and jumped["inversions"] == 1
    assert not fifo([visit(0, 1), visit(1, 2)])["verified"]  # no picture of the queue: nothing to judge on
    # what the visitors saw: late and bunched messages are reported beyond the tolerance only
    seen = fifo([visit(0, 1, (), 0.0, 2.0), visit(1, 2, (), 1.0, 3.0), visit(2, 3, (), 2.95, 4.0)])["client_view"]
    assert seen["overlaps"] == 1 and seen["inversions"] == 0
    assert percentile([3, 1, 2, 4], 0.5) == 2 and percentile(list(range(1, 21)), 0.95) == 19
    assert percentile([], 0.5) is None and percentile([None, 2.0], 0.5) == 2.0


def test_percentile_is_defined_once_with_its_method_named():
    from specplay.core.stats import LINEAR, NEAREST_RANK, percentile

    assert percentile([4, 1, 3, 2], 0.5, LINEAR) == 2.5 and percentile([4, 1, 3, 2], 0.5, NEAREST_RANK) == 2
    assert percentile([1, 2, 3, 4, 5], 0.9) == pytest.approx(4.6)  # interpolated: the bench's default
    assert percentile([1, 2, 3, 4, 5], 0.9, NEAREST_RANK) == 5
    with pytest.raises(ValueError, match="method"):
        percentile([1], 0.5, "midpoint")


def test_tokens_are_counted_from_the_result_json():
    from loadtest.visitors import tokens_so_far

    streaming = {"run_id": "run-3", "streaming": True, "baseline": {"token_ids": [5, 6, 7]},
                 "speculative": {"token_ids": []}}
    assert tokens_so_far(streaming, "baseline") == 3 and tokens_so_far(streaming, "speculative") == 0
    assert tokens_so_far(None, "baseline") == 0 and tokens_so_far({"error": "x"}, "baseline") == 0


def test_load_tests_killer_fires_once_a_run_from_its_target_on_is_in_the_engines():
    """scripts/load_test.py --kill: a run that has started counts, tokens or not (on a GPU a short run
    streams in one redraw, so waiting for tokens never fired); earlier runs and finished ones don't. The
    process killed is a real one."""
    from loadtest.visitors import Visit

    load_test = _load_test_script()
    victim = subprocess.Popen(["sleep", "60"])
    try:
        killer = load_test.Killer("speculative", app_pid=0, cores=[1, victim.pid], target=2)
        early, done, waiting, running = Visit(1, "a"), Visit(2, "b"), Visit(3, "c"), Visit(4, "d")
        early.started_at = done.started_at = running.started_at = time.time()  # 1: before the target
        done.got = {"error": ""}
        killer([early, done, waiting])
        assert killer.record["pid"] is None and victim.poll() is None
        killer([early, done, waiting, running])
        assert victim.wait(timeout=5) == -9
        assert killer.record["pid"] == victim.pid and killer.record["visitor_in_flight"] == 4
        assert killer.record["tokens_seen"] == {"baseline": 0, "speculative": 0}
    finally:
        if victim.poll() is None:
            victim.kill()


def _load_test_script():
    import importlib.util

    spec = importlib.util.spec_from_file_location("load_test", ROOT / "scripts" / "load_test.py")
    load_test = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(load_test)
    return load_test


def _prompt_echo(request):
    """A fake run whose tokens depend on the prompt: a stream given to the wrong visitor would show."""
    import zlib

    seed = zlib.crc32(request.prompt.encode())
    ids = [(seed >> (i % 24)) % 1000 + 1 for i in range(request.max_tokens)]
    return synthetic_events(ids, [ids[:1]] + [ids[i:i + 2] for i in range(1, len(ids), 2)])


def _fake_manager(preset_name: str = "smollm2-ngram"):
    """A ready PairManager on a FakePair whose outputs depend on the prompt."""
    from specplay.hosting.manager import PairManager

    preset = get_preset(preset_name)
    manager = PairManager({preset.name: preset}, preset.name,
                          pair_factory=lambda p, hw, log=print: FakePair(_prompt_echo, p, step_delay=0.01))
    manager.load(preset.name)
    deadline = time.monotonic() + 10
    while manager.pair is None and time.monotonic() < deadline:
        time.sleep(0.05)
    return manager


def test_visitors_at_once_on_a_page_whose_cache_is_outside_the_working_and_temp_dirs(tmp_path, monkeypatch):
    """Four visitors on a page with a fake pair: served one at a time in the order they joined, each its own
    output. The page's files are where neither Gradio's working nor temp directory is (PLAYGROUND_CACHE=/data,
    or a .cache that is a symlink): the history CSV every run returns must still be served."""
    import tempfile

    from specplay.page import ui
    from specplay.hosting import closing

    from loadtest import visitors
    from tests.ui_fixtures import free_port

    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    monkeypatch.setattr(ui, "PAGE_DIR", tmp_path / "cache" / "page")
    manager = _fake_manager()
    demo = ui.build_page(manager)
    crowd = None
    try:
        ui.launch(demo, "127.0.0.1", free_port(), block=False)
        prompts = visitors.visitor_prompts(4)
        alone = visitors.client(demo.local_url)
        solo = visitors.solo_runs(alone, prompts, 6)
        alone.close()
        assert not any(s["error"] for s in solo.values()), solo
        assert len({tuple(s["baseline"]) for s in solo.values()}) == 4
        crowd = visitors.Visitors(demo.local_url, prompts, 6)
        crowd.connect()
        crowd.start()
        crowd.watch(time.time() + 60)
        summary = visitors.summary(crowd.visits, solo, joins_ordered=True)
        assert summary["errors"] == 0 and summary["equal_to_solo"] == 4, summary
        assert summary["fifo_kept"] and summary["fifo"]["order"] == [0, 1, 2, 3], summary["fifo"]
        assert summary["fifo"]["runs_on_engines"] == 4
        assert summary["queue_wait_p95_s"] >= summary["queue_wait_p50_s"] >= 0
        # tokens counted from the run's JSON `result` output as it streams, not from the panes' HTML
        assert all(v.first_token_at is not None and v.baseline_seen == 6 for v in crowd.visits), crowd.visits
    finally:
        if crowd is not None:
            crowd.close()
        closing.close(demo)
        manager.shutdown()


def test_the_load_test_phases_on_a_fake_page(tmp_path):
    """scripts/load_test.py's run_test (solo runs, the crowd, the checks) against a page on a fake pair."""
    import os
    from types import SimpleNamespace

    from specplay.page import ui
    from specplay.hosting import closing
    from tests.ui_fixtures import free_port

    load_test = _load_test_script()
    manager = _fake_manager()
    demo = ui.build_page(manager)
    try:
        port = free_port()
        ui.launch(demo, "127.0.0.1", port, block=False)
        app = SimpleNamespace(port=port, pid=os.getpid(), poll=lambda: None)  # the test process stands in
        args = load_test.parse_args(["--visitors", "3", "--max-tokens", "5", "--spacing-ms", "0",  # joins in order
                                     "--out", str(tmp_path / "r.json")])
        report = {"checks": {}}
        load_test.run_test(args, app, report)
        assert report["checks"] == {"solo_runs_ok": True, "no_hang": True, "no_lost_or_mixed_stream": True,
                                    "fifo_kept": True, "no_error": True, "every_output_equals_its_solo_run": True}, report
        assert len(report["rows"]) == 3 and report["load"]["equal_to_solo"] == 3
        assert all(row["first_token_s"] is not None for row in report["rows"])  # tokens seen while streaming
        assert report["cpu_seconds_during_load"]["wall_s"] >= 0
    finally:
        closing.close(demo)
        manager.shutdown()


def test_a_closed_visitors_session_state_does_not_stay_for_10000_more(tmp_path, monkeypatch):
    """Gradio keeps every session's state (~1 MB here: its copy of the page's config, the history, the last
    run) until 10,000 sessions have come after it; the soak (scripts/soak.py) saw the page's memory grow with
    every visitor who came and went. The page keeps `session_capacity`, least recently used dropped first."""
    from specplay.page import ui
    from specplay.hosting import closing
    from specplay.hosting.settings import PageSettings

    from loadtest import visitors
    from tests.ui_fixtures import free_port

    monkeypatch.setattr(ui, "PAGE_DIR", tmp_path / "page")
    manager = _fake_manager()
    settings = PageSettings(session_capacity=2)
    demo = ui.build_page(manager, settings)
    try:
        ui.launch(demo, "127.0.0.1", free_port(), block=False, session_capacity=settings.session_capacity)
        for prompt in visitors.visitor_prompts(5):  # five visitors, one after the other, each runs once and leaves
            c = visitors.client(demo.local_url)
            assert not visitors.outcome(visitors.run_once(c, prompt, 4))["error"]
            c.close()
        assert 1 <= len(demo.state_holder.session_data) <= 2
    finally:
        closing.close(demo)
        manager.shutdown()


def test_closing_a_page_with_a_heartbeat_open_wakes_its_waiters_on_the_servers_loop(capfd):
    """Gradio's close() set the app's asyncio stop_event from the test's thread while the server's loop added
    heartbeat waiters to it: "deque mutated during iteration" (CI, 2026-12-02). closing.close() sets it on
    the loop that owns it. Judged by what happens, in order: the heartbeat is open, the close returns, the
    event was set on the server's thread (not the closing one), the heartbeat's stream ends, and the
    server's log has no exception."""
    import asyncio
    import threading

    import httpx

    from specplay.page import ui
    from specplay.hosting import closing
    from tests.ui_fixtures import free_port

    set_from = []

    class Recorded(asyncio.Event):  # binds to the loop that first waits on it, as Gradio's own does
        def set(self):
            if not self.is_set():
                set_from.append(threading.current_thread())
            super().set()

    manager = _fake_manager()
    demo = ui.build_page(manager)
    try:
        ui.launch(demo, "127.0.0.1", free_port(), block=False)
        demo.app.stop_event = Recorded()  # before any heartbeat: each one waits on the app's event
        with httpx.stream("GET", f"{demo.local_url}gradio_api/heartbeat/abc123", timeout=60) as beat:
            lines = beat.iter_lines()
            assert next(lines) == "data: ALIVE"  # the heartbeat is open
            closing.close(demo)  # returns: nothing raised on this thread
            rest = list(lines)  # the stream ends (the server closed it), rather than beating on
        assert set_from and threading.current_thread() not in set_from, set_from
        assert all(line in ("", "data: ALIVE") for line in rest), rest
    finally:
        closing.close(demo)
        manager.shutdown()
    log = capfd.readouterr().err
    assert "Traceback" not in log and "mutated" not in log and "Exception" not in log, log


# -- visitors by address (issue 32): one address for all, an address each, through a trusted proxy ------------
@pytest.fixture
def proxied_page(tmp_path, monkeypatch):
    """A page on a FakePair that trusts the proxy at 127.0.0.1 (so each visitor's X-Forwarded-For is its
    address), its prompts' solo runs, and its manager (a test holds its engines while the visitors join)."""
    from types import SimpleNamespace

    from specplay.page import ui
    from specplay.hosting import closing
    from specplay.hosting.settings import PageSettings

    from loadtest import visitors
    from tests.ui_fixtures import free_port

    monkeypatch.setattr(ui, "PAGE_DIR", tmp_path / "page")
    manager = _fake_manager()
    demo = ui.build_page(manager, PageSettings(trusted_proxies=("127.0.0.1",)))
    try:
        ui.launch(demo, "127.0.0.1", free_port(), block=False)
        prompts = visitors.visitor_prompts(8)
        alone = visitors.client(demo.local_url)  # direct, no X-Forwarded-For: the operator's own client
        solo = visitors.solo_runs(alone, prompts, 6)
        alone.close()
        assert len({tuple(s["baseline"]) for s in solo.values()}) == 8 and not any(s["error"] for s in solo.values())
        yield SimpleNamespace(url=demo.local_url, manager=manager, prompts=prompts, solo=solo)
    finally:
        closing.close(demo)
        manager.shutdown()


def _crowd_while_the_engines_are_held(page, n_addresses):
    """Eight visitors press Run one after the other (each once the page has answered the last) while a run
    can't finish, so what each join got is decided by the order alone; then the engines are let go and the
    refused visitors retry until served."""
    from loadtest.scenarios import AddressVisitors

    crowd = AddressVisitors(page.url, page.prompts, 6, n_addresses, retry_s=0.05)
    crowd.connect()
    page.manager.run_lock.acquire()
    try:
        crowd.start(spacing_s=None)
        first = [v.job.done() and v.job.communicator.event_id is None for v in crowd.visits]  # refused at once
    finally:
        page.manager.run_lock.release()
    try:
        crowd.watch(time.time() + 120)  # a bound, not the judge: every visitor ends served or refused
    finally:
        crowd.close()
    return crowd.visits, first


def test_eight_visitors_behind_one_address_get_a_few_places_and_the_rest_retry_until_served(proxied_page):
    from specplay.hosting.guard import ADDRESS_FULL, ADDRESS_PENDING

    from loadtest.scenarios import summary

    visits, refused_at_once = _crowd_while_the_engines_are_held(proxied_page, 1)
    assert refused_at_once == [False] * ADDRESS_PENDING + [True] * (8 - ADDRESS_PENDING), refused_at_once
    assert [len(v.refusals) > 0 for v in visits] == refused_at_once
    assert all(m == ADDRESS_FULL for v in visits for _, m in v.refusals)  # each refusal says why, in words
    got = summary(visits, proxied_page.solo, ADDRESS_FULL)
    assert got["addresses"] == 1 and got["served"] == 8 and got["lost"] == 0 and got["errors"] == 0, got
    assert got["equal_to_solo"] == 8 and got["distinct_outputs"] == 8, got  # each its own run, none mixed
    assert got["refusals_with_the_message"] == got["refusals"] >= 8 - ADDRESS_PENDING
    assert 1 <= got["largest_queue_reported"] <= ADDRESS_PENDING, got  # the page never queued more from it


def test_eight_visitors_from_eight_addresses_are_all_queued_and_served_in_order(proxied_page):
    from specplay.hosting.guard import ADDRESS_FULL

    from loadtest.scenarios import summary

    visits, refused_at_once = _crowd_while_the_engines_are_held(proxied_page, 8)
    assert not any(refused_at_once) and not any(v.refusals for v in visits)
    got = summary(visits, proxied_page.solo, ADDRESS_FULL)
    assert got["addresses"] == 8 and got["served"] == 8 and got["lost"] == 0 and got["equal_to_solo"] == 8, got
    assert got["largest_queue_reported"] == 7, got  # one run held on the engines, seven waiting behind it
    assert got["fifo"]["order"] == list(range(8)), got["fifo"]  # served in the order they pressed Run
