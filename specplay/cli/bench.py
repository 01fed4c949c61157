"""`python -m specplay bench`: the bench lab from the command line. A rich progress bar on stderr;
the table and the advice on stdout (or one JSON object with --json); CSV, JSON and charts under --out.
"""

from __future__ import annotations

import datetime
import json
import sys
import threading
import time
from pathlib import Path

from specplay.cli.base import CLISubcommand, UsageError, check_runnable

EXIT_BAD_SETTINGS = 2
DEFAULT_RUNS = 3  # vllm bench sweep serve's --num-runs default


def _open_pair(args, preset, hardware, log):
    """An unstarted pair: in-process engines, or the servers the command line names (remote mode)."""
    from specplay.cli.compare import remote_pair
    from specplay.run.pairs import open_pair

    return remote_pair(args, preset) if args.baseline_url else open_pair(preset, hardware, log=log)


def add_dataset_arguments(p) -> None:
    """--dataset, its format and SPEED-Bench's subsets, --context-lengths: workloads the bench makes."""
    from specplay.bench.datasets import FORMATS

    p.add_argument("--dataset", "--dataset-path", dest="dataset", default=None,
                   help="a spec-decode dataset, one workload per category: spec-bench-mini (shipped, SpecBench's 13 "
                        "categories), speed-bench-mini (shipped, SPEED-Bench's 11 qualitative categories and "
                        "throughput_1k's 3) or a file: SpecBench's question.jsonl, a ShareGPT JSON or a SPEED-Bench "
                        "folder of <subset>.jsonl files (--num-prompts per category)")
    p.add_argument("--dataset-name", choices=FORMATS, default=None,
                   help="--dataset's format, vllm bench serve's names (default: .jsonl spec_bench, .json sharegpt, "
                        "a folder speed_bench)")
    p.add_argument("--speed-bench-dataset-subset", default="",
                   help="SPEED-Bench's subsets to run, e.g. qualitative,throughput_1k (vllm bench serve's flag; default: "
                        "every <subset>.jsonl in the folder); each subset's categories are workloads of their own")
    p.add_argument("--context-lengths", default="",
                   help="prompt lengths in the target's tokens, e.g. 128,512,1536 (CPU) or 512,4096,16384: one "
                        "workload per length, cut from the shipped texts; each + max tokens must fit max_model_len")


def add_arguments(p) -> None:
    p.add_argument("--preset", help="the preset to bench (or your own pair: below; one is required unless --replot)")
    p.add_argument("--workloads", default="",
                   help="comma-separated workload names (code, chat, conversations, rewrite, summarize, qa) or "
                        "paths to your own JSONL; default code,chat (token ids for presets without a tokenizer)")
    p.add_argument("--num-prompts", "--n", dest="n", type=int, default=4,
                   help="prompts per workload (default 4; vllm bench serve's name, --n the old one)")
    add_dataset_arguments(p)
    p.add_argument("--max-concurrency", "--concurrency", dest="concurrency", default="1",
                   help="closed loop: requests in flight per engine, e.g. 1,8,32 (default 1)")
    p.add_argument("--request-rate", default="",
                   help="open loop: requests per second, e.g. 1,4,16,inf (Poisson arrivals seeded by --seed; "
                        "inf: all at once); one row per rate beside the --max-concurrency rows")
    p.add_argument("--seed", type=int, default=0, help="the arrivals' and the sampling's seed (default 0)")
    p.add_argument("--num-runs", type=int, default=None,
                   help=f"measurements of each setting, baseline and speculative alike (default {DEFAULT_RUNS} as "
                        "vllm bench sweep; 1 on the CPU engines): each row keeps every run, and the advice compares "
                        "the measured low ends")
    p.add_argument("--k", default="", help="num_speculative_tokens values, e.g. 1,3,5,7 (default: the preset's)")
    p.add_argument("--temperature", default="0", help="e.g. 0,0.5,1.0 (default 0)")
    p.add_argument("--acceptance", default="",
                   help="synthetic acceptance per draft token, e.g. 0.5,0.7,0.9 (presets with "
                        "rejection_sample_method: synthetic; position i is accepted with a^i)")
    p.add_argument("--max-tokens", type=int, default=None, help="per request (default: the preset's)")
    p.add_argument("--result-dir", "--out", dest="out", default=None,
                   help="results folder (default bench-results/<preset>-<UTC time>/)")
    p.add_argument("--no-png", action="store_true", help="write the charts as HTML only")
    p.add_argument("--goodput", nargs="+", metavar="KEY:MS", default=None,
                   help="service level objectives as vllm bench serve takes them, e.g. --goodput ttft:500 tpot:50 "
                        "(KEY ttft, tpot or e2el; milliseconds): each row's serving figures get request_goodput, the "
                        "requests a second that meet every one")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.add_argument("--save-preset", metavar="NAME", default=None,
                   help="with a k × --max-concurrency sweep: save the preset with the measured dynamic-k schedule "
                        "(num_speculative_tokens_per_batch_size) as a new preset NAME beside the preset's file (a shipped "
                        "one's: in the catalog)")
    from specplay.cli.compare import add_remote_arguments

    add_remote_arguments(p)
    from specplay.presets.adhoc import add_arguments as add_own_pair_arguments

    add_own_pair_arguments(p)
    p.add_argument("--replot", metavar="DIR", nargs="+", default=None,
                   help="no engines: redraw the charts (and CSV) of the bench.json in DIR, into --out or DIR "
                        "(e.g. PNGs on a machine with chromium for a bench run on one without); several DIRs "
                        "of one preset (a sweep split over runs) merge into one result, into --out")


