"""vLLM interop (issue 37, 7): the bench's serving figures carry every key `vllm bench serve --save-result
--save-detailed` writes that applies, the defaults `vllm bench sweep plot` reads, request_goodput from
`--goodput` SLOs as vLLM takes them, a remote k sweep answered with the `vllm bench sweep serve` line that runs
it (checked by vLLM's own sweep in dry-run mode), and compare --json carrying the verifier's sentence.
vLLM's keys and defaults are read from the installed vLLM's source, not from a list of ours."""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import io
import json
import shlex
from pathlib import Path

import pytest

from specplay.bench.runner import BenchError, BenchRun, BenchSettings, check, load_prompts
from specplay.bench.vllm_format import parse_goodput, serving_figures, sweep_results
from specplay.core.events import BASELINE, SPECULATIVE
from specplay.core.hardware import Hardware
from specplay.presets.catalog import get_preset
from tests.bench_fixtures import RecordingPair, batch, trace

VLLM = Path(importlib.util.find_spec("vllm").submodule_search_locations[0])
# what the issue lists from `vllm bench serve --save-result` (with --save-detailed: the per-request lists)
SAVE_RESULT_KEYS = (
    "date", "backend", "model_id", "tokenizer_id", "num_prompts", "request_rate", "burstiness", "max_concurrency",
    "duration", "completed", "total_input_tokens", "total_output_tokens", "request_throughput", "request_goodput",
    "output_throughput", "total_token_throughput", "input_lens", "output_lens", "ttfts", "itls", "generated_texts",
    "errors", *(f"{s}_{m}_ms" for m in ("ttft", "tpot", "itl", "e2el") for s in ("mean", "median", "std", "p99")),
    "spec_decode_acceptance_rate", "spec_decode_acceptance_length", "spec_decode_num_drafts",
    "spec_decode_draft_tokens", "spec_decode_accepted_tokens", "spec_decode_per_position_acceptance_rates")


class _Pair(RecordingPair):
    """RecordingPair whose traces know their prompt's length, as the engines' batches do (engine/batch.py)."""

    def run_batch(self, role, requests, concurrency, cancel=None, arrival_times=None):
        result = super().run_batch(role, requests, concurrency, cancel, arrival_times)
        for t in result.traces:
            t.prompt_tokens = 11
        return result


def _report(**settings):
    preset = get_preset("smollm2-ngram")
    bench_settings = BenchSettings(preset.name, workloads=("rewrite",), n=2, max_tokens=8, **settings)
    bench = BenchRun(_Pair(preset), preset, bench_settings, load_prompts(bench_settings, preset),
                     Hardware(0, None, (0, 1)), warmup=False)
    list(bench.run())
    return bench.result()


def _plot_defaults() -> dict[str, str]:
    """`vllm bench sweep plot`'s argument defaults (--var-x, --var-y), read from its source."""
    tree = ast.parse((VLLM / "benchmarks" / "sweep" / "plot.py").read_text())
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument" and node.args \
                and isinstance(node.args[0], ast.Constant) and node.args[0].value in ("--var-x", "--var-y"):
            out[node.args[0].value] = next(k.value.value for k in node.keywords if k.arg == "default")
    return out


def test_every_key_vllm_bench_serve_saves_is_in_the_bench_json_and_summary():
    report = _report(concurrency=(1, 2))
    results = sweep_results(report)
    for result in results:
        missing = [k for k in SAVE_RESULT_KEYS if k not in result and not (
            result["role"] == BASELINE and k.startswith("spec_decode_"))]
        assert not missing, f"{result['role']}: {missing}"
    spec = next(r for r in results if r["role"] == SPECULATIVE)
    assert spec["total_input_tokens"] == 2 * 11 and spec["input_lens"] == [11, 11]
    assert spec["total_token_throughput"] == pytest.approx((22 + spec["total_output_tokens"]) / spec["duration"],
                                                           rel=1e-4)
    assert spec["output_lens"] == [9, 9] and len(spec["itls"]) == 2 and len(spec["itls"][0]) == 3  # 4 chunks
    assert spec["errors"] == ["", ""] and spec["request_goodput"] is None  # no --goodput: None, as vLLM
    assert spec["date"][8] == "-" and len(spec["date"]) == 15  # vLLM's %Y%m%d-%H%M%S
    # bench.json's rows carry the same figures (the summary is built from them)
    assert report.model_dump()["rows"][0]["serving"][SPECULATIVE]["input_lens"] == [11, 11]


