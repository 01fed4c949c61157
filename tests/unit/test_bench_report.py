"""The bench's typed report (bench.report) and its figures in vllm bench serve's format (bench.vllm_format),
without engines: a bench on a recording pair saved and loaded back as it was, the results of earlier versions
loading, and every key we write in vLLM's format one that the installed vLLM's `vllm bench serve` writes
(read from its source, vllm/benchmarks/serve.py, not from a list of ours)."""

from __future__ import annotations

import ast
import importlib.util
import json
import re
from pathlib import Path

import pytest

from specplay.bench.advice import Advice
from specplay.bench.report import RUN_FIGURES, BenchReport, BenchRow, RateAdvice
from specplay.bench.runner import BenchRun, BenchSettings, load_prompts
from specplay.bench.vllm_format import SUMMARY, SUMMARY_DIR, sweep_results
from specplay.core.events import BASELINE, SPECULATIVE
from specplay.core.hardware import Hardware
from specplay.presets.catalog import get_preset
from tests.bench_fixtures import RecordingPair

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"
# what we add to each vLLM result, as `vllm bench sweep` adds its swept variables to each (the plot's axes)
SWEPT = {"role", "preset", "workload", "temperature", "num_speculative_tokens", "acceptance", "speedup"}


def _report(**settings) -> BenchReport:
    preset = get_preset("smollm2-ngram")
    bench_settings = BenchSettings(preset.name, workloads=("rewrite",), n=2, max_tokens=8, **settings)
    bench = BenchRun(RecordingPair(preset), preset, bench_settings, load_prompts(bench_settings, preset),
                     Hardware(0, None, (0, 1)), warmup=False)
    list(bench.run())
    return bench.result(command=("python -m specplay bench --preset smollm2-ngram",))


def test_a_report_saved_loads_back_typed_and_the_same(tmp_path):
    report = _report(concurrency=(1, 2), request_rate=(4.0, float("inf")))
    path = report.save(tmp_path / "bench.json")
    loaded = BenchReport.load(tmp_path)  # the folder or the file
    assert loaded.rows == report.rows and loaded.advice == report.advice and loaded.rate_advice == report.rate_advice
    assert loaded.model_dump() == report.model_dump() == json.loads(path.read_text())
    assert all(isinstance(a, Advice) for a in loaded.advice) and isinstance(loaded.rate_advice[0], RateAdvice)
    row = loaded.rows[0]
    assert isinstance(row, BenchRow) and row.speedup == pytest.approx(row.tokens_per_step_ratio / row.step_cost_ratio,
                                                                      rel=0.01)
    assert [r.request_rate for r in loaded.rows] == [None, None, 4.0, "inf"]  # vllm bench serve's "inf"
    assert loaded.settings["request_rate"] == [4.0, "inf"] and loaded.command == report.command
    assert loaded.environment.engines == report.environment.engines  # each engine's info, as JSON
    assert loaded.environment.engines["k=4"][BASELINE] == {}  # (an engine info with nothing known)
    assert loaded.environment.engines["k=4"][SPECULATIVE]["num_speculative_tokens"] == 4
    with pytest.raises(ValueError, match="missing.json: no such file"):
        BenchReport.load(tmp_path / "missing.json")


@pytest.mark.parametrize("name", sorted(p.parent.name for p in RESULTS.glob("*/bench.json")))
def test_the_results_of_earlier_versions_load(name):
    """The docs' bench.json files, those written before the report was typed (environment at the top level,
    command one string, no serving figures) and after: each one loads with its rows and advice typed."""
    raw = json.loads((RESULTS / name / "bench.json").read_text())
    report = BenchReport.load(RESULTS / name)
    assert len(report.rows) == len(raw["rows"]) and len(report.advice) == len(raw["advice"])
    command = raw["command"]  # one line, or several after a --replot merge
    assert report.environment.device == (raw["device"] if "device" in raw else raw["environment"]["device"])
    assert report.command == (tuple(command) if isinstance(command, list) else (command,))
    assert [r.speedup for r in report.rows] == [r["speedup"] for r in raw["rows"]]
    assert [r.model_dump()["ttft_p50_s_speculative"] for r in report.rows] == [
        r.get("ttft_p50_s_speculative") for r in raw["rows"]]


