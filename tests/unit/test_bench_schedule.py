"""Dynamic k from the bench's k × concurrency table (specplay.bench.schedule): the best k per level as vLLM's
num_speculative_tokens_per_batch_size, and a preset saved with it that the catalog loads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specplay.bench.report import BenchRow
from specplay.bench.schedule import DynamicKReport, dynamic_k, dynamic_k_report, save_preset
from specplay.core.paths import PRESETS_DIR
from specplay.presets.catalog import load_file

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results" / "h200-v034" / "h200-v034dyn-probe.json"


def h200_rows() -> list[BenchRow]:
    """The H200 run's fixed-k rows (vLLM 0.34, 8B + 1B draft, acceptance 0.7) as bench rows."""
    results = json.loads(RESULTS.read_text())["results"]
    base = results["baseline"]["batches"]
    rows = []
    for name, k in (("draft-k2-v2", 2), ("draft-k3-v2", 3)):
        for batch, figures in results[name]["batches"].items():
            rows.append(BenchRow(workload="token ids", temperature=0.0, concurrency=int(batch), k=k, acceptance=0.7,
                                 speedup=figures["tok_s_median"] / base[batch]["tok_s_median"]))
    return rows


def h200_repeats() -> list[BenchRow]:
    """The same run's rows, one per measured repeat (two each), as a --replot merge of repeated benches has them."""
    results = json.loads(RESULTS.read_text())["results"]
    base = results["baseline"]["batches"]
    return [BenchRow(workload="token ids", temperature=0.0, concurrency=int(batch), k=k, acceptance=0.7,
                     speedup=tok_s / base[batch]["tok_s_median"])
            for name, k in (("draft-k2-v2", 2), ("draft-k3-v2", 3))
            for batch, figures in results[name]["batches"].items() for tok_s in figures["tok_s"]]


def test_a_near_tie_goes_to_the_smaller_k():
    """One measurement each: at 8 in flight k=3 measured 1.310x against k=2's 1.303x, 0.5% apart, within the tie
    margin: the schedule used to switch to k=3 there on that alone; now k=2 runs at every level."""
    dyn = dynamic_k(h200_rows())
    assert dyn.best_k == {1: 2, 8: 2, 32: 2, 64: 2}
    assert dyn.schedule == [[1, 1024, 2]]
    assert dyn.fragment == {"num_speculative_tokens": 2, "num_speculative_tokens_per_batch_size": [[1, 1024, 2]]}
    assert "no schedule needed" in dyn.sentence()
    # k=3 measured faster at 8: a tie the rule kept at k=2, not "best at every level" (issue 45)
    assert "k=2 (k=3 within 2%, a tie) at 8 in flight" in dyn.sentence()
    assert "best at every level" not in dyn.sentence()


def test_repeats_let_a_larger_k_win_only_where_all_its_runs_beat_the_smaller_ones_point():
    """Two runs each: at 8 in flight both of k=3's runs (1.283x, 1.310x) are above k=2's point (1.267x); at 64
    k=2's slower run (0.949x) fell below the baseline, while both of k=3's stayed above it."""
    dyn = dynamic_k(h200_repeats())
    assert dyn.best_k == {1: 2, 8: 3, 32: 2, 64: 3}
    assert dyn.schedule == [[1, 7, 2], [8, 31, 3], [32, 63, 2], [64, 1024, 3]]
    assert dyn.low[8][3] == pytest.approx(1.2831, abs=1e-4) and dyn.speedups[8][2] == pytest.approx(1.2669, abs=1e-4)