def test_the_keys_vllm_bench_sweep_plot_reads_by_default_have_values():
    defaults = _plot_defaults()
    assert defaults == {"--var-x": "total_token_throughput", "--var-y": "median_ttft_ms"}  # vLLM's, as read
    for result in sweep_results(_report()):
        for key in defaults.values():
            assert isinstance(result[key], float) and result[key] > 0, (result["role"], key)


def test_goodput_slos_as_vllm_takes_them():
    assert parse_goodput(["ttft:500", "tpot:50", "e2el:2000"]) == {"ttft": 500.0, "tpot": 50.0, "e2el": 2000.0}
    for bad in (["ttft=500"], ["itl:5"], ["ttft:-1"], ["ttft:fast"]):
        with pytest.raises(ValueError, match="KEY:MS"):
            parse_goodput(bad)
    # three requests: TTFT 0.1, 0.6 and 0.2 s, 5 tokens 0.05 s apart (TPOT 50 ms), end to end 0.3-0.8 s
    traces = [trace(SPECULATIVE, [1] * 5, 0.05, submitted=0.0, first_token_s=f) for f in (0.1, 0.6, 0.2)]
    b = batch(SPECULATIVE, traces, wall=2.0)
    assert serving_figures(b)["request_goodput"] is None
    assert serving_figures(b, {"ttft": 500})["request_goodput"] == 1.0  # 2 good requests in 2 s
    assert serving_figures(b, {"ttft": 500, "e2el": 350})["request_goodput"] == 0.5  # only the first: 0.3 s
    assert serving_figures(b, {"tpot": 40})["request_goodput"] == 0.0
    assert serving_figures(b, {"tpot": 50.001})["request_goodput"] == 1.5


def test_goodput_on_the_bench_reaches_every_row_and_the_vllm_lines(tmp_path):
    report = _report(goodput=("ttft:100000",))  # every request meets it
    for row in report.rows:
        for figures in row.serving.values():
            assert figures["request_goodput"] == pytest.approx(figures["request_throughput"])
    [line] = [lines[SPECULATIVE] for lines in report.vllm_bench_serve.values()]
    assert shlex.split(line)[-2:] == ["--goodput", "ttft:100000"]
    preset = get_preset("smollm2-ngram")
    with pytest.raises(BenchError, match="KEY:MS"):
        check(BenchSettings(preset.name, goodput=("ttft<500",)), preset)


def _bench_cli(tmp_path, *extra) -> tuple[int, str, str]:
    from specplay.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["bench", "--preset", "smollm2-ngram", "--baseline-url", "http://127.0.0.1:9",
                     "--speculative-url", "http://127.0.0.1:10", "--workloads", "code,chat", "--n", "3",
                     "--max-tokens", "16", "--out", str(tmp_path / "out"), *extra])
    return code, out.getvalue(), err.getvalue()


