"""The bench lab on real CPU engines: a small sweep in-process and the bench command end to end."""

from __future__ import annotations

import csv
import json

import pytest




from specplay.bench.runner import (BenchRun, BenchSettings, load_prompts)
from specplay.core.events import SPECULATIVE
from specplay.presets.catalog import get_preset


def test_real_bench_on_the_cpu(ngram_pair):
    """smollm2-ngram: 2 rewrite prompts at its loaded k=4, concurrency 1 and 2, T=0: the table's invariants.
    No other k: a k swap restarts the speculative engine (~40 s of the suite); the swaps' order and restore are
    tests/unit/test_bench.py's, and the restart itself is the page's preset switch (test_app_e2e.py)."""
    from specplay.core.hardware import detect

    preset = get_preset("smollm2-ngram")
    pair = ngram_pair
    settings = BenchSettings(preset.name, workloads=("rewrite",), n=2, concurrency=(1, 2), k=(4,),
                             temperature=(0.0,), max_tokens=24)
    bench = BenchRun(pair, preset, settings, load_prompts(settings, preset), detect(), restore=False)
    steps = list(bench.run())
    assert steps[-1].message == "finished" and steps[-1].done == steps[-1].total == bench.plan.units
    assert bench.plan.restarts == 0  # the loaded k only
    rows = bench.rows
    keys = [(r.workload, r.temperature, r.concurrency, r.k) for r in rows]
    assert sorted(keys) == sorted(("rewrite", 0.0, c, k) for c in (1, 2) for k in (4,))  # one row per setting
    for r in rows:
        assert r.num_accepted <= r.num_draft_tokens <= r.k * r.num_drafts
        assert sum(r.accepted_per_position) == r.num_accepted and len(r.accepted_per_position) == r.k
        assert r.speedup == pytest.approx(r.tokens_per_step_ratio / r.step_cost_ratio, rel=0.02)
        assert r.identical == r.requests == 2  # greedy: speculation changes nothing
        assert r.tokens_baseline == r.tokens_speculative > 0
        assert r.engine("tokens_per_step", "baseline") == 1.0  # no speculation: one token a step
        spec = r.serving[SPECULATIVE]  # vllm bench serve's keys and units: ms, percent
        assert spec["completed"] == 2 and spec["median_ttft_ms"] == pytest.approx(
            r.engine("ttft_p50_s", SPECULATIVE) * 1000, rel=1e-3)
        assert spec["spec_decode_acceptance_rate"] == pytest.approx(r.acceptance_rate * 100, abs=0.01)
    # the engine as vLLM resolved it while k was measured
    assert {label: info[SPECULATIVE]["num_speculative_tokens"] for label, info in bench.engines.items()} == {"k=4": 4}
    result = bench.result()
    assert {(a.workload, a.concurrency) for a in result.advice} == {("rewrite", 1), ("rewrite", 2)}
    assert all(a.sentence for a in result.advice)


def test_bench_command_end_to_end(ngram_pair, tmp_path, capsys):
    """`bench` as the command runs it (arguments, progress, files, JSON on stdout), on the session's pair
    (so no second engine start)."""
    from specplay.cli.main import main

    out = tmp_path / "results"
    assert main(["bench", "--preset", "smollm2-ngram", "--workloads", "rewrite,code", "--n", "1",
                 "--temperature", "0,0.5", "--max-tokens", "16", "--out", str(out), "--json"], pair=ngram_pair) == 0
    printed = capsys.readouterr()
    result = json.loads(printed.out)
    assert "8/8 100%" in printed.err  # the progress bar: 4 baseline and 4 speculative batches, no restart
    rows = {(r["workload"], r["temperature"]) for r in result["rows"]}
    assert rows == {("rewrite", 0.0), ("rewrite", 0.5), ("code", 0.0), ("code", 0.5)}
    assert all(r["identical"] == 1 for r in result["rows"] if r["temperature"] == 0)
    with open(out / "bench.csv") as f:
        table = list(csv.DictReader(f))
    assert {(r["workload"], float(r["temperature"])) for r in table} == rows
    saved = json.loads((out / "bench.json").read_text())
    assert saved["rows"] == result["rows"] and saved["settings"]["k"] == []
    from specplay.bench.report import BenchReport

    assert BenchReport.load(out).model_dump() == {k: v for k, v in saved.items() if k != "files"}  # typed, the same
    summary = json.loads((out / "vllm" / "summary.json").read_text())  # vllm bench sweep's format, one per engine
    assert len(summary) == 2 * len(saved["rows"]) and all(r["completed"] == 1 for r in summary)
    assert saved["files"]["png"] == ["acceptance_per_position.png", "speedup_vs_temperature.png"]
    for stem in ("acceptance_per_position", "speedup_vs_temperature"):
        assert (out / f"{stem}.html").stat().st_size > 500
        png = out / f"{stem}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000


