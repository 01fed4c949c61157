"""What a bench run measures (BenchSettings, as the CLI and the page give it) and the check that it can run,
before the engines take minutes to start. No engines."""

from __future__ import annotations

from dataclasses import dataclass

from specplay.bench import context
from specplay.bench.prompts import BenchError
from specplay.bench.vllm_format import parse_goodput
from specplay.bench.workloads import WorkloadError
from specplay.presets.catalog import Preset

MAX_RUNS = 20


@dataclass(frozen=True)
class BenchSettings:
    preset: str
    workloads: tuple[str, ...] = ()  # names or JSONL paths; empty: code and chat (token ids without a tokenizer)
    n: int = 4  # prompts per workload
    concurrency: tuple[int, ...] = (1,)  # closed loop: requests in flight (vllm bench serve's --max-concurrency)
    # open loop: requests per second, Poisson arrivals seeded with `seed` (math.inf: all at once); one row
    # per rate beside the closed-loop ones, every request of the workload allowed in flight
    request_rate: tuple[float, ...] = ()
    k: tuple[int, ...] = ()  # empty: the preset's k
    temperature: tuple[float, ...] = (0.0,)
    acceptance: tuple[float, ...] = ()  # synthetic presets only; empty: the preset's own
    max_tokens: int | None = None  # None: the preset's default
    seed: int = 0
    dataset: str | None = None  # a shipped dataset's name or a file (bench.datasets): a workload per category
    dataset_name: str | None = None  # its format, vllm bench serve's --dataset-name (None: from the extension)
    speed_bench_subsets: tuple[str, ...] = ()  # SPEED-Bench's subsets to read (empty: every one the folder holds)
    context_lengths: tuple[int, ...] = ()  # prompt lengths in target tokens: a workload per bucket (bench.context)
    goodput: tuple[str, ...] = ()  # vllm bench serve's --goodput SLOs, "ttft:500" (ms): request_goodput
    # each cell (workload, temperature, loop, k) measured this many times, baseline and speculative alike, so
    # the advice compares measured low ends (bench.schedule.low_end); the CLI's default is vLLM's sweep's 3
    num_runs: int = 1


def check(settings: BenchSettings, preset: Preset) -> None:
    def bad(what: str, expected: str, got) -> None:
        raise BenchError(f"{what}: expected {expected}, got {got!r}")

    if not 1 <= settings.n <= 1000:
        bad("n", "1 to 1000 prompts per workload", settings.n)
    if not 1 <= settings.num_runs <= MAX_RUNS:
        bad("num runs", f"1 to {MAX_RUNS} measurements of each setting", settings.num_runs)
    for c in settings.concurrency or bad("concurrency", "at least one value", ()):
        if not 1 <= c <= 512:
            bad("concurrency", "requests in flight from 1 to 512", c)
    for r in settings.request_rate:
        if not r > 0:
            bad("request rate", "requests per second above 0, or inf", r)
    limits = preset.speculative_config.limits  # the schema's, one place
    for k in settings.k:
        if not limits.allows_k(k):
            bad("k", f"num_speculative_tokens from {limits.k_min} to {limits.k_max}", k)
    for t in settings.temperature or bad("temperature", "at least one value", ()):
        if not 0 <= t <= 2:
            bad("temperature", "0 to 2", t)
    if settings.acceptance and not preset.speculative_config.synthetic:
        raise BenchError(f"acceptance: {preset.name} measures real acceptance; --acceptance applies to presets "
                         "with rejection_sample_method: synthetic (the dummy-* presets)")
    for a in settings.acceptance:
        if not 0 <= a <= 1:
            bad("acceptance", "a probability from 0 to 1", a)
    try:
        parse_goodput(settings.goodput)
    except ValueError as exc:
        raise BenchError(str(exc)) from None
    limit = preset.target.max_model_len // 2
    if settings.max_tokens is not None and not 1 <= settings.max_tokens <= limit:
        bad("max tokens", f"1 to half of max_model_len ({limit})", settings.max_tokens)
    try:  # before any prompt is cut: 10^5 lengths, or 1,000 prompts of 10^6 tokens, would be built first
        context.check_lengths(settings.context_lengths, settings.max_tokens or preset.default_max_tokens,
                              preset.target.max_model_len, settings.n)
    except WorkloadError as exc:
        raise BenchError(str(exc)) from None