def test_a_remote_k_sweep_prints_the_vllm_sweep_that_runs_it(tmp_path, capsys):
    """Refused before any server is asked (as before), now with vLLM's own sweep of the same settings; vLLM's
    sweep, in its dry-run mode, reads the line and the params files and would serve each k."""
    code, line, err = _bench_cli(tmp_path, "--k", "2,4", "--concurrency", "1,4")
    assert code == 2 and "runs what it was started with" in err and "vLLM's own sweep" in err
    argv = shlex.split(line.strip())
    env = argv[:argv.index("vllm")]  # the serve line's environment, in front of the whole sweep (its children get it)
    assert all("=" in e for e in env) and argv[len(env):len(env) + 4] == ["vllm", "bench", "sweep", "serve"]
    argv = argv[len(env):]
    serve_params = json.loads((tmp_path / "out" / "vllm" / "sweep_serve_params.json").read_text())
    assert sorted((p["_benchmark_name"], p["speculative_config"]["num_speculative_tokens"]) for p in serve_params) == [
        ("k=2", 2), ("k=4", 4)]
    bench_params = json.loads((tmp_path / "out" / "vllm" / "sweep_bench_params.json").read_text())
    assert len(bench_params) == 2 * 2  # workload files × concurrencies (one temperature)
    assert {p["max_concurrency"] for p in bench_params} == {1, 4}

    from vllm.benchmarks.sweep.serve import SweepServeArgs, run_main
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    args = SweepServeArgs.add_cli_args(FlexibleArgumentParser()).parse_args(argv[4:] + ["--dry-run"])
    capsys.readouterr()
    run_main(SweepServeArgs.from_cli_args(args))
    printed = capsys.readouterr().out
    served = [ast.literal_eval(x.split(": ", 1)[1]) for x in printed.splitlines() if x.startswith("Server command:")]
    configs = [json.loads(cmd[cmd.index("--speculative-config") + 1]) for cmd in served]
    assert sorted(c["num_speculative_tokens"] for c in configs) == [2, 4] and {c["method"] for c in configs} == {"ngram"}
    benched = [ast.literal_eval(x.split(": ", 1)[1]) for x in printed.splitlines() if x.startswith("Benchmark command:")]
    assert len(benched) == 2 * 4 * 3  # each k × each bench entry × vLLM's 3 runs
    assert all(cmd[cmd.index("--max-concurrency") + 1] in ("1", "4") for cmd in benched)


def test_compare_json_carries_the_verifiers_sentence():
    """A FLy run's "outputs differ by design" was only in the text report; the JSON carries it now."""
    from specplay.run.result import RunResult
    from tests.ui_fixtures import comparison_of, synthetic_events

    diverged = comparison_of(synthetic_events([1, 2, 3], [[1], [2, 4]]))
    fly = RunResult.of(diverged, get_preset("smollm2-ngram-fly"), device="gpu")
    out = json.loads(json.dumps(fly.model_dump(mode="json")))
    assert "lossy" in out["verifier_why_different"] and "differ by design" in out["verifier_why_different"]
    exact = RunResult.of(diverged, get_preset("smollm2-ngram")).model_dump(mode="json")
    assert exact["verifier_exact"] is True and exact["verifier_why_different"] is None


def test_an_engines_batch_records_each_prompts_length(monkeypatch):
    """input_lens and total_token_throughput need the prompts' lengths: the pair's batches record them (through
    a third backend, tests/echo_backend.py: a prompt of n characters is n tokens)."""
    from specplay.core.events import GenerationRequest
    from specplay.engine import backends
    from specplay.engine.pair import EnginePair
    from tests.echo_backend import EchoEngine, EchoSettings

    monkeypatch.setitem(backends.BACKENDS, EchoSettings, EchoEngine)
    pair = EnginePair(EchoSettings(BASELINE), EchoSettings(SPECULATIVE, tokens_per_step=3))
    try:
        pair.start()
        requests = [GenerationRequest(prompt=p, max_tokens=6) for p in ("abcd", "abcdefg")]
        result = pair.run_batch(SPECULATIVE, requests, concurrency=2)
    finally:
        pair.shutdown()
    assert [t.prompt_tokens for t in result.traces] == [4, 7]
    figures = serving_figures(result)
    assert figures["input_lens"] == [4, 7] and figures["total_input_tokens"] == 11
    assert figures["output_lens"] == [6, 6] and figures["total_token_throughput"] > figures["output_throughput"]
