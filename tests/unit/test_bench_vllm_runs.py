"""Issue 41, 5 without engines: the bench speaks vLLM's benchmark. A --dataset or --context-lengths run prints
its `vllm bench serve` lines, read by vLLM's own bench parser and dataset loaders (the same prompts); each
setting is measured --num-runs times, bench.json keeps every run and its spread, and the advice's low end is
the measured one; SPEED-Bench's format (a folder of <subset>.jsonl, as vLLM's speed_bench reads it) and the
shipped sample, a workload per subset and category."""

from __future__ import annotations

import json
import shlex

import pytest

from specplay.bench import datasets
from specplay.bench.advice import advise
from specplay.bench.report import BenchReport, BenchRow
from specplay.bench.runner import WARMUP_TEXT, BenchError, BenchRun, BenchSettings, load_prompts, make_plan
from specplay.bench.schedule import dynamic_k
from specplay.core.events import BASELINE, SPECULATIVE, SpecDecodeCounters
from specplay.core.hardware import Hardware
from specplay.presets.catalog import get_preset
from tests.bench_fixtures import RecordingPair, batch, trace
from tests.unit.test_bench_schedule import h200_repeats

NGRAM = "smollm2-ngram"
QUALITATIVE = ["coding", "humanities", "math", "multilingual", "qa", "rag", "reasoning", "roleplay", "stem",
               "summarization", "writing"]  # SPEED-Bench's 11 qualitative categories
THROUGHPUT = ["low_entropy", "mixed", "high_entropy"]  # its input-length subsets' three


def _vllm_bench_serve(line: str):
    """The line through `vllm bench serve`'s own argument parser (the installed vLLM's, on the CPU)."""
    from vllm.entrypoints.cli.benchmark.serve import BenchmarkServingSubcommand
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    argv = shlex.split(line)
    assert argv[:3] == ["vllm", "bench", "serve"]
    parser = FlexibleArgumentParser()
    BenchmarkServingSubcommand.add_cli_args(parser)
    return parser.parse_args(argv[3:])


def _vllm_prompts(args) -> list[str]:
    """The prompts vLLM's own loader takes for the parsed line (its first --num-prompts, not shuffled)."""
    from vllm.benchmarks.datasets.datasets import SpecBench, SpeedBench

    if args.dataset_name == "spec_bench":
        loader = SpecBench(dataset_path=args.dataset_path, category=args.spec_bench_category,
                           disable_shuffle=args.disable_shuffle)
    else:
        loader = SpeedBench(dataset_path=args.dataset_path, dataset_subset=args.speed_bench_dataset_subset,
                            category=args.speed_bench_category, disable_shuffle=args.disable_shuffle)
    return [d["prompt"] for d in loader.data[:args.num_prompts]]


def _run(settings, pair=None, preset=None):
    preset = preset or get_preset(settings.preset)
    bench = BenchRun(pair or RecordingPair(preset), preset, settings, load_prompts(settings, preset),
                     Hardware(0, None, (0, 1)), warmup=False)
    list(bench.run())
    return bench


@pytest.mark.parametrize("dataset", ["spec-bench-mini", "speed-bench-mini"])
def test_a_dataset_run_prints_lines_vllms_bench_reads_as_the_same_prompts(dataset):
    settings = BenchSettings(NGRAM, dataset=dataset, n=2, max_tokens=16, concurrency=(4,))
    bench = _run(settings)
    report = bench.result()
    assert set(report.vllm_bench_serve) == set(bench.prompts)  # a line per category, as per workload file
    for workload, lines in report.vllm_bench_serve.items():
        args = _vllm_bench_serve(lines[SPECULATIVE])
        assert args.dataset_name == ("spec_bench" if dataset == "spec-bench-mini" else "speed_bench")
        assert (args.num_prompts, args.max_concurrency, args.base_url) == (2, 4, "http://127.0.0.1:8001")
        output_len = args.spec_bench_output_len if args.dataset_name == "spec_bench" else args.speed_bench_output_len
        assert output_len == 16
        assert _vllm_prompts(args) == [p.prompt for p in bench.prompts[workload]], workload
        assert _vllm_bench_serve(lines[BASELINE]).base_url == "http://127.0.0.1:8000"