def _list(flag: str, text: str, kind):
    try:
        return tuple(kind(part) for part in text.replace(" ", "").split(",") if part)
    except ValueError:
        raise UsageError(f"{flag}: expected {kind.__name__}s separated by commas, got {text!r}") from None


def settings_from_args(args, preset_name: str | None = None, cpu: bool = False):
    """BenchSettings from the command line; `cpu`: in-process CPU engines, where --num-runs defaults to 1 (a
    run there takes minutes; a GPU's or a server's default is vLLM's 3)."""
    from specplay.bench.latency import parse_rate
    from specplay.bench.runner import BenchSettings
    from specplay.bench.workloads import split_names

    return BenchSettings(
        preset=preset_name or args.preset, workloads=tuple(split_names(args.workloads)), n=args.n,
        concurrency=_list("--concurrency", args.concurrency, int), k=_list("--k", args.k, int),
        temperature=_list("--temperature", args.temperature, float),
        acceptance=_list("--acceptance", args.acceptance, float), max_tokens=args.max_tokens,
        request_rate=_list("--request-rate", args.request_rate, parse_rate), seed=args.seed,
        dataset=args.dataset, dataset_name=args.dataset_name,
        speed_bench_subsets=_list("--speed-bench-dataset-subset", args.speed_bench_dataset_subset, str),
        num_runs=args.num_runs if args.num_runs is not None else 1 if cpu else DEFAULT_RUNS,
        context_lengths=_list("--context-lengths", args.context_lengths, int),
        goodput=tuple(args.goodput or ()),
    )


