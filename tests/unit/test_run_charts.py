"""The run's charts and tables on synthetic runs (no engines)."""

from __future__ import annotations


import pytest

from specplay.page import charts

from specplay.core.events import BASELINE, GenerationRequest
from specplay.run.result import RunResult
from tests.ui_fixtures import run_with_acceptance



# -- charts and tables ---------------------------------------------------------------------------------------
def test_tokens_per_s_series_matches_summary_definition():
    _, c = run_with_acceptance()
    fig = charts.tokens_per_s_figure(c)
    by_name = {t.name: t for t in fig.data}
    assert set(by_name) == {"baseline", "speculative"}
    assert by_name["speculative"].y[-1] == pytest.approx(c.speculative.tokens_per_s, rel=1e-3)
    assert by_name["baseline"].y[-1] == pytest.approx(c.baseline.tokens_per_s, rel=1e-3)
    assert by_name["baseline"].x[0] == pytest.approx(1.0)  # second baseline token at t0 + 2 * 0.5


def test_acceptance_figure_rate_and_per_position_bars():
    events, c = run_with_acceptance()
    history = [(e.time, e.counters) for e in events if getattr(e, "counters", None) is not None
               and hasattr(e, "engine")]
    assert history == c.counter_history
    fig = charts.acceptance_figure(c)
    line, bars, histogram = fig.data
    assert line.y[-1] == pytest.approx(c.counters.acceptance_rate, abs=1e-4)  # 5 accepted of 12 drafted
    assert c.counters.acceptance_rate == pytest.approx(5 / 12)
    assert list(bars.x) == ["1", "2", "3", "4"]
    assert list(bars.y) == pytest.approx([2 / 3, 2 / 3, 1 / 3, 0.0], abs=1e-4)  # per-position accepts over 3 drafts
    # beside it, vLLM's acceptance histogram: of the 3 drafting steps one accepted 0, one 2, one 3 (of k=4)
    assert list(histogram.x) == ["0", "1", "2", "3", "4"] and list(histogram.y) == [1, 0, 1, 1, 0]


def test_memory_figure_is_labelled_and_in_gib():
    from specplay.engine.telemetry import MemorySeries

    series = {BASELINE: MemorySeries(BASELINE, (10.0, 11.0), (2 * 1024 ** 3, 3 * 1024 ** 3))}
    fig = charts.memory_figure(series, "resident memory (RSS, CPU)", origin=10.0)
    assert "RSS" in fig.layout.title.text
    assert list(fig.data[0].y) == [2.0, 3.0] and list(fig.data[0].x) == [0.0, 1.0]
    assert fig.data[1].name == "speculative" and len(fig.data[1].x) == 0


def test_summary_table_values():
    _, c = run_with_acceptance()
    df = charts.summary_table(RunResult.of(c))
    assert list(df.columns) == charts.SUMMARY_COLUMNS
    rows = {row.figure: row for row in df.itertuples()}
    assert rows["tokens"].speculative == "9" and rows["steps"].speculative == "4" and rows["steps"].baseline == "9"
    assert rows["acceptance rate"].speculative == "41.7%" and rows["acceptance rate"].baseline == ""
    assert rows["mean acceptance length"].speculative == f"{1 + 5 / 3:.2f}"
    assert rows["speedup"].speculative == f"{c.speedup:.2f}×"
    assert rows["decode step (ms)"].baseline == "500.00"  # one token every 0.5 s
    # the 95% intervals, as the CLI report shows them: the page's table too
    from specplay.run import metrics

    for label, _, text in metrics.interval_rows(RunResult.of(c)):
        assert rows[label].speculative == text
    assert "speedup, 95% interval" in rows
    assert charts.summary_table(None).empty


def test_history_rows_and_csv(tmp_path):
    _, c = run_with_acceptance()
    result = RunResult.of(c, "smollm2-ngram", request=GenerationRequest(prompt="x" * 100, max_tokens=9))
    rows = [charts.history_row(result, 1, "x" * 100)]
    df = charts.history_table(rows)
    path = tmp_path / "h.csv"
    df.to_csv(path, index=False)
    text = path.read_text().splitlines()
    assert text[0].split(",")[:3] == ["run", "preset", "prompt"]
    assert len(text) == 2 and "smollm2-ngram" in text[1]
    assert rows[0]["prompt"].endswith("...") and len(rows[0]["prompt"]) == 60
    assert rows[0]["identical"] is True and rows[0]["outcome"] == "done"
    assert rows[0]["speedup"] == pytest.approx(c.speedup, abs=1e-3)
    assert rows[0]["tokens_per_s_speculative"] == pytest.approx(c.speculative.tokens_per_s, abs=0.01)
