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
    from specplay.page.manager import PairManager

    events = synthetic_events([1, 2, 3], [[1], [2, 3]])
    factory = factory or (lambda p, hw, log=print: FakePair(lambda r: events, p))
    manager = PairManager({PRESET: get_preset(PRESET)}, PRESET, pair_factory=factory, log=lambda *a: None, **kwargs)
    manager.load(PRESET)
    assert _wait(lambda: manager.status().state == "ready", 30)
    return manager
