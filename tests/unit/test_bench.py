"""The bench lab: settings expansion, pooled figures, the prediction from measured pass times, advice and the
bench's engine swaps, from synthetic batches (fast). Charts and files: test_bench_outputs.py; the page's bench
tab: test_bench_page.py; a real bench on the CPU engines: tests/engines/test_bench_engines.py."""

from __future__ import annotations

import pytest

from specplay.bench import advice as bench_advice

from specplay.bench import outputs as bench_report

from specplay.page import bench_view
from specplay.bench.runner import (BenchError, BenchRun, BenchSettings, Setting, Variant, bench_row, load_prompts,
                              make_plan, predicted_speedup, synthetic_rates, variant_preset)
from specplay.bench.report import BenchRow
from specplay.core.events import BASELINE, SPECULATIVE, SpecDecodeCounters
from specplay.core.hardware import Hardware
from specplay.presets.catalog import engine_settings, get_preset
from tests.bench_fixtures import RecordingPair, batch, trace


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
    assert v.speculative_config.num_speculative_tokens == 7
    assert v.speculative_config.synthetic_acceptance_rates == synthetic_rates(0.9, 7)
    assert v.speculative_config.synthetic_acceptance_rates[:3] == [0.9, 0.81, 0.729]
    assert preset.speculative_config.num_speculative_tokens == 3  # the preset itself is untouched
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
        assert preset_draft_passes(variant_preset(preset, variant).speculative_config, variant.k) == 1


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
    row = bench_row(Setting("code", 0.0, 2, 3), b, s).model_dump()  # as bench.json and the CSV hold it
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
    assert bench_row(Setting("code", 0.5, 2, 3), b, s).identical is None  # sampling: no identity check


def test_predicted_speedup_is_one_plus_the_rates():
    assert predicted_speedup(0.7, 3) == pytest.approx(1 + 0.7 + 0.49 + 0.343)
    assert synthetic_rates(0.7, 3) == [0.7, 0.49, 0.343]  # the dummy presets' own rates
    assert predicted_speedup(0.5, 1) == 1.5


# -- the prediction from measured pass times ----------------------------------------------------------------
def test_draft_passes_follow_each_methods_cost_model():
    from specplay.bench.passes import draft_passes, preset_draft_passes
    from specplay.presets.speculation import Speculation

    assert [draft_passes(m, 5) for m in ("ngram", "suffix", "draft_model", "eagle", "eagle3", "mtp")] == [
        0, 0, 5, 5, 5, 5]
    assert draft_passes("pard", 5) == 1  # by kind: PARD is draft_model with parallel_drafting
    pard = Speculation(method="draft_model", num_speculative_tokens=4, parallel_drafting=True)
    assert preset_draft_passes(pard, 4) == 1
    assert preset_draft_passes(get_preset("smollm2-ngram").speculative_config, 4) == 0


def _pass_time_row(k=3, a=0.7, spec_step_s=0.08, passes=3):
    base = batch(BASELINE, [trace(BASELINE, [1] * 21, 0.05)] * 2)
    spec = batch(SPECULATIVE, [trace(SPECULATIVE, [1] + [3] * 7, spec_step_s)] * 2,
                 SpecDecodeCounters(14, 14 * k, 28, (14, 10, 4)))
    return bench_row(Setting("token-ids", 0.0, 1, k, a), base, spec, synthetic=True, passes=passes)


def test_bench_row_predicts_from_measured_pass_times():
    row = _pass_time_row()  # a step costs 0.08 s against the baseline's 0.05: 1.6 target steps
    assert row.step_cost_ratio == pytest.approx(1.6, rel=1e-3) and row.draft_passes == 3
    assert row.draft_pass_cost == pytest.approx(0.6 / 3, rel=1e-3)  # each draft pass: 0.2 of a target step
    assert row.predicted_speedup_measured == pytest.approx(predicted_speedup(0.7, 3) / 1.6, rel=1e-3)
    ngram = _pass_time_row(passes=0)  # verify only: no per-pass cost, the same prediction
    assert ngram.draft_pass_cost is None and ngram.predicted_speedup_measured == row.predicted_speedup_measured
    assert _pass_time_row(passes=None).predicted_speedup_measured is None  # no cost model given
    real = _pass_time_row(a=None)  # measured acceptance: the counters' mean acceptance length, 1 + 28/14
    assert real.predicted_speedup_measured == pytest.approx(3.0 / 1.6, rel=1e-3)
    headers, cells = bench_report.table([row])
    assert cells[0][headers.index("pred. (times)")] == f"{predicted_speedup(0.7, 3) / 1.6:.2f}×"
    assert cells[0][headers.index("draft/pass")] == "0.20"
    fields, flat = bench_report.csv_rows([row])
    assert {"predicted_speedup_measured", "draft_pass_cost", "draft_passes"} <= set(fields)


def test_advice_names_the_term_that_eats_the_gain():
    from specplay.bench.passes import cost_sentence

    rows = [_pass_time_row(k=3, spec_step_s=0.16)]  # 3 passes cost 2.2 target steps: more than the gain
    [a] = bench_advice.advise(rows, preset_k=3, kind="draft_model", async_scheduling=True)
    assert "the 3 draft passes cost 2.20 target steps (0.73 each), more than the 2.00 extra tokens" in a.sentence
    assert "drafting eats the whole gain" in a.sentence
    cheap = cost_sentence(BenchRow(workload="w", temperature=0.0, concurrency=1, k=2, draft_passes=0,
                                   step_cost_ratio=1.04, tokens_per_step_ratio=1.21))
    assert "verifying the drafts costs 0.04 target steps" in cheap and "leaves most of the gain" in cheap
    # a row without the cost model: nothing to say
    assert cost_sentence(BenchRow(workload="w", temperature=0.0, concurrency=1, k=2, step_cost_ratio=1.2)) == ""


