"""A long run's frames come less often (page/live_run.frame_interval): a 900-token frame is ~200 kB, and at
4 frames a second a browser on 2 loaded cores fell behind until the guard ended the run as unread."""

from __future__ import annotations

from specplay.core.events import BASELINE, SPECULATIVE, GenerationRequest
from specplay.presets.catalog import get_preset
from tests.ui_fixtures import FakeEngine, synthetic_events


def _frame(tokens: int) -> dict:
    from specplay.page.live_run import LiveRun

    engine = FakeEngine({i: f" word{i}" for i in range(tokens + 1)})
    live = LiveRun(get_preset("smollm2-ngram"), GenerationRequest(prompt="p", max_tokens=tokens),
                   {BASELINE: engine.decode, SPECULATIVE: engine.decode})
    for e in synthetic_events(list(range(tokens)), [[0]] + [[i, i + 1] for i in range(1, tokens, 2)]):
        live.add(e)
    return live.frame()


def test_short_frames_come_4_a_second_and_a_900_token_frame_under_250_kb_a_second():
    from specplay.page.live_run import FRAME_BYTES_PER_S, UPDATE_HZ, frame_interval

    assert frame_interval(_frame(20)) == 1.0 / UPDATE_HZ
    long = _frame(900)
    size = sum(len(v) for v in long.values() if isinstance(v, str))
    assert size > 100_000  # the panes' per-token spans: the reason for the pacing
    interval = frame_interval(long)
    assert interval > 1.0 / UPDATE_HZ and size / interval <= FRAME_BYTES_PER_S * 1.001
