"""The bench lab: settings expansion, pooled figures, advice, charts and files from synthetic batches (fast),
then one small real bench on the CPU engines and the `bench` command end to end."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

import pytest

from specplay.bench import advice as bench_advice

from specplay.bench import charts as bench_charts

from specplay.bench import outputs as bench_report

from specplay.page import bench_view
from specplay.bench.runner import (BenchError, BenchRun, BenchSettings, Setting, Variant, bench_row, load_prompts,
                              make_plan, predicted_speedup, synthetic_rates, variant_preset)
from specplay.run.comparison import EngineTrace
from specplay.engine.batch import BatchResult
from specplay.core.events import BASELINE, SPECULATIVE, SpecDecodeCounters
from specplay.core.hardware import Hardware
from specplay.presets.catalog import engine_settings, get_preset
from tests.ui_fixtures import ROOT


def trace(role: str, sizes: list[int], step_s: float, submitted: float = 0.0, first_token_s: float = 0.05,
          ids: list[int] | None = None) -> EngineTrace:
    t = EngineTrace(role, submitted_at=submitted, finished=True, finish_reason="length")
    for i, size in enumerate(sizes):
        t.step_sizes.append(size)
        t.step_times.append(submitted + first_token_s + step_s * i)
    t.token_ids = list(ids) if ids is not None else list(range(sum(sizes)))
    return t


def batch(role, traces, counters=SpecDecodeCounters(), wall=None, concurrency=1):
    wall = wall if wall is not None else max(t.step_times[-1] for t in traces)
    return BatchResult(role, traces, counters, wall, concurrency)


def synthetic_rows(workloads=("code", "chat"), ks=(2, 4, 6), temps=(0.0, 1.0), concs=(1, 4)):
    rows = []
    for w in workloads:
        for T in temps:
            for c in concs:
                base = batch(BASELINE, [trace(BASELINE, [1] * 21, 0.05), trace(BASELINE, [1] * 31, 0.05)], wall=2.0)
                for k in ks:
                    sizes = [1] + [1 + i % 3 for i in range(15)]
                    spec = batch(SPECULATIVE, [trace(SPECULATIVE, sizes, 0.05 * (1 + 0.04 * k))] * 2,
                                 SpecDecodeCounters(30, 30 * k, 30, tuple([12, 10, 8] + [0] * k)[:k]), wall=1.1)
                    rows.append(bench_row(Setting(w, T, c, k), base, spec))
    return rows


# -- settings ----------------------------------------------------------------------------------------------
def test_h200_sweep_expands_to_one_row_per_setting_with_the_baseline_once_per_concurrency():
    preset = get_preset("dummy-llama8b-eagle-k3")
    settings = BenchSettings(preset.name, n=8, concurrency=(1, 8, 32), k=(1, 3, 5, 7), acceptance=(0.5, 0.7, 0.9),
                             max_tokens=128)
    prompts = load_prompts(settings, preset)
    assert list(prompts) == ["token-ids"] and len(prompts["token-ids"]) == 8
    assert all(len(p.prompt_token_ids) == 128 for p in prompts["token-ids"])
    plan = make_plan(settings, preset, list(prompts))
    assert plan.variants[0] == Variant(3, 0.7)  # the loaded engine first: no restart for it
    assert len(plan.variants) == 12 and plan.restarts == 11
    assert plan.baseline_batches == 3  # one per concurrency: k and acceptance don't change the baseline
    keys = [(s.workload, s.temperature, s.concurrency, s.k, s.acceptance) for s in plan.settings]
    assert len(keys) == len(set(keys)) == 36
    assert plan.units == 3 + 36 + 11
    # rows of one speculative engine are consecutive: each engine starts once
    runs = [s.variant for s in plan.settings]
    assert [v for i, v in enumerate(runs) if i == 0 or runs[i - 1] != v] == list(plan.variants)
    v = variant_preset(preset, Variant(7, 0.9))
    assert v.speculative_config["num_speculative_tokens"] == 7
    assert v.speculative_config["synthetic_acceptance_rates"] == synthetic_rates(0.9, 7)
    assert v.speculative_config["synthetic_acceptance_rates"][:3] == [0.9, 0.81, 0.729]
    assert preset.speculative_config["num_speculative_tokens"] == 3  # the preset itself is untouched
    assert variant_preset(preset, Variant(3, 0.7)) is preset
    gpu = Hardware(1, "H200", (0, 1))
    base, spec = engine_settings(v, gpu)
    assert spec.engine_args["speculative_config"]["num_speculative_tokens"] == 7
    assert base == engine_settings(preset, gpu)[0]  # same baseline: only the speculative engine restarts


def test_a_pard_k_sweep_keeps_parallel_drafting_and_one_draft_pass_at_every_k():
    """PARD's best k is larger than a draft model's, since all k tokens cost one draft pass: the sweep's
    variants keep the PARD draft (parallel_drafting, its model with pard_token), only k and the rates move."""
    from specplay.bench.passes import preset_draft_passes

    preset = get_preset("dummy-llama8b-pard1b-k7")
    settings = BenchSettings(preset.name, n=4, k=(3, 5, 7, 8, 10), acceptance=(0.7,), max_tokens=128)
    plan = make_plan(settings, preset, ["token-ids"])
    assert plan.variants[0] == Variant(7, 0.7) and plan.restarts == 4  # the loaded k first
    gpu = Hardware(1, "NVIDIA H200", (0, 1))
    for variant in plan.variants:
        spec = engine_settings(variant_preset(preset, variant), gpu)[1].engine_args["speculative_config"]
        assert spec["parallel_drafting"] is True and spec["method"] == "draft_model"
        assert spec["model"].endswith("/llama-3.2-1b-pard-shaped")  # bundled: resolved to its folder
        assert spec["synthetic_acceptance_rates"] == pytest.approx(synthetic_rates(0.7, variant.k), abs=1e-6)
        assert preset_draft_passes(spec, variant.k) == 1


def test_settings_that_cannot_run_are_refused_before_any_engine_starts(tmp_path):
    ngram, dummy = get_preset("smollm2-ngram"), get_preset("dummy-llama8b-eagle-k3")
    with pytest.raises(BenchError, match="synthetic"):
        make_plan(BenchSettings(ngram.name, acceptance=(0.5,)), ngram, ["code"])
    with pytest.raises(BenchError, match="no tokenizer"):
        load_prompts(BenchSettings(dummy.name, workloads=("code",)), dummy)
    with pytest.raises(BenchError, match="k"):
        make_plan(BenchSettings(ngram.name, k=(0,)), ngram, ["code"])
    own = tmp_path / "mine.jsonl"
    own.write_text('{"prompt": "hello"}\n{"prompt": "world"}\n')
    assert [p.prompt for p in load_prompts(BenchSettings(ngram.name, workloads=(str(own),), n=5), ngram)["mine"]] == [
        "hello", "world"]
    # the page takes names from WORKLOADS only, bounded choices, a bounded amount of work
    with pytest.raises(BenchError, match="shipped"):
        bench_view.settings_from_picks(ngram, [str(own)], 2, [4], [0.0], [1], [], 64)
    with pytest.raises(BenchError, match="at most"):
        bench_view.settings_from_picks(ngram, ["code", "chat", "qa"], 2, [1, 2, 3, 4, 5], [0.0, 0.5, 1.0], [1, 2], [], 64)
    s = bench_view.settings_from_picks(ngram, ["rewrite", "code"], 2, [], [0.5, 0.0], [2, 1], [], 64)
    assert s.workloads == ("code", "rewrite") and s.k == (4,) and s.temperature == (0.0, 0.5)


# -- figures -----------------------------------------------------------------------------------------------
def test_bench_row_pools_requests_and_the_speedup_decomposes_exactly():
    b = batch(BASELINE, [trace(BASELINE, [1] * 11, 0.05, ids=list(range(11))),
                         trace(BASELINE, [1] * 21, 0.10, submitted=0.0, ids=list(range(21)))], wall=2.05)
    s = batch(SPECULATIVE, [trace(SPECULATIVE, [1, 3, 3, 3, 1], 0.06, ids=list(range(11))),
                            trace(SPECULATIVE, [1] + [2] * 10, 0.12, ids=[7] * 21)],
              SpecDecodeCounters(14, 42, 14, (10, 3, 1)), wall=1.3)
    row = bench_row(Setting("code", 0.0, 2, 3), b, s)
    # pooled: (10 + 20) decode tokens over (0.5 + 2.0) s baseline, (10 + 20) over (0.24 + 1.2) s speculative
    assert row["tokens_per_s_baseline"] == pytest.approx(30 / 2.5, rel=1e-3)
    assert row["tokens_per_s_speculative"] == pytest.approx(30 / 1.44, rel=1e-3)
    assert row["tokens_per_step_speculative"] == pytest.approx(30 / 14, rel=1e-3)
    assert row["speedup"] == pytest.approx(row["tokens_per_step_ratio"] / row["step_cost_ratio"], rel=1e-3)
    assert row["throughput_baseline"] == pytest.approx(32 / 2.05, rel=1e-3)
    assert row["latency_p50_s_baseline"] == pytest.approx((0.55 + 2.05) / 2, rel=1e-3)
    assert row["identical"] == 1  # the second request's tokens differ
    assert row["acceptance_rate"] == pytest.approx(14 / 42, rel=1e-3) and row["mean_acceptance_length"] == 2.0
    assert row["accepted_per_position"] == [10, 3, 1] and row["predicted_speedup"] is None
    assert bench_row(Setting("code", 0.5, 2, 3), b, s)["identical"] is None  # sampling: no identity check


def test_predicted_speedup_is_one_plus_the_rates():
    assert predicted_speedup(0.7, 3) == pytest.approx(1 + 0.7 + 0.49 + 0.343)
    assert synthetic_rates(0.7, 3) == [0.7, 0.49, 0.343]  # the dummy presets' own rates
    assert predicted_speedup(0.5, 1) == 1.5


# -- the prediction from measured pass times ----------------------------------------------------------------
def test_draft_passes_follow_each_methods_cost_model():
    from specplay.bench.passes import draft_passes, preset_draft_passes

    assert [draft_passes(m, 5) for m in ("ngram", "suffix", "draft_model", "eagle", "eagle3", "mtp")] == [
        0, 0, 5, 5, 5, 5]
    assert draft_passes("draft_model", 5, parallel_drafting=True) == 1
    assert preset_draft_passes({"method": "draft_model", "parallel_drafting": True}, 4) == 1
    assert preset_draft_passes(get_preset("smollm2-ngram").speculative_config, 4) == 0


def _pass_time_row(k=3, a=0.7, spec_step_s=0.08, passes=3):
    base = batch(BASELINE, [trace(BASELINE, [1] * 21, 0.05)] * 2)
    spec = batch(SPECULATIVE, [trace(SPECULATIVE, [1] + [3] * 7, spec_step_s)] * 2,
                 SpecDecodeCounters(14, 14 * k, 28, (14, 10, 4)))
    return bench_row(Setting("token-ids", 0.0, 1, k, a), base, spec, synthetic=True, passes=passes)


def test_bench_row_predicts_from_measured_pass_times():
    row = _pass_time_row()  # a step costs 0.08 s against the baseline's 0.05: 1.6 target steps
    assert row["step_cost_ratio"] == pytest.approx(1.6, rel=1e-3) and row["draft_passes"] == 3
    assert row["draft_pass_cost"] == pytest.approx(0.6 / 3, rel=1e-3)  # each draft pass: 0.2 of a target step
    assert row["predicted_speedup_measured"] == pytest.approx(predicted_speedup(0.7, 3) / 1.6, rel=1e-3)
    ngram = _pass_time_row(passes=0)  # verify only: no per-pass cost, the same prediction
    assert ngram["draft_pass_cost"] is None and ngram["predicted_speedup_measured"] == row["predicted_speedup_measured"]
    assert _pass_time_row(passes=None)["predicted_speedup_measured"] is None  # no cost model given
    real = _pass_time_row(a=None)  # measured acceptance: the counters' mean acceptance length, 1 + 28/14
    assert real["predicted_speedup_measured"] == pytest.approx(3.0 / 1.6, rel=1e-3)
    headers, cells = bench_report.table([row])
    assert cells[0][headers.index("pred. (times)")] == f"{predicted_speedup(0.7, 3) / 1.6:.2f}×"
    assert cells[0][headers.index("draft/pass")] == "0.20"
    fields, flat = bench_report.csv_rows([row])
    assert {"predicted_speedup_measured", "draft_pass_cost", "draft_passes"} <= set(fields)


def test_advice_names_the_term_that_eats_the_gain():
    from specplay.bench.passes import cost_sentence

    rows = [_pass_time_row(k=3, spec_step_s=0.16)]  # 3 passes cost 2.2 target steps: more than the gain
    [a] = bench_advice.advise(rows, preset_k=3, method="draft_model", async_scheduling=True)
    assert "the 3 draft passes cost 2.20 target steps (0.73 each), more than the 2.00 extra tokens" in a.sentence
    assert "drafting eats the whole gain" in a.sentence
    cheap = cost_sentence({"draft_passes": 0, "step_cost_ratio": 1.04, "tokens_per_step_ratio": 1.21})
    assert "verifying the drafts costs 0.04 target steps" in cheap and "leaves most of the gain" in cheap
    assert cost_sentence({"step_cost_ratio": 1.2}) == ""  # a row without the cost model: nothing to say


# -- advice --------------------------------------------------------------------------------------------------
def _row(k, speedup, gain, cost, acceptance, **settings):
    return {"workload": "code", "temperature": 0.0, "concurrency": 1, "acceptance": None, "k": k, "speedup": speedup,
            "tokens_per_step_ratio": gain, "step_cost_ratio": cost, "acceptance_rate": acceptance, **settings}


def test_advice_rule_levels():
    assert bench_advice.rule_k(5, 0.8) == ("raise", 7)
    assert bench_advice.rule_k(5, 0.4) == ("lower", 3)
    assert bench_advice.rule_k(5, 0.6) == ("keep", 5)
    assert bench_advice.rule_k(4, 0.75) == ("raise", 5)
    assert bench_advice.rule_k(3, 0.3) == ("lower", 3)  # already conservative
    assert bench_advice.rule_k(7, 0.9) == ("raise", 7)


def test_advice_says_why_the_step_cost_beats_a_high_acceptance():
    rows = [_row(3, 1.9, 2.4, 1.26, 0.82), _row(5, 1.7, 2.9, 1.7, 0.80), _row(7, 1.4, 3.2, 2.3, 0.78)]
    [a] = bench_advice.advise(rows, preset_k=5, method="draft_model", async_scheduling=False)
    assert (a.rule, a.rule_k, a.best_k, a.agree) == ("raise", 7, 3, False)
    assert "80% of drafted tokens accepted at k=5 (above 70%)" in a.sentence
    assert "k=3 measured fastest (1.90×)" in a.sentence
    assert "from 1.26× at k=3 to 2.30× at k=7" in a.sentence and "without async scheduling" in a.sentence


def test_advice_when_cheap_drafts_pay_despite_low_acceptance_and_when_they_agree():
    rows = [_row(2, 1.10, 1.12, 1.02, 0.30), _row(4, 1.18, 1.21, 1.03, 0.22)]
    [a] = bench_advice.advise(rows, preset_k=4, method="ngram", async_scheduling=False)
    assert (a.rule, a.rule_k, a.best_k, a.agree) == ("lower", 3, 4, False)
    assert "almost free" in a.sentence and "n-gram" in a.sentence and "1.02× at k=2 to 1.03× at k=4" in a.sentence
    rows = [_row(3, 1.5, 1.9, 1.27, 0.40, workload="chat"), _row(5, 1.3, 2.1, 1.6, 0.35, workload="chat")]
    [a] = bench_advice.advise(rows, preset_k=5, method="eagle", async_scheduling=True)
    assert a.agree and a.best_k == a.rule_k == 3 and "agree" in a.sentence
    [one] = bench_advice.advise([_row(4, 1.2, 1.3, 1.08, 0.6)], 4, "ngram", None)
    assert one.rule == "keep" and "only k=4 was measured" in one.sentence and "Caution" not in one.sentence
    [skewed] = bench_advice.advise([_row(2, 1.6, 1.27, 0.80, 0.6), _row(4, 1.3, 1.34, 1.01, 0.46)], 4, "ngram", None)
    assert "below 1 at k=2" in skewed.sentence and "rerun" in skewed.sentence


# -- charts and files ----------------------------------------------------------------------------------------
def test_charts_from_rows_sweep_one_setting_each():
    rows = synthetic_rows()
    figs = bench_charts.figures(rows, preset_k=4)
    assert set(figs) == {"speedup_vs_k", "acceptance_per_position", "speedup_vs_temperature",
                         "throughput_vs_concurrency"}
    by_name = {t.name: t for t in figs["speedup_vs_k"].data}
    assert set(by_name) == {"code, c=1", "code, c=4", "chat, c=1", "chat, c=4"}
    code = [r for r in rows if r["workload"] == "code" and r["temperature"] == 0 and r["concurrency"] == 1]
    assert list(by_name["code, c=1"].x) == [2, 4, 6]
    assert list(by_name["code, c=1"].y) == [r["speedup"] for r in code]
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
    assert list(by_name["x · per request"].y) == [r["speedup"] for r in rates]
    assert "speedup_vs_request_rate" not in bench_charts.figures(closed, preset_k=3)  # no open loop: no chart


def test_predicted_and_measured_chart_for_synthetic_acceptance():
    rows = [dict(r, acceptance=a, predicted_speedup=predicted_speedup(a, r["k"]), workload="token-ids")
            for a in (0.5, 0.9) for r in synthetic_rows(workloads=("x",), temps=(0.0,), concs=(1,))]
    figs = bench_charts.figures(rows, preset_k=3, synthetic=True)
    traces = {t.name: t for t in figs["predicted_vs_measured"].data}
    assert list(traces["a=0.9 predicted"].y) == [round(predicted_speedup(0.9, k), 3) for k in (2, 4, 6)]
    assert "token-ids, a=0.5 measured" in traces
    assert "token-ids, a=0.5 predicted (pass times)" not in traces  # rows without a cost model: no line
    timed = [dict(r, predicted_speedup_measured=r["predicted_speedup"] / r["step_cost_ratio"]) for r in rows]
    traces = {t.name: t for t in bench_charts.predicted_vs_measured(timed).data}
    line = traces["token-ids, a=0.9 predicted (pass times)"]
    assert list(line.x) == [2, 4, 6] and line.line.dash == "dash"


def test_table_and_files_without_engines(tmp_path):
    rows = synthetic_rows(ks=(2, 4), temps=(0.0,), concs=(1,))
    headers, cells = bench_report.table(rows)
    assert headers[:4] == ["workload", "T", "c", "k"] and "a" not in headers and "identical" in headers
    assert cells[0][headers.index("speedup")].endswith("×") and cells[0][headers.index("identical")] == "1/2"
    assert "accept" in bench_report.text_table(rows).splitlines()[0]
    written = bench_report.write_results(tmp_path, {"preset": "p", "rows": rows}, bench_charts.figures(rows, 4),
                                         png=False)
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
    written = bench_report.write_results(tmp_path, {"rows": rows}, {"speedup_vs_k": bench_charts.speedup_vs_k(rows)},
                                         png=False)
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
    bench_report.write_results(tmp_path / "run", {"preset": "p", "loaded_k": 4, "rows": rows, "advice": []}, {},
                               png=False)
    done = subprocess.run([sys.executable, "-m", "specplay", "bench", "--replot", str(tmp_path / "run"), "--out",
                           str(tmp_path / "again"), "--no-png"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "speedup" in done.stdout.splitlines()[0]  # the table
    assert (tmp_path / "again" / "speedup_vs_k.html").is_file()
    assert json.loads((tmp_path / "again" / "bench.json").read_text())["rows"] == rows


def test_replot_merges_a_sweep_split_over_runs_into_one_result(tmp_path):
    rows = synthetic_rows(workloads=("code",), ks=(2, 4, 6), temps=(0.0,), concs=(1,))
    first, second = rows[:2], rows[1:]  # k=4 measured in both runs: the later run's row stands
    second = [{**r, "speedup": 9.0} if r["k"] == 4 else r for r in second]
    for name, part, ks in (("a", first, [2, 4]), ("b", second, [4, 6])):
        bench_report.write_results(tmp_path / name, {
            "preset": "p", "method": "ngram", "loaded_k": 4, "rows": part, "advice": [], "command": f"run {name}",
            "settings": {"k": ks, "concurrency": [1], "temperature": [0.0], "workloads": ["code"], "acceptance": []},
            "engines": {f"k={k}": {"speculative": {"async_scheduling": True}} for k in ks},
            "started_utc": f"2026-01-0{1 + (name == 'b')}T00:00:00Z", "finished_utc": "2026-01-03T00:00:00Z"},
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
    assert merged["started_utc"].startswith("2026-01-01") and set(merged["engines"]) == {"k=2", "k=4", "k=6"}
    (advice,) = merged["advice"]  # worked out again over all rows: k=4 (9×) is the best
    assert advice["best_k"] == 4 and "k=4 measured fastest (9.00×)" in advice["sentence"]
    with pytest.raises(ValueError, match="different presets"):
        bench_report.merge_results([json.loads((tmp_path / "a" / "bench.json").read_text()),
                                    {"preset": "q", "rows": []}])


def test_page_has_a_bench_tab_that_declines_while_a_comparison_holds_the_engines(tmp_path):
    import time

    from specplay.page import ui

    from specplay.page import bench_tab as ui_bench
    from specplay.page.cancel import CancelRegistry
    from specplay.page.manager import PairManager
    from tests.ui_fixtures import FakePair

    preset = get_preset("smollm2-ngram")
    manager = PairManager({preset.name: preset}, preset.name,
                          pair_factory=lambda p, hw, log=print: FakePair(lambda r: [], p))
    demo = ui.build_page(manager)
    labels = {getattr(block, "label", None) for block in demo.blocks.values()}
    assert {"Compare", "Bench", "Workloads", "k (num_speculative_tokens)", "One row per setting"} <= labels

    def bench(*picks):
        return list(ui_bench.run_bench(manager, CancelRegistry(), str(tmp_path), "s", *picks))

    picks = (["rewrite"], 2, [4], [0.0], [1], [], 64)
    assert "not ready" in bench(*picks)[0]["bench_error"]
    manager.load(preset.name)
    deadline = time.monotonic() + 10
    while manager.pair is None and time.monotonic() < deadline:
        time.sleep(0.05)
    with manager.run_lock:
        [out] = bench(*picks)
    assert "comparison is running" in out["bench_error"]
    assert "shipped workloads" in bench(["/etc/passwd"], 2, [4], [0.0], [1], [], 64)[0]["bench_error"]
    assert "synthetic" in bench(["rewrite"], 2, [4], [0.0], [1], [0.7], 64)[0]["bench_error"]
    manager.shutdown()


# -- the bench's engine swaps, without engines -------------------------------------------------------------
class RecordingPair:
    """Stands in for a started pair in the bench's own bookkeeping: each speculative swap is recorded and every
    batch answered with synthetic traces. (The swap itself on real engines: test_real_bench_on_the_cpu.)"""

    def __init__(self, preset, fail_at_k=None):
        self.tag, self.fail_at_k, self.swaps = preset, fail_at_k, []
        self.engines = {BASELINE: object(), SPECULATIVE: object()}

    def swap_speculative(self, settings, tag=None, progress=None):
        self.swaps.append(settings.engine_args["speculative_config"]["num_speculative_tokens"])
        self.engines[SPECULATIVE], self.tag = object(), tag or self.tag

    def engine_info(self):
        return {BASELINE: {}, SPECULATIVE: {"num_speculative_tokens": self.tag.num_speculative_tokens}}

    def run_batch(self, role, requests, concurrency, cancel=None):
        k = self.tag.num_speculative_tokens
        if role == SPECULATIVE and k == self.fail_at_k:
            raise RuntimeError("the engine died")
        if role == BASELINE:
            return batch(role, [trace(role, [1] * 9, 0.05) for _ in requests])
        return batch(role, [trace(role, [1, 3, 2, 3], 0.06) for _ in requests],
                     SpecDecodeCounters(3, 3 * k, 5, tuple([3, 2] + [0] * (k - 2))))


def test_bench_swaps_each_k_once_and_restores_the_presets_engine():
    preset = get_preset("smollm2-ngram")  # k=4
    settings = BenchSettings(preset.name, workloads=("rewrite",), n=1, k=(2, 4, 3), temperature=(0.0,), max_tokens=8)
    prompts = load_prompts(settings, preset)
    cpu = Hardware(0, None, (0, 1))

    pair = RecordingPair(preset)  # the page and `bench` on a given pair: put the preset's own engine back
    bench = BenchRun(pair, preset, settings, prompts, cpu, restore=True)
    steps = list(bench.run())
    assert pair.swaps == [2, 3, 4] and pair.tag == preset  # the loaded k first, each other k once, then back
    assert steps[-1].message == "finished" and steps[-1].done == bench.plan.units and bench.plan.restarts == 3
    assert [r["k"] for r in bench.rows] == [4, 2, 3]

    pair = RecordingPair(preset)  # a pair of the bench's own, shut down after: no restore
    list(BenchRun(pair, preset, settings, prompts, cpu, restore=False).run())
    assert pair.swaps == [2, 3] and pair.tag.num_speculative_tokens == 3

    pair = RecordingPair(preset, fail_at_k=2)  # failed half-way: the preset's engine goes back all the same
    with pytest.raises(RuntimeError, match="died"):
        list(BenchRun(pair, preset, settings, prompts, cpu, restore=True).run())
    assert pair.swaps == [2, 4] and pair.tag == preset


def test_the_page_bench_runs_to_its_end_and_releases_the_engines(tmp_path):
    import threading
    from types import SimpleNamespace

    from specplay.page import bench_tab
    from specplay.page.cancel import CancelRegistry
    from specplay.page.session import session_stem

    preset = get_preset("smollm2-ngram")  # k=4, n-gram: no draft pass
    pair = RecordingPair(preset)
    reloads = []
    manager = SimpleNamespace(pair=pair, preset=preset, hardware=Hardware(0, None, (0, 1)), run_lock=threading.Lock(),
                              reload_if_dead=lambda: reloads.append(1))
    outs = list(bench_tab.run_bench(manager, CancelRegistry(), str(tmp_path), "SESSION", ["rewrite"], 1, [2, 4],
                                    [0.0], [1], [], 8))
    final = outs[-1]
    assert final["bench_error"] == "" and not manager.run_lock.locked() and not reloads
    assert pair.swaps == [2, 4] and len(final["bench_table"]) == 2  # k=4 (loaded) first, then 2, then back
    assert {"pred. (times)", "tok/step ×"} <= set(final["bench_table"].columns)
    assert session_stem("SESSION") in final["bench_file"] and "SESSION" not in final["bench_file"]
    assert "Measured pass times: verifying the drafts costs" in final["bench_advice"]
    # exports: the JSON, the charts as PNG where a browser draws them, the table as Markdown
    assert final["bench_json"].endswith("bench.json") and final["bench_md"].startswith("| workload | T | c | k |")
    assert final["bench_md"].count("\n") == 3  # header, rule, two rows
    from specplay.bench.outputs import find_chromium

    if find_chromium():
        assert final["bench_pngs"] and all(p.endswith(".png") for p in final["bench_pngs"])


# -- real engines --------------------------------------------------------------------------------------------
