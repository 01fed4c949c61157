"""The what-if beside the factors: the sliders start at a finished run's own values, the prediction at
those values is the standard model's (specplay.run.whatif, one place), the best k follows the sliders, and
whatever the browser sends back (a crafted result, wild slider values) stays numbers."""

from __future__ import annotations

import pytest

from specplay.page import whatif_view as wv
from specplay.presets.catalog import get_preset
from specplay.run import whatif
from specplay.run.result import RunResult
from tests.ui_fixtures import comparison_of, synthetic_events

NGRAM, DRAFT = get_preset("smollm2-ngram"), get_preset("smollm2-layerskip-draft")
PRESETS = {p.name: p for p in (NGRAM, DRAFT)}


def _result(preset, spec_steps, dt_spec=0.5):
    k = preset.num_speculative_tokens
    events = synthetic_events(list(range(sum(map(len, spec_steps)))), spec_steps, k=k, dt=dt_spec)
    return RunResult.of(comparison_of(events, k=k), preset).to_json()


def test_the_sliders_start_at_the_runs_values_and_predict_as_the_model_does():
    result = _result(DRAFT, [[0], [1, 2, 3], [4], [5, 6, 7, 8], [9, 10]])
    start = wv.start_from(result, PRESETS, NGRAM)
    m = start.measured
    assert start.preset == DRAFT.name and not start.lookup and m.k == 3 and m.passes == 3
    values = wv.slider_values(start)
    assert values["wi_alpha"]["value"] == round(m.alpha, 3) and values["wi_k"]["value"] == 3
    p = wv.predict(start, m.alpha, m.k, m.draft_cost, False)
    assert p["predicted"] == pytest.approx(m.predicted, rel=1e-6)
    assert p["predicted"] == pytest.approx(whatif.predicted_speedup(m.alpha, 3, m.draft_cost, 3))
    assert p["measured"] == pytest.approx(result["speedup"])
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
    start = wv.start_from(result, PRESETS, NGRAM)
    assert start.lookup and start.measured.passes == 0
    assert "verify step" in wv.slider_values(start)["wi_cost"]["label"]
    p = wv.predict(start, 0.5, 4, 0.0, False)  # cost 0 would divide by zero
    assert p["predicted"] == pytest.approx(whatif.expected_tokens(0.5, 4) / wv.MIN_VERIFY_COST)
    per_position = wv.predict(start, 0.5, 4, 1.0, True)
    assert per_position["per_position"] and per_position["predicted"] == pytest.approx(
        1 + sum(start.measured.rates))


@pytest.mark.parametrize("crafted", [None, "x", {"streaming": True}, {"error": "boom"}, {"speedup": None},
                                     {"speedup": "nan", "preset": ["../x"], "speculative": {"num_drafts": "1e400"}},
                                     {"speedup": 1.2, "speculative": {"accepted_per_position": ["<b>", 1e9]}}])
def test_whatever_the_browser_sends_stays_numbers(crafted):
    start = wv.start_from(crafted, PRESETS, NGRAM)
    if start is not None:
        html = wv.view_html(start, wv.predict(start, "<script>", float("inf"), -5, "yes"))
        assert "<script>" not in html and "<b>" not in html
    result = _result(DRAFT, [[0], [1, 2], [3, 4, 5]])
    start = wv.start_from(result, PRESETS, NGRAM)
    p = wv.predict(start, float("nan"), 10 ** 9, 10 ** 9, False)
    assert 1 <= p["k"] <= wv.K_SLIDER_MAX and p["predicted"] > 0
