"""What if: the standard speedup model (specplay.run.whatif), its best k, a run's measured α and c, and the
bench lab's prediction read through the same function."""

from __future__ import annotations

import pytest

from specplay.presets.methods import facts_for
from specplay.run import whatif
from specplay.run.result import RunResult
from tests.ui_fixtures import run_with_acceptance

CHAINED = facts_for({"method": "draft_model", "model": "x"})
PARALLEL = facts_for({"method": "draft_model", "model": "x", "parallel_drafting": True})
NGRAM = facts_for({"method": "ngram"})


@pytest.mark.parametrize("a, k, c, facts, expected", [
    (0.7, 3, 0.1, CHAINED, (1 - 0.7 ** 4) / ((1 - 0.7) * (1 + 3 * 0.1))),
    (0.7, 3, 0.1, PARALLEL, (1 - 0.7 ** 4) / ((1 - 0.7) * (1 + 0.1))),
    (0.7, 3, 0.1, NGRAM, (1 - 0.7 ** 4) / (1 - 0.7)),  # no draft pass: c plays no part
    (1.0, 4, 0.0, NGRAM, 5.0),  # every draft accepted: k + 1 tokens a step
    (0.0, 4, 0.2, CHAINED, 1 / 1.8),  # nothing accepted: pure cost
])
def test_the_standard_model(a, k, c, facts, expected):
    assert whatif.predicted_speedup(a, k, c, facts.draft_passes(k)) == pytest.approx(expected)


def test_per_position_rates_and_best_k():
    # per-position rates α, α², α³ give the same tokens per step as one α
    rates = [0.8, 0.64, 0.512]
    assert whatif.predicted_speedup(rates, 3) == pytest.approx(whatif.predicted_speedup(0.8, 3))
    assert whatif.predicted_speedup(rates, 2) == pytest.approx(1 + 0.8 + 0.64)
    # free drafts: the longest draft wins; a costly chained draft: a short one; parallel: cost flat in k
    assert whatif.best_k(0.8, 0.0, NGRAM.draft_passes, k_max=8)[0] == 8
    k, speedup = whatif.best_k(0.6, 0.3, CHAINED.draft_passes)
    assert k == 1 and speedup == pytest.approx(1.6 / 1.3)
    assert whatif.best_k(0.6, 0.3, PARALLEL.draft_passes)[0] > 5
    assert whatif.best_k(rates, 0.0, NGRAM.draft_passes)[0] == 3  # no extrapolation past measured positions


def test_alpha_reproduces_the_mean_acceptance_length():
    for a, k in ((0.3, 4), (0.9, 5), (0.5, 1)):
        mean = whatif.expected_tokens(a, k) - 1
        assert whatif.alpha_from_mean(mean, k) == pytest.approx(a, abs=1e-9)
    assert whatif.alpha_from_mean(0.0, 4) == pytest.approx(0.0, abs=1e-9)


def test_a_runs_measured_values_start_the_sliders():
    result = RunResult.of(run_with_acceptance()[1])  # 3 drafts of k=4: 3, 0 and 2... accepted (5 of 12)
    # sequential: the whole run's ratio is the draft's (concurrent runs: test_explain_schedule)
    result = result.__class__(**{**result.__dict__, "schedule": "sequential"})
    m = whatif.measured(result, 4, NGRAM.draft_passes(4))
    assert m.rates == pytest.approx([2 / 3, 2 / 3, 1 / 3, 0.0])
    assert whatif.expected_tokens(m.alpha, 4) == pytest.approx(result.mean_acceptance_length)
    assert m.draft_cost is None and m.verify_cost == pytest.approx(result.step_cost_ratio)
    assert m.predicted == pytest.approx(result.mean_acceptance_length / result.step_cost_ratio)
    chained = whatif.measured(result.__class__(**{**result.__dict__, "step_cost_ratio": 1.8}), 4, 4)
    assert chained.draft_cost == pytest.approx(0.2) and chained.verify_cost == 1.0


def test_the_bench_prediction_is_the_same_function():
    from specplay.bench.runner import predicted_speedup

    for a, k in ((0.7, 3), (0.5, 1), (0.9, 7)):
        assert predicted_speedup(a, k) == pytest.approx(whatif.predicted_speedup(a, k), abs=1e-5)
