"""A load that hangs ends: the warm-up has a deadline (an engine core that stops answering while warming up
fails the load with a message), and so has the whole load (a core that hangs while starting). Either way the
page's status turns to "error", GET /health says so, and a new load is accepted. Fake engines and pairs, no
vLLM; each test waits for events (a state, a released start), never judges by how long something took."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading

import pytest

from specplay.core.events import BASELINE, SPECULATIVE, EngineSettings, PairState, SpecDecodeCounters
from specplay.engine.vllm_engine import Chunk, EngineStartError
from tests.public_page_fixtures import PRESET, _wait
from tests.ui_fixtures import FakePair, synthetic_events

HANG_GUARD_S = 60  # only so that the old code's endless hang fails the test instead of stalling the suite


class _FakeEngine:
    """An in-process engine that starts at once; its streams answer, or (`hang`) never do, as a core that
    stopped (SIGSTOP) while the pair warmed it up."""

    hang = False
    token_ids_only = False  # engine/base.Backend's fields the pair and its memory sampler read
    devices: tuple[int, ...] = ()

    def __init__(self, settings):
        self.settings, self.pids, self.load_seconds, self.stopped = settings, [], 0.0, False

    async def start(self):
        pass

    def prompt_token_ids(self, request):
        return list(request.prompt_token_ids or ()) or [1, 2]

    def counters(self):
        return SpecDecodeCounters()

    live_counters = counters

    async def stream(self, request_id, ids, request):
        if self.hang:
            await asyncio.sleep(3600)
        yield Chunk([7], "x", False, None)
        yield Chunk([8], "y", True, "length")

    async def abort(self, request_id):
        pass

    def is_alive(self):
        return not self.stopped

    stop_grace_s = 0.0

    def shutdown(self):
        self.stopped = True


class _HangingEngine(_FakeEngine):
    hang = True


def _pair(monkeypatch, engine_class):
    """A pair of `engine_class` engines; a hanging engine's warm-up deadline is short, an answering one's too long
    for a loaded machine to miss."""
    from specplay.engine import pair as pair_module

    monkeypatch.setattr(pair_module, "make_engine", engine_class)
    pair = pair_module.EnginePair(EngineSettings(BASELINE, {}), EngineSettings(SPECULATIVE, {}))
    pair.warmup_timeout_s = 0.3 if engine_class.hang else HANG_GUARD_S
    return pair


def _in_thread(fn):
    """fn() in a thread; its outcome (the exception it raised, or None) once it returns."""
    pool = concurrent.futures.ThreadPoolExecutor(1)
    try:
        pool.submit(fn).result(HANG_GUARD_S)
    except concurrent.futures.TimeoutError:
        pytest.fail("the load never ended: the warm-up waited on a hung engine with no deadline")
    except Exception as exc:
        return exc
    finally:
        pool.shutdown(wait=False)  # a hung thread is left behind, not waited for
    return None


def test_a_warm_up_on_a_hung_engine_fails_the_start_naming_the_engine(monkeypatch):
    pair = _pair(monkeypatch, _HangingEngine)
    try:
        error = _in_thread(pair.start)
        assert isinstance(error, EngineStartError), error
        assert str(error).startswith("warm-up failed: the baseline engine stopped answering"), error
        assert "within 0.3 s" in str(error)
        assert pair.status.state == PairState.ERROR and not pair.ready
    finally:
        pair.shutdown()


def test_a_replaced_engine_that_hangs_in_its_warm_up_leaves_the_pair_in_error(monkeypatch):
    pair = _pair(monkeypatch, _FakeEngine)
    try:
        assert _in_thread(pair.start) is None and pair.ready
        from specplay.engine import pair as pair_module

        monkeypatch.setattr(pair_module, "make_engine", _HangingEngine)  # the next engine started hangs
        pair.warmup_timeout_s = 0.3
        error = _in_thread(lambda: pair.replace_engines({SPECULATIVE: EngineSettings(SPECULATIVE, {})}))
        assert isinstance(error, EngineStartError) and "warm-up failed" in str(error)
        assert pair.status.state == PairState.ERROR
    finally:
        pair.shutdown()


def test_the_page_whose_warm_up_hangs_reports_an_error_and_loads_again(monkeypatch):
    from specplay.hosting.health import health_response
    from specplay.hosting.manager import PairManager
    from specplay.presets.catalog import get_preset

    engines = iter([_HangingEngine, _FakeEngine])
    pairs = []

    def factory(preset, hardware=None, log=print):
        pairs.append(_pair(monkeypatch, next(engines)))
        return pairs[-1]

    manager = PairManager({PRESET: get_preset(PRESET)}, PRESET, pair_factory=factory, log=lambda *a: None)
    try:
        manager.load(PRESET)
        assert _wait(lambda: manager.status().state != "loading", HANG_GUARD_S), "still loading"
        status = manager.status()
        assert status.state == "error" and "warm-up failed" in status.message, status
        assert health_response(status) == (503, {"status": "error", "preset": PRESET})
        assert all(engine.stopped for engine in pairs[0].engines.values())  # the hung pair was shut down
        manager.load(PRESET)  # accepted: a retry
        assert _wait(lambda: manager.status().state == "ready", HANG_GUARD_S)
        assert manager.pair is pairs[1] and health_response(manager.status())[0] == 200
    finally:
        manager.shutdown()


class _QuickPair(FakePair):
    """A pair that is ready as soon as it is started."""

    def __init__(self, preset):
        super().__init__(lambda r: synthetic_events([1], [[1]]), preset)

    def start(self, progress=None):
        pass


class _StuckPair(FakePair):
    """A pair whose start never returns until the test says so: a core hung while loading."""

    def __init__(self, preset):
        super().__init__(lambda r: synthetic_events([1], [[1]]), preset)
        self.release, self.shut = threading.Event(), threading.Event()

    def start(self, progress=None):
        self.release.wait(HANG_GUARD_S)

    def shutdown(self):
        self.shut.set()


def test_a_load_past_its_deadline_is_an_error_and_a_new_load_is_accepted():
    from specplay.hosting.health import ALIVE, health_response
    from specplay.hosting.manager import PairManager
    from specplay.presets.catalog import get_preset

    pairs = []

    def factory(preset, hardware=None, log=print):
        pairs.append(_StuckPair(preset) if not pairs else _QuickPair(preset))
        return pairs[-1]

    manager = PairManager({PRESET: get_preset(PRESET)}, PRESET, pair_factory=factory, log=lambda *a: None,
                          load_timeout_s=0.3)
    try:
        manager.load(PRESET)
        assert _wait(lambda: manager.status().state != "loading", HANG_GUARD_S), "a hung load stayed 'loading'"
        status = manager.status()
        assert status.state == "error" and "did not become ready within 0.3 s" in status.message
        assert health_response(status) == (503, {"status": "error", "preset": PRESET})
        assert health_response(status)[1]["status"] not in ALIVE  # the container's check: unhealthy
        manager.load_timeout_s = HANG_GUARD_S  # the quick pair's load: no deadline a loaded machine could miss
        manager.load(PRESET)  # accepted, although the first load's thread is still stuck
        assert _wait(lambda: manager.status().state == "ready", HANG_GUARD_S)
        assert manager.pair is pairs[1]
        pairs[0].release.set()  # the stuck start returns at last: its pair is stale, shut down, not installed
        assert pairs[0].shut.wait(HANG_GUARD_S)
        assert manager.pair is pairs[1] and manager.status().state == "ready"
    finally:
        pairs[0].release.set()
        manager.shutdown()


def test_a_reload_that_hangs_counts_as_a_failed_attempt_and_is_retried():
    """Recovering after an engine died: a reload stuck past the deadline is retried like one that raised."""
    from specplay.hosting.health import health_response
    from specplay.hosting.manager import PairManager
    from specplay.presets.catalog import get_preset

    pairs, manager, hanging = [], None, threading.Event()

    def log(line):  # the hung reload was given up on: its retry (a quick pair) gets no deadline it could miss
        if "not ready after" in line:
            manager.load_timeout_s = HANG_GUARD_S
            hanging.clear()

    def factory(preset, hardware=None, log=print):
        # Only a load that reaches the factory before the reload's deadline hangs. Not "the second pair made":
        # on a loaded machine (CI, 2026-12-07) the given-up reload's thread, still stopping the old sampler,
        # reached the factory after its retry had, so the retry got the stuck pair and the test failed.
        pairs.append(_StuckPair(preset) if hanging.is_set() else _QuickPair(preset))
        return pairs[-1]

    manager = PairManager({PRESET: get_preset(PRESET)}, PRESET, pair_factory=factory, log=log,
                          load_timeout_s=HANG_GUARD_S, retry_delays=(0.1,))
    try:
        manager.load(PRESET)
        assert _wait(lambda: manager.status().state == "ready", HANG_GUARD_S)
        manager.load_timeout_s = 0.5  # the reload's: it hangs
        hanging.set()
        first = manager.pair
        first.engines[BASELINE].is_alive = lambda: False
        assert manager.reload_if_dead()
        assert health_response(manager.status())[1]["status"] == "recovering"
        # 3 pairs: the first, the given-up reload's (stuck, or made after its deadline and thrown away as
        # stale), the retry's; the one installed is a quick one made after the death
        assert _wait(lambda: len(pairs) == 3 and manager.status().state == "ready", HANG_GUARD_S), manager.status()
        assert manager.pair is not first and isinstance(manager.pair, _QuickPair) and manager.pair in pairs
    finally:
        for pair in pairs:
            if isinstance(pair, _StuckPair):
                pair.release.set()
        manager.shutdown()
