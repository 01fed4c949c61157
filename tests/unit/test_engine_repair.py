"""After an engine dies, the page starts only that engine again; the live one stays loaded (the page once
reloaded both: twice the wait, 137-163 s on a CPU). Real presets and engine settings, the manager's own
load path (`switch_in_place`); the pair is a stand-in that records which engines it was asked to replace.
On real engines: test_app_e2e's kill -9 test."""

from __future__ import annotations

import time

import pytest

from specplay.core.events import BASELINE, SPECULATIVE
from specplay.presets.catalog import engine_settings, get_preset
from tests.ui_fixtures import FakeEngine, FakePair, synthetic_events

PRESET = "smollm2-ngram"


class RepairablePair(FakePair):
    """A FakePair whose engines carry the preset's real settings and which replaces engines as EnginePair
    does (replace_engines), recording each call."""

    def __init__(self, preset):
        events = synthetic_events([1, 2, 3], [[1], [2, 3]])
        super().__init__(lambda r: events, preset)
        self.replaced: list[tuple[str, ...]] = []
        for role, settings in zip((BASELINE, SPECULATIVE), engine_settings(preset)):
            self.engines[role] = _engine(settings)

    def replace_engines(self, settings, tag=None, progress=None):
        self.replaced.append(tuple(settings))
        for role, role_settings in settings.items():
            self.engines[role] = _engine(role_settings)
        self.tag = tag or self.tag


def _engine(settings) -> FakeEngine:
    engine = FakeEngine()
    engine.settings = settings
    return engine


def _dead(engine: FakeEngine) -> None:
    engine.is_alive = lambda: False


def _wait(condition, timeout=10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def test_switch_in_place_replaces_a_dead_engine_alone():
    from specplay.run.pairs import switch_in_place

    preset = get_preset(PRESET)
    pair = RepairablePair(preset)
    kept = pair.engines[SPECULATIVE]
    assert switch_in_place(pair, preset, dead=(BASELINE,), log=lambda m: None)
    assert pair.replaced == [(BASELINE,)] and pair.engines[SPECULATIVE] is kept


def test_a_switch_with_a_dead_baseline_starts_a_new_pair():
    """The speculative engine changes (another preset) and the baseline died: no engine can stay."""
    from specplay.run.pairs import switch_in_place

    pair = RepairablePair(get_preset(PRESET))
    assert not switch_in_place(pair, get_preset("smollm2-self-draft"), dead=(BASELINE,), log=lambda m: None)
    assert pair.replaced == []
    assert switch_in_place(pair, get_preset("smollm2-self-draft"), log=lambda m: None)  # alive: in place
    assert pair.replaced == [(SPECULATIVE,)]


@pytest.fixture
def manager(monkeypatch):
    """A page's PairManager whose pairs are RepairablePairs; `manager.opened` lists every pair it opened."""
    import specplay.run.pairs as pairs
    from specplay.hosting.manager import PairManager

    opened = []

    def open_pair(preset, hardware=None, warmup=True, log=print):
        opened.append(RepairablePair(preset))
        return opened[-1]
    monkeypatch.setattr(pairs, "open_pair", open_pair)
    manager = PairManager({PRESET: get_preset(PRESET)}, PRESET, log=lambda *a: None)
    manager.opened = opened
    try:
        manager.load(PRESET)
        assert _wait(lambda: manager.status().state == "ready")
        yield manager
    finally:
        manager.shutdown()


@pytest.mark.parametrize("role", [BASELINE, SPECULATIVE])
def test_the_page_reloads_only_the_engine_that_died(manager, role):
    pair = manager.pair
    other = pair.engines[SPECULATIVE if role == BASELINE else BASELINE]
    _dead(pair.engines[role])
    assert manager.reload_if_dead() == (role,)
    assert _wait(lambda: manager.status().state == "ready")
    assert len(manager.opened) == 1 and manager.pair is pair  # no new pair: the same one, repaired
    assert pair.replaced == [(role,)] and pair.engines[role].is_alive()
    assert pair.engines[SPECULATIVE if role == BASELINE else BASELINE] is other  # stayed loaded


def test_a_hung_engine_reloads_both(manager):
    """An engine that stopped answering may still hold its request: both engines are started anew."""
    first = manager.pair
    assert manager.reload_if_dead(hung=True) == (BASELINE, SPECULATIVE)
    assert _wait(lambda: len(manager.opened) == 2 and manager.status().state == "ready")
    assert first.replaced == [] and manager.pair is manager.opened[1]
