"""Acceptance per request (vLLM >= 0.29) or the engine's delta: fake outputs and engines."""

from __future__ import annotations

import dataclasses

import pytest


from specplay.page import views
from specplay.core.events import BASELINE, SPECULATIVE, SpecDecodeCounters
from specplay.run.result import RunResult
from tests.ui_fixtures import comparison_of



# -- acceptance per request (vLLM >= 0.29) or the engine's delta (0.26): no vLLM, fake outputs and engines ----
def test_histogram_becomes_the_stat_loggers_counters():
    # histogram[j]: verify steps that accepted j drafted tokens (k=4); a step accepting j accepts positions < j
    counters = SpecDecodeCounters.from_histogram([3, 1, 0, 2, 1], num_draft_tokens=26)
    steps = [0, 0, 0, 1, 3, 3, 4]  # the same steps, counted as vLLM's stat logger counts them
    assert counters.num_drafts == len(steps) == 7 and counters.num_draft_tokens == 26
    assert counters.num_accepted_tokens == sum(steps) == 11
    assert counters.accepted_per_position == tuple(sum(j > i for j in steps) for i in range(4)) == (4, 3, 3, 1)
    assert counters.mean_acceptance_length == pytest.approx(1 + 11 / 7)
    assert SpecDecodeCounters.from_histogram([5, 0, 0], 10).accepted_per_position == (0, 0)
    assert counters.plus(counters).minus(counters) == counters


def test_outputs_without_per_request_metrics_fall_back():
    from types import SimpleNamespace as NS

    from specplay.engine.vllm_engine import chunk_of, request_counters, supports_per_request_metrics

    metrics = NS(num_spec_tokens=2, histogram=[1, 2, 3], num_draft_tokens=12)
    new = NS(finished=True, outputs=[NS(token_ids=(7, 8), text="ab", finish_reason="length",
                                        spec_decode_metrics=metrics)])
    old = NS(finished=True, outputs=[NS(token_ids=(7, 8), text="ab", finish_reason="length")])  # vLLM 0.26
    assert chunk_of(new)[:5] == ([7, 8], "ab", True, "length", SpecDecodeCounters(6, 12, 8, (5, 3)))
    assert chunk_of(old)[:5] == ([7, 8], "ab", True, "length", None)
    assert request_counters(NS(spec_decode_metrics=None)) is None  # metrics off, or an aborted request
    assert request_counters(NS(spec_decode_metrics=NS(histogram=[1]))) is None  # an unexpected shape

    @dataclasses.dataclass
    class Args026:
        speculative_config: dict | None = None

    @dataclasses.dataclass
    class Args032(Args026):
        per_request_spec_decode_metrics: str = "none"

    assert not supports_per_request_metrics(Args026) and supports_per_request_metrics(Args032)


class _FakeSpecEngine:
    """A speculative engine shared with someone else: its engine-wide counters also count another request's
    drafts. `exact` is what vLLM >= 0.29 attaches to the last chunk (None: vLLM 0.26)."""

    def __init__(self, exact):
        from specplay.engine.vllm_engine import Chunk

        self.exact, self.total, self.Chunk = exact, SpecDecodeCounters(), Chunk

    def counters(self):
        return self.total

    live_counters = counters

    def prompt_token_ids(self, request):
        return [1, 2, 3]

    async def stream(self, request_id, ids, request):
        self.total = self.total.plus(SpecDecodeCounters(5, 20, 9, (4, 3, 2, 0)))  # another visitor's request
        yield self.Chunk([4], "a", False, None)
        yield self.Chunk([5, 6], "bc", True, "length", self.exact)

    async def abort(self, request_id):
        pass

    stop_grace_s = 0.0

    def shutdown(self):
        pass


@pytest.mark.parametrize("exact", [SpecDecodeCounters(1, 4, 1, (1, 0, 0, 0)), None])
def test_run_and_batch_prefer_per_request_counters(exact):
    from specplay.core.events import EngineSettings
    from specplay.engine.pair import EnginePair
    from specplay.core.events import ENGINE_DELTA, PER_REQUEST, GenerationRequest, RunFinished

    pair = EnginePair(EngineSettings(BASELINE, {}), EngineSettings(SPECULATIVE, {}), warmup=False)
    pair.engines = {BASELINE: _FakeSpecEngine(None), SPECULATIVE: _FakeSpecEngine(exact)}
    noisy = SpecDecodeCounters(5, 20, 9, (4, 3, 2, 0))  # the engine-wide delta, skewed by the other request
    try:
        for schedule in ("concurrent", "sequential"):
            finished = pair.run(GenerationRequest(prompt="x", max_tokens=3), schedule=schedule)[-1]
            assert isinstance(finished, RunFinished) and finished.error is None
            assert (finished.counters, finished.counters_source) == (
                (exact, PER_REQUEST) if exact else (noisy, ENGINE_DELTA))
        batch = pair.run_batch(SPECULATIVE, [GenerationRequest(prompt="x", max_tokens=3)] * 3, concurrency=2)
        assert (batch.counters, batch.counters_source) == (
            (exact.plus(exact).plus(exact), PER_REQUEST) if exact else (
                noisy.plus(noisy).plus(noisy), ENGINE_DELTA))
    finally:
        pair.shutdown()
    c = comparison_of([RunFinished("run-0", 1.0, exact or noisy, counters_source=finished.counters_source)])
    result = RunResult.of(c)
    assert result.model_dump(mode="json")[SPECULATIVE]["acceptance_source"] == finished.counters_source
    assert "acceptance: " in views.explain_html(result.model_copy(update={"speedup": 1.0}))
