""""Run 3×" on the Compare tab (issue 31, 2): one queued event runs the prompt three times on the engines and
shows the runs pooled (run.noise.pooled_runs): one speedup, a narrower 95% interval, the single runs'
spread. Stop during any run ends the series; the operator's limits cap how many runs one event makes.
A real Gradio page and queue on a FakePair (no engines)."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from types import SimpleNamespace

import httpx
import pytest

from tests.public_page_fixtures import _manager, by_elem_id, queued_call
from specplay.core.events import BASELINE, SPECULATIVE, StepEvent
from tests.ui_fixtures import FakePair, synthetic_events

TOKENS = 40


def _events(run: int):
    """Equal-noise runs: 40 baseline tokens one a step, the speculative engine 2 a step, every step of either
    engine costing 10 ms ± 30% (drawn with the run's own seed: the same noise, different draws)."""
    import numpy as np

    rng = np.random.default_rng(run)
    spec = [[0]] + [[i, i + 1] for i in range(1, TOKENS - 1, 2)]
    events, clock = synthetic_events(list(range(TOKENS)), spec, k=4, t0=0.0), {}
    timed = []
    for event in events:
        if isinstance(event, StepEvent):
            clock[event.engine] = clock.get(event.engine, 0.0) + 0.01 * max(0.2, 1 + 0.3 * rng.standard_normal())
            event = dataclasses.replace(event, time=clock[event.engine], submitted_at=0.0)
        timed.append(event)
    return timed


class TimedPair(FakePair):
    """A FakePair that keeps the events' own step times (shifted to now), so the noise is the one drawn."""

    def stream(self, request, schedule="concurrent", cancel=None):
        started = time.monotonic()
        for event in super().stream(request, schedule, cancel):
            if isinstance(event, StepEvent):
                original = self.events_for.last[event.engine].pop(0)
                event = dataclasses.replace(event, time=started + original, submitted_at=started)
            yield event


@pytest.fixture
def page(tmp_path, monkeypatch):
    from specplay.page import ui
    from specplay.hosting import closing
    from tests.ui_fixtures import free_port

    monkeypatch.setattr(ui, "PAGE_DIR", tmp_path / "page")
    calls = []

    def events_for(request):
        calls.append(len(calls) + 1)
        events = _events(len(calls))
        events_for.last = {role: [e.time for e in events if isinstance(e, StepEvent) and e.engine == role]
                           for role in (BASELINE, SPECULATIVE)}
        return events

    manager = _manager(lambda p, hw, log=print: TimedPair(events_for, p, step_delay=0.005))
    demo = ui.build_page(manager)
    ui.launch(demo, "127.0.0.1", free_port(), block=False)
    try:
        yield SimpleNamespace(demo=demo, url=demo.local_url.rstrip("/"), calls=calls,
                              fn=next(i for i, fn in demo.fns.items() if fn.api_name == "run_series"))
    finally:
        closing.close(demo)
        manager.shutdown()


def series(page, session: str, on_message=None) -> dict:
    """One "Run 3×" event of `session`, read to its end: its last outputs by elem_id."""
    message = queued_call(page.url, page.fn, ["hello", TOKENS, 0.0, "concurrent", None], session, on_message)
    return by_elem_id(page.demo, page.fn, message)


def _width(interval) -> float:
    return interval[1] - interval[0]


def test_run_three_times_runs_three_times_and_shows_a_pooled_interval_no_wider_than_one_runs(page):
    out = series(page, "s1")
    assert page.calls == [1, 2, 3]
    assert len(out["history"]["data"]) == 3  # three runs in the session's history
    pooled = out["result"]["pooled"]
    assert pooled["runs"] == 3 and pooled["speedup_interval"] and len(pooled["single_run_intervals"]) == 3
    singles = pooled["single_run_intervals"]
    assert all(singles) and _width(pooled["speedup_interval"]) <= min(map(_width, singles)), json.dumps(pooled)
    assert "Over 3 of 3 runs, pooled" in out["explain"] and "Single runs measured" in out["explain"]
    figures = [row[0] for row in out["summary"]["data"]]
    assert "speedup 95% interval, 3 runs pooled" in figures, figures


def test_stop_during_the_second_run_stops_the_rest(page):
    stopped = threading.Event()

    def on_message(line: str):
        if not stopped.is_set() and "Run 2 of 3" in line:
            stopped.set()  # Stop is not queued: it reaches the session's series while it streams
            response = httpx.post(f"{page.url}/gradio_api/run/stop", json={"data": [], "session_hash": "s2"},
                                  timeout=30)
            assert response.status_code == 200, response.text

    out = series(page, "s2", on_message)
    assert stopped.is_set()
    assert page.calls == [1, 2]  # the third run never started
    assert "ended after 1 of 3 runs: it was stopped" in out["page-error"], out["page-error"]
    assert [row[0] for row in out["history"]["data"]] == [1, 2]


def test_runs_are_capped_by_the_pages_token_limit():
    from specplay.page.compare_run import MAX_RUNS, RunPlace, runs_allowed
    from specplay.page.inputs import max_tokens_limit
    from specplay.presets.catalog import get_preset
    from tests.public_page_fixtures import PRESET

    manager = SimpleNamespace(preset=get_preset(PRESET))
    place = RunPlace(manager, None, "", None)
    limit = max_tokens_limit(manager.preset)
    assert runs_allowed(place, 16) == MAX_RUNS
    assert runs_allowed(place, limit // 2) == 2
    assert runs_allowed(place, limit) == 1  # a run at the limit already: one run, never three
    assert runs_allowed(place, "nan") == 1
