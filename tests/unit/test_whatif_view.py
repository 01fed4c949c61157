"""The what-if beside the factors: the sliders start at a finished run's own values, the prediction at
those values is the standard model's (specplay.run.whatif, one place), the best k follows the sliders, and
the slider values the browser sends stay numbers. The start is the session's own RunResult, typed: it
carries the method's kind and k, so no preset is looked up again (and no run JSON is read back)."""

from __future__ import annotations

import pytest

from specplay.page import whatif_view as wv
from specplay.presets.catalog import get_preset
from specplay.run import whatif
from specplay.run.result import RunResult
from tests.ui_fixtures import comparison_of, synthetic_events

NGRAM, DRAFT = get_preset("smollm2-ngram"), get_preset("smollm2-layerskip-draft")


def _result(preset, spec_steps, dt_spec=0.5) -> RunResult:
    k = preset.num_speculative_tokens
    events = synthetic_events(list(range(sum(map(len, spec_steps)))), spec_steps, k=k, dt=dt_spec)
    return RunResult.of(comparison_of(events, k=k), preset)


def test_the_sliders_start_at_the_runs_values_and_predict_as_the_model_does():
    result = _result(DRAFT, [[0], [1, 2, 3], [4], [5, 6, 7, 8], [9, 10]])
    start = wv.start_from(result)
    m = start.measured
    assert start.preset == DRAFT.name and not start.lookup and m.k == 3 and m.passes == 3
    values = wv.slider_values(start)
    assert values["wi_alpha"]["value"] == round(m.alpha, 3) and values["wi_k"]["value"] == 3
    p = wv.predict(start, m.alpha, m.k, m.draft_cost, False)
    assert p["predicted"] == pytest.approx(m.predicted, rel=1e-6)
    assert p["predicted"] == pytest.approx(whatif.predicted_speedup(m.alpha, 3, m.draft_cost, 3))
    assert p["measured"] == pytest.approx(result.speedup)
    # a free, always-right draft: the model says the largest k pays most
    free = wv.predict(start, 1.0, 3, 0.0, False)
    assert free["best_k"] == wv.K_SLIDER_MAX and free["predicted"] == pytest.approx(4.0)
    # a draft as costly as the target with half its drafts accepted: k=1 is best, and it loses
    costly = wv.predict(start, 0.5, 3, 1.0, False)
    assert costly["best_k"] == 1 and costly["best"] < 1
    html = wv.view_html(start, p)
    assert "predicted at these values" in html and f"k = {p['best_k']}" in html


def test_a_lookup_methods_cost_slider_is_its_verify_cost_and_never_zero():
    result = _result(NGRAM, [[0], [1, 2, 3, 4, 5], [6], [7, 8, 9], [10, 11]])
    start = wv.start_from(result)
    assert start.lookup and start.measured.passes == 0
    assert "verify step" in wv.slider_values(start)["wi_cost"]["label"]
    p = wv.predict(start, 0.5, 4, 0.0, False)  # cost 0 would divide by zero
    assert p["predicted"] == pytest.approx(whatif.expected_tokens(0.5, 4) / wv.MIN_VERIFY_COST)
    per_position = wv.predict(start, 0.5, 4, 1.0, True)
    assert per_position["per_position"] and per_position["predicted"] == pytest.approx(
        1 + sum(start.measured.rates))


def test_the_start_needs_the_runs_kind_and_k_and_a_timed_run():
    """A run made without a preset (no kind, no k), a failed one or an untimed one gives no start: the
    what-if never guesses a method from whichever preset is loaded now."""

    result = _result(DRAFT, [[0], [1, 2], [3, 4, 5]])
    assert wv.start_from(None) is None
    for broken in (dict(method_kind=None), dict(num_speculative_tokens=None), dict(error="boom"), dict(speedup=None)):
        assert wv.start_from(result.model_copy(update=broken)) is None
    pard = wv.start_from(result.model_copy(update={"method_kind": "pard", "num_speculative_tokens": 5}))
    assert pard.passes[4] == 1 and pard.measured.passes == 1  # one pass drafts all k: the kind's, not the preset's


def test_wild_slider_values_stay_numbers():
    result = _result(DRAFT, [[0], [1, 2], [3, 4, 5]])
    start = wv.start_from(result)
    html = wv.view_html(start, wv.predict(start, "<script>", float("inf"), -5, "yes"))
    assert "<script>" not in html
    p = wv.predict(start, float("nan"), 10 ** 9, 10 ** 9, False)
    assert 1 <= p["k"] <= wv.K_SLIDER_MAX and p["predicted"] > 0
