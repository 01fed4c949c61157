"""The explanation and the what-if know the schedule (issue 45): on the concurrent schedule the step-time
factor holds what sharing the hardware cost, so the draft's share is read from the stretch where both engines
ran beside each other once the run's solo stretch has measured the sharing, and never from the whole run's
ratio; without a solo stretch nothing of the step time is blamed on the draft."""

from __future__ import annotations

import pytest

from specplay.core.events import BASELINE, SPECULATIVE, RunFinished, RunStarted, SpecDecodeCounters, StepEvent
from specplay.run import whatif
from specplay.run.explain import explain
from specplay.run.result import RunResult
from specplay.run.sharing import sharing_of
from tests.ui_fixtures import comparison_of

# The H100 run (dummy-llama8b-dflash): the baseline's step 6.27 ms alone, 9.06 ms beside the
# speculative engine; a speculative step 1.23× a baseline step when neither is slowed by the other more.
ALONE, BESIDE, DRAFT = 0.00627, 0.00906, 1.23
K = 7  # DFlash's block: one draft pass proposes all k


def _run(schedule: str, spec_steps: int = 12, tokens_per_step: int = 4, base_tokens: int = 60,
         spec_step_s: float = BESIDE * DRAFT, base_beside_s: float = BESIDE, base_alone_s: float = ALONE,
         spec_start: float | None = None) -> RunResult:
    """A run with stand-in step times: the baseline one token a step, `base_beside_s` apart while the
    speculative engine decodes and `base_alone_s` after it finished; the speculative engine `tokens_per_step`
    a step, `spec_step_s` apart. Sequential: the speculative engine starts after the baseline (`spec_start`)."""
    t0 = 100.0
    spec_times = [t0 + 0.02 + i * spec_step_s for i in range(spec_steps)]
    base_times, t = [], t0 + 0.02
    for _ in range(base_tokens):
        base_times.append(t)
        t += base_beside_s if t < spec_times[-1] else base_alone_s
    if spec_start is not None:
        spec_times = [spec_start + x - t0 for x in spec_times]
    events = [RunStarted("run-0", (1, 2, 3), schedule)]
    for i, at in enumerate(base_times):
        events.append(StepEvent(engine=BASELINE, step=i, token_ids=(i,), text="", time=at, submitted_at=t0,
                                finished=i == base_tokens - 1, finish_reason="length"))
    ids = iter(range(10_000))
    for i, at in enumerate(spec_times):
        n = 1 if i == 0 else tokens_per_step
        events.append(StepEvent(engine=SPECULATIVE, step=i, token_ids=tuple(next(ids) for _ in range(n)), text="",
                                time=at, submitted_at=spec_times[0] - 0.02, finished=i == spec_steps - 1,
                                finish_reason="length"))
    drafts = spec_steps - 1
    counters = SpecDecodeCounters(drafts, drafts * K, drafts * (tokens_per_step - 1))
    events.append(RunFinished("run-0", max(base_times[-1], spec_times[-1]) + 0.01, counters))
    steps = sorted(events[1:-1], key=lambda e: e.time)  # as the pair's queue delivers them: by arrival
    return RunResult.of(comparison_of([events[0], *steps, events[-1]], k=K))


def test_concurrent_run_splits_the_step_time_into_sharing_and_the_draft():
    result = _run("concurrent")
    sharing = sharing_of(result)
    assert sharing.role == BASELINE and sharing.measured
    assert sharing.alone_s == pytest.approx(ALONE) and sharing.beside_s == pytest.approx(BESIDE)
    assert sharing.draft_cost == pytest.approx(DRAFT, rel=1e-6)
    # the whole run's ratio holds the sharing: the baseline's mean mixes its shared and its solo steps
    assert result.step_cost_ratio > DRAFT + 0.1
    sentence = explain(result, "dflash", K, "gpu")
    assert "sharing the hardware slowed the baseline's own step from 6.27 ms alone to 9.06 ms" in sentence
    assert "(1.44×)" in sentence and "a speculative step took 1.23× a baseline step" in sentence
    assert f"about {DRAFT - 1:.0%} of a target step" in sentence  # the draft's share, uncontended-equivalent
    wrong = f"about {result.step_cost_ratio - 1:.0%} of a target step"  # before: read from the contended ratio
    assert wrong not in sentence and sentence.count(". ") == 0


def test_concurrent_run_without_a_solo_stretch_blames_nothing_on_the_draft():
    # both engines end together: neither ran alone, so there is no uncontended measure
    result = _run("concurrent", spec_steps=16, tokens_per_step=4, base_tokens=61,
                  spec_step_s=4 * BESIDE, base_beside_s=BESIDE)
    assert not sharing_of(result).measured
    sentence = explain(result, "dflash", K, "gpu")
    assert "the step time includes what sharing the hardware cost" in sentence
    assert "draft is slow" not in sentence and "target step" not in sentence
    m = whatif.measured(result, K, 1)
    assert m.draft_cost is None and "include the sharing" in m.cost_note


def test_sequential_run_reads_the_draft_from_the_whole_ratio_and_names_no_sharing():
    result = _run("sequential", spec_step_s=ALONE * 1.92, base_beside_s=ALONE, spec_start=110.0)
    assert sharing_of(result) is None and result.step_cost_ratio == pytest.approx(1.92, rel=1e-6)
    sentence = explain(result, "dflash", K, "gpu")
    assert "its one pass adds about 92% of a target step" in sentence and "sharing" not in sentence
    assert whatif.measured(result, K, 1).draft_cost == pytest.approx(0.92, rel=1e-6)


def test_whatif_starts_from_the_draft_share_on_the_concurrent_schedule():
    result = _run("concurrent")
    m = whatif.measured(result, K, 1)
    assert m.draft_cost == pytest.approx(DRAFT - 1, rel=1e-6)
    assert m.step_cost_ratio == pytest.approx(result.step_cost_ratio)  # the run's own figure stays as measured
    assert "beside each other (1.23×" in m.cost_note
