"""One run's figures, defined once; the speedup's two factors; the replay; the explanation."""

from __future__ import annotations


import pytest

from specplay.page import charts

from specplay.page import views
from tests.ui_fixtures import comparison_of, run_with_acceptance, synthetic_events



# -- one run's figures: defined once, the speedup's two factors, the replay ----------------------------------
def test_speedup_is_the_product_of_its_two_factors():
    # speculative: 4 steps 0.6 s apart yielding 3 tokens each; baseline: 9 steps 0.25 s apart
    events = synthetic_events(list(range(9)), [[0], [1, 2, 3], [4, 5, 6], [7, 8, 9]], k=4, dt=0.25)
    c = comparison_of(events)
    b, s = c.baseline, c.speculative
    assert b.tokens_per_step == 1.0 and s.tokens_per_step == 3.0
    assert b.step_seconds == pytest.approx(0.25) and s.step_seconds == pytest.approx(0.25)
    for trace in (b, s):
        assert trace.tokens_per_s == pytest.approx(trace.tokens_per_step / trace.step_seconds)
    assert c.speedup == pytest.approx(c.tokens_per_step_ratio / c.step_cost_ratio)
    result = c.as_dict()
    assert result["tokens_per_step_ratio"] == pytest.approx(3.0) and result["step_cost_ratio"] == pytest.approx(1.0)
    assert result["speculative"]["step_sizes"] == [1, 3, 3, 3]


def test_metrics_define_each_figure_once_for_report_table_and_csv():
    from specplay.run import metrics
    from specplay.cli import report

    _, c = run_with_acceptance()
    result = c.as_dict()
    table = {row[0]: row[1:] for row in metrics.table_rows(result)}
    assert set(table) == {f.label for f in metrics.FIGURES}
    cli = {row[0]: row[1:] for row in report.metrics_rows(result)}
    page = {row.figure: (row.baseline, row.speculative) for row in charts.summary_table(result).itertuples()}
    assert all(cli[label] == page[label] == table[label] for label in table)  # same text in all three
    flat = metrics.flat_row(result)
    assert list(flat) == list(metrics.FLAT_COLUMNS)
    assert set(metrics.FLAT_COLUMNS) <= set(charts.HISTORY_COLUMNS)
    assert flat["steps_speculative"] == 4 and flat["tokens_baseline"] == 9


def test_replay_puts_both_engines_on_one_clock():
    # sequential: the speculative engine is submitted after the baseline finished
    base = synthetic_events(list(range(6)), [], dt=1.0, t0=100.0)
    spec = synthetic_events([], [[0], [1, 2], [3, 4, 5]], dt=1.0, t0=200.0)
    c = comparison_of([base[0], *base[1:-1], *spec[1:-1], spec[-1]])
    assert c.replay_seconds == pytest.approx(6.0)  # the baseline's 6 s; the speculative engine took 3 s
    at2 = c.until(2.0)
    assert len(at2.baseline.token_ids) == 2 and len(at2.speculative.token_ids) == 3
    assert not at2.done and at2.counters.num_drafts == 1  # counters as they stood then
    at4 = c.until(4.0)
    assert at4.speculative.token_ids == c.speculative.token_ids and at4.speculative.finished
    assert len(at4.baseline.token_ids) == 4 and not at4.done
    end = c.until(c.replay_seconds)
    assert end.done and end.identical and end.counters == c.counters


@pytest.mark.parametrize("figures, method, device, expected", [
    (dict(speedup=1.9, gain=2.5, cost=1.3, acc=0.7, step=0.005), "eagle", "gpu", "Speculation pays (1.90×)"),
    (dict(speedup=1.5, gain=1.6, cost=1.07, acc=0.3, step=0.05), "ngram", "cpu", "acceptance decides"),
    (dict(speedup=0.9, gain=1.1, cost=1.22, acc=0.05, step=0.05), "ngram", "cpu", "copies from it"),
    (dict(speedup=0.3, gain=2.0, cost=6.6, acc=0.5, step=0.002), "ngram", "gpu", "without async scheduling"),
    (dict(speedup=0.3, gain=2.0, cost=6.6, acc=0.5, step=0.002), "ngram", "gpu", "too small for speculation"),
    (dict(speedup=0.5, gain=1.8, cost=3.6, acc=0.4, step=0.05), "draft_model", "cpu", "draft is slow relative"),
    (dict(speedup=0.2, gain=1.1, cost=5.5, acc=0.05, step=0.05), "draft_model", "cpu", "Both factors lose"),
])
def test_explanation_names_the_deciding_factor(figures, method, device, expected):
    from specplay.run.explain import explain

    result = {"speedup": figures["speedup"], "tokens_per_step_ratio": figures["gain"],
              "step_cost_ratio": figures["cost"], "baseline": {"step_seconds": figures["step"]},
              "speculative": {"acceptance_rate": figures["acc"]},
              "engines": {"baseline": {"async_scheduling": True}, "speculative": {"async_scheduling": False}}}
    sentence = explain(result, method, 4, device)
    assert expected in sentence and sentence.count(". ") == 0  # one sentence
    html = views.explain_html(result, sentence, "where it pays <b>")
    assert f"{figures['gain']:.2f}×" in html and f"{figures['cost']:.2f}×" in html
    assert "speculative: async scheduling off" in html and "&lt;b&gt;" in html
