"""More tabs than the page keeps sessions for (issue 32, 5): the 1 Hz status poll made (or revived) its tab's
session in Gradio's least-recently-used store on every tick, so with more tabs open than `session_capacity`
each poll evicted another visitor's session: its history and its replay. A real Gradio page on a FakePair;
the polls are the page's own unqueued calls over HTTP, from more sessions than it keeps."""

from __future__ import annotations

import json

import httpx

from tests.public_page_fixtures import _manager, queued_call
from tests.ui_fixtures import FakePair, synthetic_events

CAPACITY = 3


def _run(url, index, session) -> list:
    """One run of `session`, read to its end: the last message's outputs."""
    message = queued_call(url, index, ["hello", 3, 0.0, "sequential", None], session)
    assert message["success"], message
    return message["output"]["data"]


def test_polls_from_more_tabs_than_the_page_keeps_evict_no_visitors_session(tmp_path, monkeypatch):
    from specplay.page import ui
    from specplay.hosting import closing
    from specplay.hosting.settings import PageSettings
    from tests.ui_fixtures import free_port

    monkeypatch.setattr(ui, "PAGE_DIR", tmp_path / "page")
    events = synthetic_events([1, 2, 3], [[1], [2, 3]])
    manager = _manager(lambda p, hw, log=print: FakePair(lambda r: events, p))
    demo = ui.build_page(manager, PageSettings(session_capacity=CAPACITY))
    ui.launch(demo, "127.0.0.1", free_port(), block=False, session_capacity=CAPACITY)
    try:
        url = demo.local_url.rstrip("/")
        run = next(i for i, fn in demo.fns.items() if fn.api_name == "run")
        poll = next(i for i, fn in demo.fns.items() if getattr(fn.fn, "__name__", "") == "poll")
        outputs = demo.fns[run].outputs
        rows = next(i for i, block in enumerate(outputs) if getattr(block, "elem_id", None) == "history")

        first = _run(url, run, "alice")
        assert len(first[rows]["data"]) == 1
        for tick in range(3):  # three seconds of polling from 4 × the tabs the page keeps sessions for
            for tab in range(4 * CAPACITY):
                answer = httpx.post(f"{url}/gradio_api/run/predict", timeout=300, json={  # the first imports torch
                    "data": [None], "fn_index": poll, "session_hash": f"tab-{tab}", "event_data": None,
                    "trigger_id": None})
                assert answer.status_code == 200, answer.text
                drawn = answer.json()["data"]
                if tick == 0:  # a first poll draws the status, and hands the browser the key of what it drew
                    assert "Ready" in json.dumps(drawn), answer.text
                    key = drawn[-1]
        again = httpx.post(f"{url}/gradio_api/run/predict", timeout=30, json={
            "data": [key], "fn_index": poll, "session_hash": "tab-0", "event_data": None, "trigger_id": None})
        assert "Ready" not in json.dumps(again.json()["data"]), again.text  # nothing changed: nothing redrawn
        second = _run(url, run, "alice")  # her session survived: her history goes on
        assert [row[0] for row in second[rows]["data"]] == [1, 2], second[rows]
    finally:
        closing.close(demo)
        manager.shutdown()


def test_forged_posts_and_invented_sessions_leave_the_honest_visitor_served(tmp_path, monkeypatch):
    """Issue 36, 1 and 3: six connections posting a forged 41 kB run JSON (a thousand made-up steps of token
    ids) to every unqueued handler, each call under a new invented session, beside an honest visitor's runs.
    Before: the stepper decoded every post (~4 CPU-s each on the real tokenizer) and each call made a session
    (~127 a second evicted real tabs). Now nothing posted is decoded and no unqueued call makes a session: the
    honest visitor's runs finish, her history goes on, and Gradio keeps only the sessions of queued events."""
    import threading
    import time

    from specplay.page import ui
    from specplay.hosting import closing
    from specplay.hosting.settings import PageSettings
    from tests.ui_fixtures import free_port

    monkeypatch.setattr(ui, "PAGE_DIR", tmp_path / "page")
    events = synthetic_events([1, 2, 3], [[1], [2, 3]])
    manager = _manager(lambda p, hw, log=print: FakePair(lambda r: events, p))
    demo = ui.build_page(manager, PageSettings(session_capacity=CAPACITY))
    ui.launch(demo, "127.0.0.1", free_port(), block=False, session_capacity=CAPACITY)
    step = {"start": 1, "tokens": 5, "accepted": 4, "drafted": 4, "proposed": [250, 251, 252, 253],
            "target_token": 254, "seconds": 0.01}
    forged = {"run_id": "x", "speedup": 9.9, "preset": "smollm2-ngram",
              "speculative": {"token_ids": list(range(240, 6240)), "step_detail": [step] * 1000}}
    assert len(json.dumps(forged)) > 40_000
    unqueued = [i for i, fn in demo.fns.items() if fn.queue is False and fn.fn is not None]
    stop, calls = threading.Event(), [0]

    def flood(worker: int):
        with httpx.Client(timeout=30) as client:
            while not stop.is_set():
                for index in unqueued:
                    client.post(f"{url}/gradio_api/run/predict", json={
                        "data": [forged] * len(demo.fns[index].inputs), "fn_index": index,
                        "session_hash": f"forged-{worker}-{calls[0]}"})
                    calls[0] += 1

    try:
        url = demo.local_url.rstrip("/")
        run = next(i for i, fn in demo.fns.items() if fn.api_name == "run")
        rows = next(i for i, b in enumerate(demo.fns[run].outputs) if getattr(b, "elem_id", None) == "history")
        _run(url, run, "alice")
        floods = [threading.Thread(target=flood, args=(w,), daemon=True) for w in range(6)]
        for t in floods:
            t.start()
        started = time.monotonic()
        second = _run(url, run, "alice")
        took = time.monotonic() - started
        stop.set()
        for t in floods:
            t.join(timeout=60)
        assert calls[0] > 50, calls  # the flood did run beside her
        assert [row[0] for row in second[rows]["data"]] == [1, 2], second[rows]  # her session survived
        assert took < 60, took
        kept = set(demo.state_holder.session_data)
        assert kept == {"alice"}, sorted(kept)[:5]  # no invented session was stored
    finally:
        stop.set()
        closing.close(demo)
        manager.shutdown()