def test_a_rows_declared_figures_are_the_metrics_run_figures():
    """Each figure is defined once (run.metrics); BenchRow declares a field for each run-scope one."""
    fields = set(BenchRow.model_fields)
    assert set(RUN_FIGURES) <= fields and {"speedup", "acceptance_rate", "draft_pass_cost"} <= set(RUN_FIGURES)


# -- vllm bench serve's format -----------------------------------------------------------------------------------
def vllm_result_keys() -> tuple[set[str], list[re.Pattern]]:
    """The keys `vllm bench serve --save-result` writes, read from the installed vLLM's source: the
    constant keys of `result` / `result_json`, and the f-string ones (f"p{p_word}_{metric_attribute_name}_ms")
    as patterns, the metric names taken from its process_one_metric("ttft", ...) calls."""
    source = Path(importlib.util.find_spec("vllm").submodule_search_locations[0]) / "benchmarks" / "serve.py"
    tree = ast.parse(source.read_text())
    metrics = {node.args[0].value for node in ast.walk(tree) if isinstance(node, ast.Call)
               and getattr(node.func, "id", None) == "process_one_metric" and isinstance(node.args[0], ast.Constant)}
    keys, patterns = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "result" \
                and isinstance(node.value, ast.Dict):
            keys |= {k.value for k in node.value.keys if isinstance(k, ast.Constant)}
        if not (isinstance(node, ast.Subscript) and getattr(node.value, "id", None) in ("result", "result_json")
                and isinstance(node.ctx, ast.Store)):
            continue
        if isinstance(node.slice, ast.Constant):
            keys.add(node.slice.value)
        elif isinstance(node.slice, ast.JoinedStr):
            parts = [re.escape(v.value) if isinstance(v, ast.Constant) else
                     f"({'|'.join(sorted(metrics))})" if getattr(v.value, "id", None) == "metric_attribute_name"
                     else r"[0-9.]+" for v in node.slice.values]
            patterns.append(re.compile("".join(parts)))
    assert {"ttft", "tpot", "itl", "e2el"} <= metrics and "output_throughput" in keys  # the source read as meant
    return keys, patterns


def test_our_serving_figures_are_in_vllm_bench_serves_keys_and_units(tmp_path):
    keys, patterns = vllm_result_keys()
    report = _report(concurrency=(1, 2))
    results = sweep_results(report)
    assert len(results) == 2 * len(report.rows) and {r["role"] for r in results} == {BASELINE, SPECULATIVE}
    ours = {key for result in results for key in result} - SWEPT
    unknown = sorted(k for k in ours if k not in keys and not any(p.fullmatch(k) for p in patterns))
    assert not unknown, f"not keys of vllm bench serve's result: {unknown}"
    for needed in ("median_ttft_ms", "p99_e2el_ms", "mean_tpot_ms", "output_throughput",
                   "spec_decode_acceptance_rate", "spec_decode_acceptance_length", "max_concurrency", "request_rate"):
        assert needed in ours
    row = report.rows[0]
    spec = row.serving[SPECULATIVE]  # the units: ms for latencies, percent for acceptance
    assert spec["median_ttft_ms"] == pytest.approx(row.engine("ttft_p50_s", SPECULATIVE) * 1000, rel=1e-3)
    assert spec["p99_e2el_ms"] == pytest.approx(row.engine("latency_p99_s", SPECULATIVE) * 1000, rel=1e-3)
    assert spec["spec_decode_acceptance_rate"] == pytest.approx(row.acceptance_rate * 100, rel=1e-3)
    assert spec["spec_decode_acceptance_length"] == pytest.approx(row.mean_acceptance_length, rel=1e-3)
    assert "spec_decode_acceptance_rate" not in row.serving[BASELINE]
    from specplay.bench.charts import figures
    from specplay.bench.outputs import write_results

    written = write_results(tmp_path, report, figures(report.rows, 4), png=False)
    summary = json.loads((tmp_path / SUMMARY_DIR / SUMMARY).read_text())  # what `vllm bench sweep plot` globs
    assert written["vllm_summary"].endswith(f"{SUMMARY_DIR}/{SUMMARY}") and summary == results
    assert "serving" not in Path(written["csv"]).read_text()  # the CSV keeps the bench's own columns