class ProgressBar:
    """rich.progress redrawn in place when stderr is a terminal; one plain line per new step when it is a file
    or a pipe (logs, tests): "3/12  25% 0:07  baseline · code"."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.started = time.monotonic()
        self.last = None
        self.progress = None
        if self.tty:
            from rich.console import Console
            from rich.progress import (
                BarColumn, MofNCompleteColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn,
            )

            self.progress = Progress(BarColumn(), MofNCompleteColumn(), TaskProgressColumn(), TimeElapsedColumn(),
                                     TextColumn("{task.description}"), console=Console(file=self.stream))
            self.task = self.progress.add_task("", total=None)
            self.progress.start()

    def __call__(self, done: int, total: int, message: str) -> None:
        if self.progress is not None:
            self.progress.update(self.task, completed=done, total=total, description=message)
            return
        elapsed = int(time.monotonic() - self.started)
        line = f"{done}/{total} {done / total if total else 1.0:4.0%} {elapsed // 60}:{elapsed % 60:02d}  {message}"
        if line != self.last:
            self.stream.write(line + "\n")
            self.stream.flush()
        self.last = line

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()


def default_out(preset: str) -> Path:
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return Path("bench-results") / f"{preset}-{stamp}"


def run_cli(args, pair=None) -> int:
    """Start the preset's pair, bench it, shut it down. With `pair` (started, this preset's; tests and
    embedding), bench that one instead and leave it running as it was found."""
    from specplay.bench.runner import BenchError, BenchRun, load_prompts, make_plan
    from specplay.bench.runner import check as check_settings
    from specplay.bench.charts import figures
    from specplay.bench.outputs import write_results
    from specplay.core.hardware import detect
    from specplay.presets.adhoc import ADHOC, named_preset

    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731  (stdout: the table or the JSON)
    if args.replot:
        return replot(args, log)
    preset = named_preset(args)
    if args.save_preset and preset.name == ADHOC:  # said before the engines start, not after the sweep
        raise UsageError("--save-preset copies a preset file: give --preset or --preset-file, not --model")
    hardware = detect()
    check_runnable(preset, hardware, remote=bool(args.baseline_url))
    settings = settings_from_args(args, preset.name, cpu=hardware.device == "cpu" and not args.baseline_url)
    try:  # everything checkable is checked before the engines take minutes to start
        check_settings(settings, preset)  # before the prompts: --num-prompts 10^8 would build them first
        prompts = load_prompts(settings, preset)
        plan = make_plan(settings, preset, list(prompts))
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_SETTINGS
    out = Path(args.out) if args.out else default_out(preset.name)
    if args.baseline_url and plan.restarts:
        return remote_sweep(preset, settings, plan, prompts, out)
    log(f"bench {preset.name}: {len(plan.settings)} rows ({', '.join(prompts)}; {len(plan.variants)} speculative "
        f"engine(s), {plan.restarts} restart(s)), {plan.batches} batches"
        + (f" ({plan.runs} runs of each setting)" if plan.runs > 1 else "") + f"; results in {out}")
    own = pair is None
    if not own and getattr(pair.tag, "name", None) != preset.name:
        raise SystemExit(f"bench: the pair given runs {getattr(pair.tag, 'name', '?')}, not {preset.name}")
    pair = _open_pair(args, preset, hardware, log) if own else pair
    cancel = threading.Event()
    bench = None
    try:
        if own:
            pair.start(progress=lambda msg, frac: log(f"[start {frac:4.0%}] {msg}"))
        bench = BenchRun(pair, preset, settings, prompts, hardware, cancel=cancel, restore=not own)
        bar = ProgressBar()  # once the engines are up: their start logs its own lines
        try:
            for step in bench.run():
                bar(step.done, step.total, step.message)
        except KeyboardInterrupt:
            cancel.set()
            log("\ninterrupted: writing what was measured")
        finally:
            bar.close()  # a terminal gets its cursor back whatever happened
    finally:
        if own:
            pair.shutdown()
    result = bench.result(command=("python -m specplay " + " ".join(sys.argv[1:]),))
    written = write_results(out, result, figures(result.rows, preset.num_speculative_tokens, result.synthetic),
                            png=not args.no_png, log=log)
    report(result, written, args.json)
    return save_schedule(args, preset, result) if args.save_preset else 130 if bench.cancelled else 0


def remote_sweep(preset, settings, plan, prompts, out: Path) -> int:
    """Remote mode can't sweep k (each server runs what it was started with): refused, with the `vllm bench
    sweep serve` line that measures the same sweep with vLLM's own tool (bench.vllm_sweep) on stdout."""
    from specplay.bench.prompts import named_workloads
    from specplay.bench.vllm_sweep import sweep_serve

    print("error: k and acceptance: the speculative server runs what it was started with; sweep them with one "
          "server per setting, on in-process engines, or with vLLM's own sweep:", file=sys.stderr)
    max_tokens = settings.max_tokens or preset.default_max_tokens
    line = sweep_serve(preset, settings, plan.variants, max_tokens, named_workloads(settings, preset), out)
    print(line or f"(no workload of {', '.join(prompts)} is a file vllm bench serve can read: give --workloads)")
    return EXIT_BAD_SETTINGS


def report(result, written: dict, as_json: bool) -> None:
    """The table, the advice and the vllm bench serve lines on stdout (or the report as one JSON object)."""
    from specplay.bench import breakdown
    from specplay.bench.latency import rate_label
    from specplay.bench.outputs import text_table

    if as_json:
        print(json.dumps({**result.model_dump(), **breakdown.as_json(result.rows, result.published), "files": written}))
        return
    print(text_table(result.rows))
    print()
    for section in breakdown.sections(result.rows, result.published):  # context lengths, dataset categories
        print(section + "\n")
    for advice in result.advice:
        where = f"{advice.workload}, T={advice.temperature:g}, " + (
            f"c={advice.concurrency}" if advice.request_rate is None else rate_label(advice.request_rate))
        where += f", a={advice.acceptance:g}" if advice.acceptance is not None else ""
        print(f"{where}: {advice.sentence}")
    for rate in result.rate_advice:
        print(f"{rate.workload}, T={rate.temperature:g}, k={rate.k}, open loop: {rate.sentence}")
    if result.dynamic_k:
        dyn = result.dynamic_k
        print(dyn.sentence)
        if dyn.speculative_config is not None:
            print(f"  speculative_config: {json.dumps(dyn.speculative_config.model_dump())}")
            if dyn.caveat:  # whether vLLM's runner honours it for this method (bench.schedule)
                print(f"  # {dyn.caveat}")
    for workload, lines in result.vllm_bench_serve.items():
        print(f"\n# {workload} with vllm bench serve, on the two servers of `specplay serve-cmd` or `specplay launch`:")
        print("\n".join(lines.values()))
    print(f"\nresults: {written['csv']}, {written['json']}; charts: "
          f"{', '.join(Path(p).name for p in written['png'] or written['html'])}"
          + (f"; vllm bench serve's format: {written['vllm_summary']}" if written.get("vllm_summary") else ""))


def save_schedule(args, preset, result) -> int:
    """--save-preset: the bench's dynamic-k schedule as a new preset file beside the preset's own (the catalog
    for a shipped preset, the user's folder for --preset-file)."""
    from specplay.bench.schedule import dynamic_k, save_preset

    dyn = dynamic_k(result.rows)
    if dyn is None:
        print("error: --save-preset needs rows at two or more --max-concurrency levels and two or more --k values",
              file=sys.stderr)
        return EXIT_BAD_SETTINGS
    try:
        path = save_preset(preset.source, args.save_preset, dyn, preset.source.parent)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_SETTINGS
    print(f"saved preset {args.save_preset}: {path}")
    return 0


def replot(args, log) -> int:
    """--replot: the bench.json of each DIR (BenchReport.load), merged when several, written again."""
    from specplay.bench.charts import figures
    from specplay.bench.outputs import merge_results, write_results
    from specplay.bench.report import BenchReport

    try:
        reports = [BenchReport.load(source) for source in args.replot]
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_SETTINGS
    if len(reports) > 1 and not args.out:
        print("error: --replot with several results needs --out", file=sys.stderr)
        return EXIT_BAD_SETTINGS
    try:
        result = merge_results(reports) if len(reports) > 1 else reports[0]
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_SETTINGS
    source = Path(args.replot[0])
    out = Path(args.out) if args.out else source if source.is_dir() else source.parent
    written = write_results(out, result, figures(result.rows, result.loaded_k, result.synthetic),
                            png=not args.no_png, log=log)
    report(result, written, args.json)
    return 0


class BenchCommand(CLISubcommand):
    name = "bench"
    help = ("where speculation pays: workloads × k × temperature × concurrency, each engine measured alone; "
            "CSV, JSON, charts")
    epilog = ("exit codes: 0 ok, 1 the run failed, 2 a bad preset, bad settings or an unreadable --replot, "
              "130 interrupted (what was measured is written)")

    def add_arguments(self, parser) -> None:
        add_arguments(parser)

    def cmd(self, args, pair=None) -> int:
        return run_cli(args, pair=pair)


def cmd_init() -> list[CLISubcommand]:
    return [BenchCommand()]
