"""Noise you can see: the speedup and both factors carry a 95% bootstrap interval from the run's own
per-step times (specplay.run.noise), the JSON and the CLI report show them, and the explanation says
"within noise" when the speedup's interval holds 1×. Synthetic runs, deterministic (a fixed-seed jitter)."""

from __future__ import annotations

import io
import random

import pytest

from specplay.core.events import BASELINE, SPECULATIVE, RunFinished, RunStarted, SpecDecodeCounters, StepEvent
from specplay.run.comparison import Comparison
from specplay.run.explain import explain
from specplay.run.noise import noise_of, step_units
from specplay.run.result import RunResult

T0 = 100.0


def _stream(engine, sizes, step_s, jitter, rng, counters=False):
    """One engine's StepEvents: chunks of these sizes, each `step_s` × (1 ± jitter) after the last (the
    jitter shuffled within blocks of four that cancel, so a run's mean step is `step_s`, give or take)."""
    events, t, token, drafted, accepted = [], T0, 0, 0, 0
    offsets = []
    for i, size in enumerate(sizes):
        if not offsets:
            offsets = [jitter, -jitter, jitter / 2, -jitter / 2]
            rng.shuffle(offsets)
        t += step_s * (1 + offsets.pop())
        if i:
            drafted, accepted = drafted + 4, accepted + size - 1
        events.append(StepEvent(engine=engine, step=i, token_ids=tuple(range(token, token + size)), text="",
                                time=t, submitted_at=T0, finished=i == len(sizes) - 1,
                                counters=SpecDecodeCounters(i, drafted, accepted) if counters else None))
        token += size
    return events


def run(spec_sizes, spec_step_s, base_step_s=0.05, jitter=0.2, seed=1) -> RunResult:
    """A run: the baseline emits one token a step for as many tokens as the speculative engine's chunks."""
    rng = random.Random(seed)
    base = _stream(BASELINE, [1] * sum(spec_sizes), base_step_s, jitter, rng)
    spec = _stream(SPECULATIVE, spec_sizes, spec_step_s, jitter, rng, counters=True)
    c = Comparison(num_speculative_tokens=4)
    c.add(RunStarted("run-0", (1, 2, 3), "sequential"))
    for e in base + spec:
        c.add(e)
    c.add(RunFinished("run-0", spec[-1].time, spec[-1].counters))
    return RunResult.of(c)


def even_run() -> RunResult:
    """Equal step costs, hardly any acceptance: a speedup near 1×."""
    return run([1] + ([1] * 19 + [2]) * 3, spec_step_s=0.05)


def double_run() -> RunResult:
    """Every draft of 1 accepted at equal step costs: a clear 2×."""
    return run([1] + [2] * 60, spec_step_s=0.05)


def test_equal_step_costs_give_an_interval_that_holds_one_and_the_within_noise_sentence():
    result = even_run()
    assert 0.9 < result.speedup < 1.2
    for key in ("speedup_interval", "tokens_per_step_ratio_interval", "step_cost_ratio_interval"):
        interval = getattr(result, key)
        point = getattr(result, key.removesuffix("_interval"))
        assert interval.low <= point <= interval.high, key
    assert result.speedup_interval.holds(1.0) and result.step_cost_ratio_interval.holds(1.0)
    sentence = explain(result, "ngram", 4, "cpu")
    assert sentence.startswith(f"Within noise ({result.speedup:.2f}×): ")
    assert f"the speedup's 95% interval, {result.speedup_interval}, holds 1×" in sentence
    assert sentence.count(". ") == 0


def test_a_clear_2x_run_is_not_within_noise():
    result = double_run()
    assert result.speedup == pytest.approx(2.0, rel=0.15)
    assert not result.speedup_interval.holds(1.0) and result.speedup_interval.low > 1.5
    assert result.tokens_per_step_ratio_interval.low == pytest.approx(2.0)  # every step yielded 2 tokens
    sentence = explain(result, "ngram", 4, "cpu")
    assert "Within noise" not in sentence and sentence.startswith(f"Speculation pays ({result.speedup:.2f}×)")