def test_a_context_length_run_prints_vllms_random_dataset_of_each_length():
    settings = BenchSettings(NGRAM, context_lengths=(128, 512), n=2, max_tokens=16, workloads=("qa",))
    bench = _run(settings)
    lines = bench.result().vllm_bench_serve
    assert list(lines) == ["qa", "ctx-128", "ctx-512"]  # the workload file's line as before, then a bucket's each
    for length in (128, 512):
        args = _vllm_bench_serve(lines[f"ctx-{length}"][SPECULATIVE])
        assert (args.dataset_name, args.random_input_len, args.random_output_len) == ("random", length, 16)
        assert float(args.random_range_ratio) == 0.0 and args.num_prompts == 2  # every prompt of that length
    assert _vllm_bench_serve(lines["qa"][SPECULATIVE]).dataset_name == "custom"


def test_a_sharegpt_file_prints_vllms_sharegpt_line(tmp_path):
    share = tmp_path / "sg.json"
    share.write_text(json.dumps([{"conversations": [{"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Hello"}]}]))
    lines = _run(BenchSettings(NGRAM, dataset=str(share), n=1, max_tokens=8)).result().vllm_bench_serve
    args = _vllm_bench_serve(lines["sg:all"][SPECULATIVE])
    assert (args.dataset_name, args.dataset_path, args.sharegpt_output_len) == ("sharegpt", str(share), 8)


def test_the_shipped_speed_bench_sample_is_a_workload_per_subset_and_category():
    groups = datasets.dataset_workloads("speed-bench-mini", None, 5)
    assert list(groups) == ([f"speed-bench-mini:qualitative/{c}" for c in QUALITATIVE]
                            + [f"speed-bench-mini:throughput_1k/{c}" for c in THROUGHPUT])
    assert [len(g) for g in groups.values()] == [2] * 11 + [1] * 3
    # the second turn of a two-message row is not a prompt (vLLM takes messages[0])
    assert "Now rewrite it" not in "".join(p.prompt for g in groups.values() for p in g)
    only = datasets.dataset_workloads("speed-bench-mini", None, 1, ("throughput_1k",))
    assert list(only) == [f"speed-bench-mini:throughput_1k/{c}" for c in THROUGHPUT]
    assert all(3500 < len(p.prompt) for g in only.values() for p in g)  # about a thousand tokens each


def test_a_speed_bench_folder_of_ones_own_and_its_errors(tmp_path):
    folder = tmp_path / "speed"
    folder.mkdir()
    (folder / "throughput_2k.jsonl").write_text(
        json.dumps({"question_id": "a", "category": "mixed", "messages": [{"role": "user", "content": "Hello"}]})
        + "\n\n" + json.dumps({"question_id": "b", "messages": [{"role": "user", "content": "No category"}]}) + "\n")
    prompts = datasets.load_dataset(str(folder))  # a folder: speed_bench, without --dataset-name
    assert [(p.workload, p.prompt) for p in prompts] == [("speed:throughput_2k/mixed", "Hello"),
                                                         ("speed:throughput_2k/all", "No category")]
    (folder / "qualitative.jsonl").write_text('{"category": "qa", "messages": []}\n')
    for subsets, message in ((("qualitative",), r"qualitative.jsonl: line 1: expected \{\"category\", \"messages\""),
                             (("throughput_3k",), r"speed_bench subset 'throughput_3k': expected one of qualitative")):
        with pytest.raises(BenchError, match=message):
            load_prompts(BenchSettings(NGRAM, dataset=str(folder), speed_bench_subsets=subsets), get_preset(NGRAM))
    with pytest.raises(BenchError, match="speed_bench reads a directory"):
        load_prompts(BenchSettings(NGRAM, dataset=str(folder / "qualitative.jsonl"), dataset_name="speed_bench"),
                     get_preset(NGRAM))


class VaryingPair(RecordingPair):
    """Each speculative batch a little slower than the last: runs of one setting differ, as on a real machine."""

    calls = 0  # measured speculative batches (not the warm-ups)

    def run_batch(self, role, requests, concurrency, cancel=None, arrival_times=None):
        if role == BASELINE:
            return super().run_batch(role, requests, concurrency, cancel)
        self.calls += requests[0].prompt != WARMUP_TEXT
        k = self.tag.num_speculative_tokens
        return batch(role, [trace(role, [1, 3, 2, 3], 0.06 * (1 + 0.05 * self.calls)) for _ in requests],
                     SpecDecodeCounters(3, 3 * k, 5, tuple([3, 2] + [0] * (k - 2))))