def test_speculation_off_where_no_k_beats_the_baseline():
    rows = [BenchRow(workload="w", temperature=0.0, concurrency=c, k=k, speedup=s) for c, k, s in (
        (1, 2, 1.5), (1, 3, 1.7), (16, 2, 1.01), (16, 3, 0.97), (64, 2, 0.92), (64, 3, 0.85))]
    dyn = dynamic_k(rows)
    # at 16 in flight k=2's 1.01x is one measurement within the tie margin of 1x: not clearly faster
    assert dyn.best_k == {1: 3, 16: 0, 64: 0}
    assert dyn.schedule == [[1, 15, 3], [16, 1024, 0]]
    assert dyn.fragment == {"num_speculative_tokens": 3,
                            "num_speculative_tokens_per_batch_size": [[1, 15, 3], [16, 1024, 0]]}
    assert "off (k=2 within 2%, a tie) at 16 in flight" in dyn.sentence() and "Speculation off (k=0) at 16, 64 in flight" in dyn.sentence()
    # vLLM's own validation takes the schedule (k=0 allowed) and expands it as we mean it
    from vllm.v1.spec_decode.dynamic.utils import build_dynamic_sd_schedule_lookup

    dense = build_dynamic_sd_schedule_lookup(dyn.schedule, vllm_max_batch_size=128, vllm_num_speculative_tokens=3)
    assert dense[1] == dense[15] == 3 and dense[16] == dense[128] == 0


def test_off_everywhere_has_no_fragment_and_no_preset(tmp_path):
    rows = [BenchRow(workload="w", temperature=0.0, concurrency=c, k=k, speedup=0.9) for c in (1, 8) for k in (2, 3)]
    dyn = dynamic_k(rows)
    assert dyn.schedule == [[1, 1024, 0]] and dyn.fragment is None
    assert "serve without a speculative_config" in dyn.sentence()
    assert dynamic_k_report(rows).speculative_config is None
    with pytest.raises(ValueError, match="slower than the baseline at every level"):
        save_preset(PRESETS_DIR / "dummy-llama8b-draft1b-k3.yaml", "never-on", dyn, tmp_path)


def test_the_printed_fragment_carries_the_runner_caveat(capsys):
    from specplay.bench.report import BenchReport
    from specplay.cli.bench import report

    rows = h200_repeats()
    known = dynamic_k_report(rows, "draft_model")
    assert "draft_model drafter" in known.caveat and "not recorded for vLLM 0.34" in known.caveat
    assert "k=0 where none beats the baseline" in known.rule
    unknown = dynamic_k_report(rows, "zflash").caveat
    assert "not known to the playground" in unknown and "zflash" in unknown
    written = {"csv": "bench.csv", "json": "bench.json", "html": [], "png": []}
    report(BenchReport(preset="p", rows=tuple(rows), dynamic_k=known), written, as_json=False)
    out = capsys.readouterr().out
    assert "  speculative_config: " in out and f"  # {known.caveat}" in out
    assert f"  speculative_config: {json.dumps(known.speculative_config.model_dump())}" in out


def test_dynamic_k_is_typed_and_reads_back_from_bench_json():
    """bench.json's dynamic_k is the model's dump; model_validate reads it, an older file's (no rule's figures)
    too."""
    from specplay.bench.report import BenchReport

    known = dynamic_k_report(h200_repeats(), "draft_model")
    data = json.loads(json.dumps(BenchReport(preset="p", rows=tuple(h200_repeats()), dynamic_k=known).model_dump()))
    assert data["dynamic_k"]["speculative_config"]["num_speculative_tokens_per_batch_size"] == known.schedule
    assert BenchReport.model_validate(data).dynamic_k == known
    older = {key: data["dynamic_k"][key] for key in ("schedule", "speculative_config", "sentence")}
    assert DynamicKReport.model_validate(older).caveat is None and not hasattr(known, "__getitem__")


def test_one_k_best_everywhere_needs_no_schedule_and_one_level_gives_none():
    rows = [BenchRow(workload="w", temperature=0.0, concurrency=c, k=k, speedup=s)
            for c in (1, 8) for k, s in ((2, 1.2), (3, 1.4))]
    dyn = dynamic_k(rows)
    assert dyn.schedule == [[1, 1024, 3]]
    assert "no schedule needed" in dyn.sentence()
    assert dynamic_k([r for r in rows if r.concurrency == 1]) is None
    assert dynamic_k_report([]) is None
    # open-loop rows (a request rate) are not a concurrency level
    assert dynamic_k([r.model_copy(update=dict(request_rate=4.0)) for r in rows]) is None