def test_a_cheaper_speculative_step_is_noise_or_flagged():
    inside = run([1] + ([1] * 19 + [2]) * 3, spec_step_s=0.048)
    assert inside.step_cost_ratio < 1 and inside.step_cost_ratio_interval.holds(1.0)
    assert "within this run's noise (95% interval" in explain(inside, "ngram", 4, "cpu")
    beyond = run([1] + ([1] * 19 + [2]) * 3, spec_step_s=0.035, jitter=0.05)
    assert beyond.step_cost_ratio_interval.high < 1
    sentence = explain(beyond, "ngram", 4, "cpu")
    assert "cheaper beyond this run's step-to-step noise" in sentence and "Within noise" not in sentence
    assert sentence.count(". ") == 0


def test_intervals_are_in_the_json_and_the_cli_report_and_repeat_exactly():
    from specplay.cli.report import print_report

    result = even_run()
    out = result.model_dump(mode="json")
    assert out["speedup_interval"] == result.speedup_interval.model_dump(mode="json")
    assert out["speedup_interval"][0] <= out["speedup"] <= out["speedup_interval"][1]
    assert out["tokens_per_step_ratio_interval"] and out["step_cost_ratio_interval"]
    # fixed seed: the same interval
    assert even_run().model_dump(mode="json")["speedup_interval"] == out["speedup_interval"]
    text = io.StringIO()
    print_report(result, text)
    assert f"speedup, 95% interval" in text.getvalue() and str(result.speedup_interval) in text.getvalue()


def test_too_few_steps_have_no_interval():
    result = run([1, 2, 2, 2], spec_step_s=0.05)
    assert result.noise is None and result.model_dump(mode="json")["speedup_interval"] is None
    assert "noise" not in explain(result, "ngram", 4, "cpu")


def test_merged_chunks_spread_their_steps_so_the_units_sum_to_the_run():
    # 5 decode chunks, one of them 2 steps merged (the request's counters count 6 decode steps)
    seconds, tokens, steps = step_units([1, 2, 1, 5, 1, 2], [0, 1, 2, 3, 4, 5], 6, "per-request")
    assert sum(steps) == pytest.approx(6) and sum(tokens) == 11 and seconds == [1, 1, 1, 1, 1]
    assert steps[2] == max(steps) and steps[1] == steps[3] == 1.0  # the 5-token chunk holds most of it
    _, tokens, steps = step_units([1, 1, 3, 1], [0, 1, 2, 3], 5, "tokens")
    assert steps == tokens == [1.0, 3.0, 1.0]  # the baseline: one token a step
    assert noise_of(run([1, 2], 0.05).baseline, run([1, 2], 0.05).speculative) is None


def test_three_runs_pooled_narrow_the_interval():
    from specplay.run.noise import pooled_runs

    runs = [run(([1] * 19 + [2]) * 3, spec_step_s=0.05, seed=s) for s in (1, 2, 3)]
    pooled = pooled_runs(runs)
    assert pooled.runs == 3 and min(r.speedup for r in runs) <= pooled.speedup <= max(r.speedup for r in runs)
    assert pooled.speedup == pytest.approx(pooled.tokens_per_step_ratio / pooled.step_cost_ratio)
    width = lambda i: i.high - i.low  # noqa: E731
    assert width(pooled.speedup_interval) < min(width(r.speedup_interval) for r in runs)
    spread = pooled.single_run_spread
    assert spread.low == min(r.speedup for r in runs) and spread.high == max(r.speedup for r in runs)
    assert pooled.single_run_intervals == tuple(r.speedup_interval for r in runs)
    one = pooled_runs(runs[:1])
    assert one.speedup == pytest.approx(runs[0].speedup) and one.speedup_interval == runs[0].speedup_interval
