"""Shared helpers for the public-page tests (tests/unit/test_public_page*.py): a PairManager on FakePairs,
loaded and ready, and a bounded wait."""

from __future__ import annotations

import time

from specplay.presets.catalog import get_preset
from tests.ui_fixtures import FakePair, synthetic_events

PRESET = "smollm2-ngram"


def _wait(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.02)
    return predicate()


def _manager(factory=None, **kwargs):
    from specplay.hosting.manager import PairManager

    events = synthetic_events([1, 2, 3], [[1], [2, 3]])
    factory = factory or (lambda p, hw, log=print: FakePair(lambda r: events, p))
    manager = PairManager({PRESET: get_preset(PRESET)}, PRESET, pair_factory=factory, log=lambda *a: None, **kwargs)
    manager.load(PRESET)
    assert _wait(lambda: manager.status().state == "ready", 30)
    return manager


def queued_call(url: str, fn_index: int, data: list, session: str, on_message=None, params=None) -> dict:
    """One queued event of `session` joined over HTTP and read to its end: its process_completed message
    (`on_message` sees every line of the stream). `params`: the page address's query (as the browser sends it)."""
    import json

    import httpx

    body = {"data": data, "fn_index": fn_index, "session_hash": session, "event_data": None, "trigger_id": None}
    joined = httpx.post(f"{url}/gradio_api/queue/join", json=body, params=params, timeout=30)
    assert joined.status_code == 200, joined.text
    with httpx.stream("GET", f"{url}/gradio_api/queue/data", params={"session_hash": session},
                      timeout=120) as stream:
        for line in stream.iter_lines():
            if on_message:
                on_message(line)
            message = json.loads(line[6:]) if line.startswith("data: ") else {}
            if message.get("msg") == "process_completed":
                return message
    raise AssertionError(f"event {fn_index} of {session} never completed")


def by_elem_id(demo, fn_index: int, message: dict) -> dict:
    """A completed event's outputs by their components' elem_id."""
    outputs = demo.fns[fn_index].outputs
    return {getattr(b, "elem_id", None): v for b, v in zip(outputs, message["output"]["data"])}


def words_pair(preset, n: int, step_delay: float):
    """A FakePair whose run is n tokens a side, " w0 w1 …" (the speculative side accepting one draft a step,
    so steps of 2), step_delay seconds a step: the browser tests' page behind fake_page."""
    from specplay.core.events import BASELINE, SPECULATIVE

    events = synthetic_events(list(range(n)), [[0]] + [[i, i + 1] for i in range(1, n, 2)])
    pair = FakePair(lambda r: events, preset, step_delay=step_delay)
    for role in (BASELINE, SPECULATIVE):
        pair.engines[role].vocab = {i: f" w{i}" for i in range(n + 2)}
    return pair


def fake_page(tmp_path, monkeypatch, make_pair, settings=None):
    """A real page on a FakePair from `make_pair(preset)`, served on a free port (a generator for a pytest
    fixture): yields the demo and its URL, closes both after. `settings`: the operator's PageSettings."""
    from types import SimpleNamespace

    from specplay.page import ui
    from specplay.hosting import closing
    from tests.ui_fixtures import free_port

    monkeypatch.setattr(ui, "PAGE_DIR", tmp_path / "page")
    manager = _manager(lambda p, hw, log=print: make_pair(p))
    demo = ui.build_page(manager, settings)
    ui.launch(demo, "127.0.0.1", free_port(), block=False)
    try:
        yield SimpleNamespace(demo=demo, url=demo.local_url.rstrip("/"),
                              fns={fn.api_name: i for i, fn in demo.fns.items() if fn.api_name})
    finally:
        closing.close(demo)
        manager.shutdown()