def test_a_saved_preset_carries_the_schedule_and_loads(tmp_path):
    dyn = dynamic_k(h200_repeats())
    path = save_preset(PRESETS_DIR / "dummy-llama8b-draft1b-k3.yaml", "my-dynamic-k", dyn, tmp_path)
    preset = load_file(path)
    spec = preset.speculative_config
    assert preset.name == "my-dynamic-k"
    assert spec.num_speculative_tokens_per_batch_size == [[1, 7, 2], [8, 31, 3], [32, 63, 2], [64, 1024, 3]]
    assert spec.num_speculative_tokens == 3
    assert spec.synthetic_acceptance_rates == pytest.approx([0.7, 0.49, 0.343])
    with pytest.raises(ValueError, match="exists already"):
        save_preset(PRESETS_DIR / "dummy-llama8b-draft1b-k3.yaml", "my-dynamic-k", dyn, tmp_path)
    with pytest.raises(ValueError, match="not a preset name"):
        save_preset(PRESETS_DIR / "dummy-llama8b-draft1b-k3.yaml", "../evil", dyn, tmp_path)


def test_one_verdict_per_level_in_the_advice_and_the_dynamic_k_line():
    """Issue 45's bench (dummy-llama8b-draft1b-k3, k=1..4 at 1, 8, 32 in flight): at 8 k=3 measured 1.515x and
    k=2 1.512x. The per-level advice said "k=3 measured fastest: rule and measurement agree" while the dynamic-k
    line kept k=2 on the tie margin and called it "best at every level measured". Both now say the same."""
    from specplay.bench import advice as bench_advice

    figures = {1: {1: 1.30, 2: 1.60, 3: 1.58, 4: 1.50}, 8: {1: 1.25, 2: 1.512, 3: 1.515, 4: 1.45},
               32: {1: 1.10, 2: 1.20, 3: 1.15, 4: 1.05}}
    rows = [BenchRow(workload="token ids", temperature=0.0, concurrency=c, k=k, speedup=s, acceptance_rate=0.6,
                     tokens_per_step_ratio=1 + 0.6 * k, step_cost_ratio=(1 + 0.6 * k) / s)
            for c, by_k in figures.items() for k, s in by_k.items()]
    dyn = dynamic_k(rows)
    assert dyn.best_k == {1: 2, 8: 2, 32: 2}
    line = dyn.sentence()
    assert "k=2 (k=3 within 2%, a tie) at 8 in flight" in line and "k=2 at 1 in flight" in line
    assert "best at every level" not in line and "within the tie margin, so no schedule needed" in line
    at8 = next(a for a in bench_advice.advise(rows, 3, "draft_model", True) if a.concurrency == 8)
    assert at8.best_k == 2 and at8.agree
    assert "k=2 (k=3 within 2%, a tie)" in at8.sentence and "k=3 measured fastest" not in at8.sentence
    # where one k is fastest at every level, the dynamic-k line still says so
    clean = dynamic_k([r.model_copy(update={"speedup": 1.40}) if (r.concurrency, r.k) == (8, 3) else r for r in rows])
    assert "One k (k=2) is best at every level measured" in clean.sentence()


def test_the_h100_bench_where_the_larger_k_is_faster_by_a_tie_at_every_level_names_one_k():
    """Issue 45, 5, measured (docs/results/h100-issue45-bench, vLLM 0.34 on an H100): k=3 measured 0.6-0.9% faster
    than k=2 at 1, 8 and 32 in flight, a tie at each, so the rule kept k=2 everywhere and the printed fragment
    asked for k=2. The line then ended "One k (k=3) is best at every level measured": the k it did not choose."""
    from specplay.bench.report import BenchReport

    report = BenchReport.load(Path(__file__).resolve().parents[2] / "docs" / "results" / "h100-issue45-bench")
    dyn = dynamic_k(list(report.rows))
    assert dyn.best_k == {1: 2, 8: 2, 32: 2} and dyn.fragment["num_speculative_tokens"] == 2
    assert all(dyn.speedups[c][3] > dyn.speedups[c][2] for c in (1, 8, 32))  # what the table says
    line = dyn.sentence()
    assert "best at every level" not in line, line
    assert "One k (k=2) serves every level" in line and "at 1, 8, 32 in flight" in line, line
