"""The bench's charts and files from synthetic rows (no engines): the figures, the table, the CSV / JSON / HTML
files, a PNG drawn by headless Chromium, the progress bar and `bench --replot`."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

import pytest

from specplay.bench import charts as bench_charts

from specplay.bench import outputs as bench_report

from specplay.bench.report import BenchReport, Environment
from specplay.bench.runner import Setting, bench_row, predicted_speedup
from specplay.core.events import BASELINE, SPECULATIVE, SpecDecodeCounters
from tests.bench_fixtures import batch, synthetic_rows, trace
from tests.ui_fixtures import ROOT


# -- charts and files ----------------------------------------------------------------------------------------
def test_charts_from_rows_sweep_one_setting_each():
    rows = synthetic_rows()
    figs = bench_charts.figures(rows, preset_k=4)
    assert set(figs) == {"speedup_vs_k", "acceptance_per_position", "speedup_vs_temperature",
                         "throughput_vs_concurrency"}
    by_name = {t.name: t for t in figs["speedup_vs_k"].data}
    assert set(by_name) == {"code, c=1", "code, c=4", "chat, c=1", "chat, c=4"}
    code = [r for r in rows if r.workload == "code" and r.temperature == 0 and r.concurrency == 1]
    assert list(by_name["code, c=1"].x) == [2, 4, 6]
    assert list(by_name["code, c=1"].y) == [r.speedup for r in code]
    bars = figs["acceptance_per_position"].data
    assert [b.name for b in bars] == ["chat", "code"] and list(bars[0].y)[:3] == pytest.approx([0.4, 1 / 3, 8 / 30])
    lines = {t.name for t in figs["throughput_vs_concurrency"].data}
    assert lines == {"chat · baseline", "code · baseline", "chat · speculative", "code · speculative"}
    assert "speedup_vs_k" not in bench_charts.figures(synthetic_rows(ks=(4,)), 4)  # one k: nothing to sweep


def test_open_loop_rows_get_their_own_chart_and_stay_off_the_concurrency_axis():
    """A request-rate row's concurrency is its cap (all prompts), not what was in flight: the H200 sweep drew
    the four rate rows as a vertical line at c=64 on the throughput-against-concurrency chart."""
    closed = synthetic_rows(workloads=("x",), ks=(3,), temps=(0.0,), concs=(4, 16))
    base = batch(BASELINE, [trace(BASELINE, [1] * 21, 0.05)] * 2, wall=2.0)
    spec = batch(SPECULATIVE, [trace(SPECULATIVE, [1] + [2] * 10, 0.06)] * 2, SpecDecodeCounters(10, 30, 10, (6, 3, 1)),
                 wall=1.2)
    rates = [bench_row(Setting("x", 0.0, 64, 3, request_rate=r), base, spec) for r in (2.0, 8.0, float("inf"))]
    figs = bench_charts.figures(closed + rates, preset_k=3)
    for line in figs["throughput_vs_concurrency"].data:
        assert list(line.x) == [4, 16]
    by_name = {t.name: t for t in figs["speedup_vs_request_rate"].data}
    assert set(by_name) == {"x · per request", "x · throughput"}
    assert list(by_name["x · per request"].x) == ["2/s", "8/s", "all at once"]
    assert list(by_name["x · per request"].y) == [r.speedup for r in rates]
    assert "speedup_vs_request_rate" not in bench_charts.figures(closed, preset_k=3)  # no open loop: no chart


def test_predicted_and_measured_chart_for_synthetic_acceptance():
    rows = [r.model_copy(update=dict(acceptance=a, predicted_speedup=predicted_speedup(a, r.k), workload="token-ids"))
            for a in (0.5, 0.9) for r in synthetic_rows(workloads=("x",), temps=(0.0,), concs=(1,))]
    figs = bench_charts.figures(rows, preset_k=3, synthetic=True)
    traces = {t.name: t for t in figs["predicted_vs_measured"].data}
    assert list(traces["a=0.9 predicted"].y) == [round(predicted_speedup(0.9, k), 3) for k in (2, 4, 6)]
    assert "token-ids, a=0.5 measured" in traces
    assert "token-ids, a=0.5 predicted (pass times)" not in traces  # rows without a cost model: no line
    timed = [r.model_copy(update=dict(predicted_speedup_measured=r.predicted_speedup / r.step_cost_ratio)) for r in rows]
    traces = {t.name: t for t in bench_charts.predicted_vs_measured(bench_charts.flat_rows(timed)).data}
    line = traces["token-ids, a=0.9 predicted (pass times)"]
    assert list(line.x) == [2, 4, 6] and line.line.dash == "dash"


def test_table_and_files_without_engines(tmp_path):
    rows = synthetic_rows(ks=(2, 4), temps=(0.0,), concs=(1,))
    headers, cells = bench_report.table(rows)
    assert headers[:4] == ["workload", "T", "c", "k"] and "a" not in headers and "identical" in headers
    assert cells[0][headers.index("speedup")].endswith("×") and cells[0][headers.index("identical")] == "1/2"
    assert "accept" in bench_report.text_table(rows).splitlines()[0]
    written = bench_report.write_results(tmp_path, BenchReport(preset="p", rows=tuple(rows)),
                                         bench_charts.figures(rows, 4), png=False)
    with open(written["csv"]) as f:
        table = list(csv.DictReader(f))
    assert len(table) == len(rows) == 4
    assert {"acceptance_pos_1", "acceptance_pos_4", "speedup", "tokens_per_s_baseline"} <= set(table[0])
    assert json.loads((tmp_path / "bench.json").read_text())["files"]["html"] == [
        "speedup_vs_k.html", "acceptance_per_position.html"]
    assert (tmp_path / "plotly.min.js").is_file()


def test_headless_chromium_renders_a_chart_when_kaleido_cannot(tmp_path):
    chromium = bench_report.find_chromium()
    if chromium is None:
        pytest.skip("no chromium on PATH (scripts/setup.sh --test installs it)")
    rows = synthetic_rows(ks=(2, 4), temps=(0.0,), concs=(1,))
    chart = bench_charts.speedup_vs_k(bench_charts.flat_rows(rows))
    written = bench_report.write_results(tmp_path, BenchReport(preset="p", rows=tuple(rows)),
                                         {"speedup_vs_k": chart}, png=False)
    bench_report.screenshot(chromium, tmp_path / "speedup_vs_k.html", tmp_path / "speedup_vs_k.png")
    png = (tmp_path / "speedup_vs_k.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000 and written["html"]


def test_progress_bar_is_plain_text():
    from specplay.cli.bench import ProgressBar

    out = io.StringIO()
    bar = ProgressBar(out)
    bar(3, 12, "baseline · code")
    bar(3, 12, "baseline · code")  # unchanged: not repeated in a log
    bar(12, 12, "finished")
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("3/12  25%") and lines[0].endswith("baseline · code")
    assert len(lines) == 2 and lines[1].startswith("12/12 100%")


def test_replot_redraws_a_saved_bench_without_engines(tmp_path):
    rows = synthetic_rows(ks=(2, 4), temps=(0.0,), concs=(1,))
    bench_report.write_results(tmp_path / "run", BenchReport(preset="p", loaded_k=4, rows=tuple(rows)), {},
                               png=False)
    done = subprocess.run([sys.executable, "-m", "specplay", "bench", "--replot", str(tmp_path / "run"), "--out",
                           str(tmp_path / "again"), "--no-png"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "speedup" in done.stdout.splitlines()[0]  # the table
    assert (tmp_path / "again" / "speedup_vs_k.html").is_file()
    assert BenchReport.load(tmp_path / "again").rows == tuple(rows)  # typed, and back as it was


def test_replot_merges_a_sweep_split_over_runs_into_one_result(tmp_path):
    rows = synthetic_rows(workloads=("code",), ks=(2, 4, 6), temps=(0.0,), concs=(1,))
    first, second = rows[:2], rows[1:]  # k=4 measured in both runs: the later run's row stands
    second = [r.model_copy(update=dict(speedup=9.0)) if r.k == 4 else r for r in second]
    for name, part, ks in (("a", first, [2, 4]), ("b", second, [4, 6])):
        bench_report.write_results(tmp_path / name, BenchReport(
            preset="p", method="ngram", loaded_k=4, rows=tuple(part), command=(f"run {name}",),
            settings={"k": ks, "concurrency": [1], "temperature": [0.0], "workloads": ["code"], "acceptance": []},
            environment=Environment(engines={f"k={k}": {"speculative": {"async_scheduling": True}} for k in ks}),
            started_utc=f"2026-01-0{1 + (name == 'b')}T00:00:00Z", finished_utc="2026-01-03T00:00:00Z"),
            {}, png=False)
    cmd = [sys.executable, "-m", "specplay", "bench", "--replot", str(tmp_path / "a"), str(tmp_path / "b"),
           "--no-png"]
    refused = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0 and "needs --out" in refused.stderr
    done = subprocess.run(cmd + ["--out", str(tmp_path / "all")], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    merged = json.loads((tmp_path / "all" / "bench.json").read_text())
    assert [r["k"] for r in merged["rows"]] == [2, 4, 6]
    assert [r["speedup"] for r in merged["rows"] if r["k"] == 4] == [9.0]
    assert merged["settings"]["k"] == [2, 4, 6] and merged["command"] == ["run a", "run b"]
    assert merged["started_utc"].startswith("2026-01-01")
    assert set(merged["environment"]["engines"]) == {"k=2", "k=4", "k=6"}
    (advice,) = merged["advice"]  # worked out again over all rows: k=4 (9×) is the best
    assert advice["best_k"] == 4 and "k=4 measured fastest (9.00×)" in advice["sentence"]
    with pytest.raises(ValueError, match="different presets"):
        bench_report.merge_results([BenchReport.load(tmp_path / "a"), BenchReport(preset="q")])