def test_bench_num_runs_measures_each_setting_that_many_times_on_the_engines(ngram_pair, tmp_path, capsys):
    """`--num-runs 3` (vllm bench sweep serve's default count) on the real pair: each setting measured three
    times, every run kept in bench.json with its own speedup, and the row's spread is those runs' (issue 41, 5:
    each low end measured, not assumed)."""
    from specplay.bench.report import BenchReport
    from specplay.cli.main import main

    out = tmp_path / "repeats"
    assert main(["bench", "--preset", "smollm2-ngram", "--workloads", "rewrite", "--n", "1", "--max-tokens", "12",
                 "--num-runs", "3", "--no-png", "--out", str(out), "--json"], pair=ngram_pair) == 0
    printed = capsys.readouterr()
    assert "6/6 100%" in printed.err  # 3 baseline and 3 speculative batches
    (row,) = json.loads(printed.out)["rows"]
    assert row["num_runs"] == 3 and len(row["runs"]) == 3
    speedups = [r["speedup"] for r in row["runs"]]
    assert all(s > 0 for s in speedups) and row["speedup_min"] == min(speedups) and row["speedup_max"] == max(speedups)
    assert row["speedup"] in speedups  # the row is its median run, not an average of them
    assert [r.speedup for r in BenchReport.load(out).rows[0].runs] == speedups  # read back typed


def test_bench_request_rate_sweep_speaks_vllm_bench_serve(ngram_pair, tmp_path, capsys):
    """The open-loop sweep on real CPU engines, with vllm bench serve's flag names: one closed-loop row and
    one per rate, TTFT / TPOT / ITL / e2e percentiles per engine, the rate sentence, the equivalent
    `vllm bench serve` command per workload file."""
    from specplay.cli.main import main

    out = tmp_path / "rates"
    assert main(["bench", "--preset", "smollm2-ngram", "--workloads", "qa", "--num-prompts", "2",
                 "--max-concurrency", "1", "--request-rate", "4,inf", "--max-tokens", "12", "--result-dir", str(out),
                 "--no-png", "--json"], pair=ngram_pair) == 0
    result = json.loads(capsys.readouterr().out)
    assert [r["request_rate"] for r in result["rows"]] == [None, 4.0, "inf"]
    for row in result["rows"]:
        for role in ("baseline", "speculative"):
            assert 0 < row[f"ttft_p50_s_{role}"] <= row[f"ttft_p99_s_{role}"] <= row[f"latency_p99_s_{role}"]
            assert row[f"tpot_p50_s_{role}"] > 0 and row[f"itl_p90_s_{role}"] > 0
        assert row["identical"] == 2
    assert len(result["rate_advice"]) == 1 and "speculation" in result["rate_advice"][0]["sentence"]
    assert "--dataset-name custom --dataset-path" in result["vllm_bench_serve"]["qa"]["speculative"]
    assert json.loads((out / "bench.json").read_text())["settings"]["request_rate"] == [4.0, "inf"]


def test_context_buckets_and_per_position_drafted_counts_on_the_cpu(ngram_pair):
    """smollm2-ngram, context buckets of 128 and 512 target tokens (issue 37, 5): a row per bucket whose
    prompts the engines got at that length; vLLM reports how many steps drafted each position (issue 37, 6),
    so per-position acceptance divides by those, never by more steps than drafted position 0."""
    from specplay.core.hardware import detect

    preset = get_preset("smollm2-ngram")
    settings = BenchSettings(preset.name, n=1, k=(4,), max_tokens=24, context_lengths=(128, 512))
    prompts = load_prompts(settings, preset)
    for name, length in (("ctx-128", 128), ("ctx-512", 512)):  # as the engine tokenizes them
        ids = ngram_pair.engines[SPECULATIVE].prompt_token_ids(prompts[name][0].request(max_tokens=24))
        assert abs(len(ids) - length) <= 4
    bench = BenchRun(ngram_pair, preset, settings, prompts, detect(), restore=False)
    list(bench.run())
    assert [r.workload for r in bench.rows] == ["ctx-128", "ctx-512"]
    for r in bench.rows:
        drafted = r.drafted_per_position
        assert drafted is not None and len(drafted) == r.k and drafted[0] == r.num_drafts
        assert list(drafted) == sorted(drafted, reverse=True) and sum(drafted) == r.num_draft_tokens
        assert all(a <= d for a, d in zip(r.accepted_per_position, drafted))
        assert all(s is None or 0 <= s <= 1 for s in r.accepted_shares())