def test_num_runs_measures_each_setting_that_often_and_bench_json_keeps_each_run(tmp_path, capsys):
    from specplay.cli.main import main

    preset = get_preset(NGRAM)
    plan = make_plan(BenchSettings(NGRAM, num_runs=3, k=(2, 4)), preset, ["code", "chat"])
    assert (plan.runs, plan.baseline_batches, plan.batches) == (3, 2 * 3, 2 * 3 + 4 * 3)
    pair = VaryingPair(preset)
    assert main(["bench", "--preset", NGRAM, "--workloads", "code", "--n", "2", "--max-tokens", "8", "--k", "2,4",
                 "--num-runs", "3", "--out", str(tmp_path), "--no-png"], pair=pair) == 0
    assert pair.calls == 2 * 3  # two ks, three runs each
    assert "runs min" in capsys.readouterr().out  # the text table shows the spread
    data = json.loads((tmp_path / "bench.json").read_text())
    assert data["settings"]["num_runs"] == 3
    for row in data["rows"]:
        speedups = [run["speedup"] for run in row["runs"]]
        assert row["num_runs"] == 3 and len(set(speedups)) == 3  # three measurements, each its own
        assert row["speedup_min"] == min(speedups) < row["speedup"] < row["speedup_max"] == max(speedups)
        assert all(run["tokens_per_s_baseline"] and run["tokens_per_s_speculative"] for run in row["runs"])
    loaded = BenchReport.load(tmp_path)
    assert [len(r.speedups) for r in loaded.rows] == [3, 3]
    assert "runs" not in (tmp_path / "bench.csv").read_text().splitlines()[0].split(",")
    # one run (the CPU engines' default): the row as before, no runs
    one = _run(BenchSettings(NGRAM, workloads=("code",), n=2, max_tokens=8)).result().model_dump()
    assert "runs" not in one["rows"][0] and one["settings"]["num_runs"] == 1


def test_the_cli_default_is_vllms_three_runs_and_one_on_the_cpu_engines():
    from specplay.cli.bench import settings_from_args
    from specplay.cli.main import _parser

    args = _parser().parse_args(["bench", "--preset", NGRAM])
    assert settings_from_args(args).num_runs == 3 and settings_from_args(args, cpu=True).num_runs == 1
    args = _parser().parse_args(["bench", "--preset", NGRAM, "--num-runs", "2"])
    assert settings_from_args(args, cpu=True).num_runs == 2
    with pytest.raises(BenchError, match="num runs: expected 1 to 20"):
        make_plan(BenchSettings(NGRAM, num_runs=0), get_preset(NGRAM), ["code"])


def _cell(k: int, speedups: list[float], concurrency: int = 1) -> BenchRow:
    runs = [BenchRow(workload="w", temperature=0.0, concurrency=concurrency, k=k, speedup=s, acceptance_rate=0.6)
            for s in speedups]
    return BenchRow.of_runs(runs)


def test_the_advice_compares_the_measured_low_end_of_each_ks_runs():
    """k=4's median run is 1.30×, 8% above k=2's: one measurement of it would win; its slowest run (1.05×) is
    below k=2's point, so its runs' spread makes it a tie and the smaller k keeps the level."""
    steady, noisy = _cell(2, [1.19, 1.20, 1.21]), _cell(4, [1.30, 1.05, 1.31])
    assert noisy.speedup == 1.30 and noisy.speedups == [1.30, 1.05, 1.31]
    [advice] = advise([steady, noisy], 4, "ngram", None)
    assert advice.best_k == 2 and "k=4 within its runs' spread, a tie" in advice.sentence
    lone = noisy.model_copy(update={"runs": ()})  # the same row without its runs: the low end is assumed
    [advice] = advise([steady, lone], 4, "ngram", None)
    assert advice.best_k == 4


def test_runs_in_one_row_give_the_schedule_that_repeated_rows_give():
    cells: dict[tuple, list[BenchRow]] = {}
    for row in h200_repeats():
        cells.setdefault((row.concurrency, row.k), []).append(row)
    rows = [BenchRow.of_runs(group) for group in cells.values()]
    assert all(len(r.runs) == 2 for r in rows)
    together, apart = dynamic_k(rows), dynamic_k(h200_repeats())
    assert together.best_k == apart.best_k == {1: 2, 8: 3, 32: 2, 64: 3} and together.low == apart.low
    back = BenchReport.model_validate(json.loads(json.dumps(BenchReport(preset="p", rows=tuple(rows)).model_dump())))
    assert [r.speedups for r in back.rows] == [r.speedups for r in rows]  # bench.json holds every run