# -- advice --------------------------------------------------------------------------------------------------
def _row(k, speedup, gain, cost, acceptance, **settings):
    return BenchRow(**{"workload": "code", "temperature": 0.0, "concurrency": 1, "k": k, "speedup": speedup,
                       "tokens_per_step_ratio": gain, "step_cost_ratio": cost, "acceptance_rate": acceptance,
                       **settings})


def test_advice_rule_levels():
    assert bench_advice.rule_k(5, 0.8) == ("raise", 7)
    assert bench_advice.rule_k(5, 0.4) == ("lower", 3)
    assert bench_advice.rule_k(5, 0.6) == ("keep", 5)
    assert bench_advice.rule_k(4, 0.75) == ("raise", 5)
    assert bench_advice.rule_k(3, 0.3) == ("lower", 3)  # already conservative
    assert bench_advice.rule_k(7, 0.9) == ("raise", 7)


def test_advice_says_why_the_step_cost_beats_a_high_acceptance():
    rows = [_row(3, 1.9, 2.4, 1.26, 0.82), _row(5, 1.7, 2.9, 1.7, 0.80), _row(7, 1.4, 3.2, 2.3, 0.78)]
    [a] = bench_advice.advise(rows, preset_k=5, kind="draft_model", async_scheduling=False)
    assert (a.rule, a.rule_k, a.best_k, a.agree) == ("raise", 7, 3, False)
    assert "80% of drafted tokens accepted at k=5 (above 70%)" in a.sentence
    assert "k=3 measured fastest (1.90×)" in a.sentence
    assert "from 1.26× at k=3 to 2.30× at k=7" in a.sentence and "without async scheduling" in a.sentence


def test_advice_when_cheap_drafts_pay_despite_low_acceptance_and_when_they_agree():
    rows = [_row(2, 1.10, 1.12, 1.02, 0.30), _row(4, 1.18, 1.21, 1.03, 0.22)]
    [a] = bench_advice.advise(rows, preset_k=4, kind="ngram", async_scheduling=False)
    assert (a.rule, a.rule_k, a.best_k, a.agree) == ("lower", 3, 4, False)
    assert "almost free" in a.sentence and "n-gram" in a.sentence and "1.02× at k=2 to 1.03× at k=4" in a.sentence
    rows = [_row(3, 1.5, 1.9, 1.27, 0.40, workload="chat"), _row(5, 1.3, 2.1, 1.6, 0.35, workload="chat")]
    [a] = bench_advice.advise(rows, preset_k=5, kind="eagle", async_scheduling=True)
    assert a.agree and a.best_k == a.rule_k == 3 and "agree" in a.sentence
    [one] = bench_advice.advise([_row(4, 1.2, 1.3, 1.08, 0.6)], 4, "ngram", None)
    assert one.rule == "keep" and "only k=4 was measured" in one.sentence and "Caution" not in one.sentence
    [skewed] = bench_advice.advise([_row(2, 1.6, 1.27, 0.80, 0.6), _row(4, 1.3, 1.34, 1.01, 0.46)], 4, "ngram", None)
    assert "below 1 at k=2" in skewed.sentence and "rerun" in skewed.sentence


# -- the bench's engine swaps, without engines -------------------------------------------------------------
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
    assert [r.k for r in bench.rows] == [4, 2, 3]

    pair = RecordingPair(preset)  # a pair of the bench's own, shut down after: no restore
    list(BenchRun(pair, preset, settings, prompts, cpu, restore=False).run())
    assert pair.swaps == [2, 3] and pair.tag.num_speculative_tokens == 3

    pair = RecordingPair(preset, fail_at_k=2)  # failed half-way: the preset's engine goes back all the same
    with pytest.raises(RuntimeError, match="died"):
        list(BenchRun(pair, preset, settings, prompts, cpu, restore=True).run())
    assert pair.swaps == [2, 4] and pair.tag == preset


def test_a_rate_just_under_a_threshold_is_not_printed_as_the_threshold():
    """The H100 bench (docs/results/h100-issue45-bench): 49.8% accepted at k=3 read "50% of drafted tokens
    accepted at k=3 (below 50%)". The figure now shows the decimal that puts it where the rule put it."""
    from pathlib import Path

    from specplay.bench.report import BenchReport

    report = BenchReport.load(Path(__file__).resolve().parents[2] / "docs" / "results" / "h100-issue45-bench")
    at1 = next(a for a in bench_advice.advise(list(report.rows), 3, "draft_model", True) if a.concurrency == 1)
    assert at1.rule == "lower" and "49.8% of drafted tokens accepted at k=3 (below 50%)" in at1.sentence, at1.sentence
    at8 = next(a for a in bench_advice.advise(list(report.rows), 3, "draft_model", True) if a.concurrency == 8)
    assert "55% of drafted tokens accepted at k=3 (between 50% and 70%)" in at8.sentence, at8.sentence
