"""What `vllm bench serve` reports, measured on the bench's own batches: per engine TTFT, TPOT, ITL and
end-to-end latency at p50 / p90 / p99; Poisson arrivals for the open-loop request-rate sweep; the rate at
which speculation stops paying; and the `vllm bench serve` command that measures a workload file the same
way on two running servers. Pure arithmetic on traces and rows (no engines)."""

from __future__ import annotations

import math
import random
import shlex

from specplay.core.stats import LINEAR, percentile

QUANTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99}
# figure stem -> what it is, as vllm bench serve names it (--percentile-metrics ttft,tpot,itl,e2el)
METRICS = ("ttft", "tpot", "itl", "latency")  # "latency": end to end (vLLM's e2el), as the bench always named it
INF = "inf"  # a request rate of infinity: every request at once (vllm bench serve's default)


def request_samples(traces) -> dict[str, list[float]]:
    """Per metric, the samples of a batch: TTFT, TPOT = (e2e − TTFT) / (tokens − 1) and e2e per request;
    ITL every gap between two chunks of a request (a speculative chunk carries several tokens)."""
    out: dict[str, list[float]] = {m: [] for m in METRICS}
    for t in traces:
        if not t.step_times or t.submitted_at is None:
            continue
        out["ttft"].append(t.step_times[0] - t.submitted_at)
        out["latency"].append(t.step_times[-1] - t.submitted_at)
        tokens = sum(t.step_sizes)
        if tokens > 1:
            out["tpot"].append((t.step_times[-1] - t.step_times[0]) / (tokens - 1))
        out["itl"].extend(b - a for a, b in zip(t.step_times, t.step_times[1:]))
    return out


def latency_figures(traces) -> dict[str, float | None]:
    """{"ttft_p50_s", ..., "latency_p99_s"}: every metric at every quantile (interpolated: a batch has few
    requests, so p90 of 4 isn't simply the slowest)."""
    samples = request_samples(traces)
    return {f"{m}_{q}_s": percentile(samples[m], v, LINEAR) for m in METRICS for q, v in QUANTILES.items()}


def parse_rate(text: str) -> float:
    """A request rate in requests/s: a positive number, or `inf` (all at once)."""
    rate = float(text)
    if not rate > 0:
        raise ValueError(f"a request rate must be above 0 (or inf), not {text}")
    return rate


def rate_value(rate) -> float | None:
    """A row's request_rate as a number (rows store infinity as "inf", which JSON can hold)."""
    return None if rate is None else math.inf if rate == INF else float(rate)


def rate_label(rate) -> str:
    rate = rate_value(rate)
    return "closed loop" if rate is None else "all at once" if math.isinf(rate) else f"{rate:g} req/s"


def poisson_arrivals(n: int, rate: float, seed: int = 0) -> list[float]:
    """Arrival times (s after the start) of n requests at `rate` per second, exponential gaps drawn from a
    seeded generator (vllm bench serve's --request-rate with --burstiness 1); infinity: all at 0."""
    if math.isinf(rate):
        return [0.0] * n
    rng, now, out = random.Random(seed), 0.0, []
    for _ in range(n):
        out.append(now)
        now += rng.expovariate(rate)
    return out


def rate_sentences(rows: list) -> list:
    """Per (workload, temperature, k, acceptance) of the open-loop rows (BenchRow): up to which request rate
    the speculative engine was faster, and from which it wasn't (RateAdvice)."""
    from specplay.bench.report import RateAdvice

    groups: dict[tuple, list] = {}
    for row in rows:
        if row.request_rate is not None:
            groups.setdefault((row.workload, row.temperature, row.k, row.acceptance), []).append(row)
    out = []
    for (workload, temperature, k, acceptance), group in groups.items():
        group.sort(key=lambda r: rate_value(r.request_rate))
        timed = [r for r in group if r.speedup is not None]
        losing = next((r for r in timed if r.speedup < 1), None)
        out.append(RateAdvice(workload=workload, temperature=temperature, k=k, acceptance=acceptance,
                              stops_paying_at=None if losing is None else losing.request_rate,
                              sentence=_rate_sentence(timed, losing)))
    return out


def _rate_sentence(timed: list, losing) -> str:
    def at(row) -> str:
        return f"{rate_label(row.request_rate)} ({row.speedup:.2f}×)"

    if not timed:
        return "no request rate was timed"
    if losing is None:
        return f"speculation paid at every rate measured, up to {at(timed[-1])}"
    loss_rate = rate_value(losing.request_rate)
    paying = [r for r in timed if rate_value(r.request_rate) < loss_rate]
    if paying:
        sentence = (f"speculation pays up to {at(paying[-1])} and stops paying at {at(losing)}: "
                    "a fuller batch leaves less idle compute for the drafts")
    else:
        sentence = f"speculation lost at the lowest rate measured ({losing.speedup:.2f}× at {rate_label(losing.request_rate)})"
    # A sweep is not always monotonic (bursts of prefill favour the engine that makes more tokens a step).
    again = [r for r in timed if rate_value(r.request_rate) > loss_rate and r.speedup >= 1]
    if again:
        sentence += (f"; faster again at {', '.join(at(r) for r in again)}: the gain does not fall steadily "
                     "with the rate here, so repeat the sweep before reading a crossover from it")
    return sentence


def vllm_bench_command(dataset: list[str], settings: dict, model: str, port: int, rate=None,
                       concurrency: int | None = None, tokenizer: str | None = None) -> str:
    """The `vllm bench serve` line that sends a workload to a running server as the bench did; `dataset`: its
    --dataset-name flags (bench.vllm_datasets); `tokenizer`: a local folder where the served name is a hub
    id this machine may not have (an offline model)."""
    parts = ["vllm", "bench", "serve", "--backend", "vllm", "--base-url", f"http://127.0.0.1:{port}",
             "--model", model, *(["--tokenizer", str(tokenizer)] if tokenizer else []), *dataset, "--disable-shuffle",
             "--num-prompts", str(settings.get("n")),
             "--temperature", f"{(settings.get('temperature') or [0])[0]:g}", "--seed", str(settings.get("seed", 0)),
             "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99"]
    if rate is not None:
        parts += ["--request-rate", INF if math.isinf(rate_value(rate)) else f"{rate_value(rate):g}"]
    if concurrency is not None:
        parts += ["--max-concurrency", str(concurrency)]
    if settings.get("goodput"):  # the SLOs as vLLM takes them: request_goodput in its result
        parts += ["--goodput", *settings["goodput"]]
    return " ".join(shlex.quote(p) for p in parts)


def vllm_bench_commands(preset, settings, max_tokens: int, workloads, generated=()) -> dict[str, dict[str, str]]:
    """Per workload, the `vllm bench serve` line for each engine's server (the serve lines' ports): the first
    concurrency as --max-concurrency, or the first request rate as --request-rate. `workloads`: names or files
    (vLLM's custom dataset); `generated`: the run's dataset categories and context buckets, by workload name
    (bench.vllm_datasets)."""
    import dataclasses

    from specplay.bench.vllm_datasets import workload_flags
    from specplay.core.events import BASELINE, SPECULATIVE
    from specplay.presets.engines import BASELINE_PORT, SPECULATIVE_PORT, serve_model
    from specplay.presets.models import resolve_model

    values = {**dataclasses.asdict(settings), "max_tokens": max_tokens}
    rate = settings.request_rate[0] if settings.request_rate else None
    concurrency = None if rate is not None else settings.concurrency[0]
    model, local = serve_model(preset.target.model), resolve_model(preset.target.model)
    return {name: {role: vllm_bench_command(flags, values, model, port, rate, concurrency,
                                            tokenizer=local if local != model else None)
                   for role, port in ((BASELINE, BASELINE_PORT), (SPECULATIVE, SPECULATIVE_PORT))}
            for name, flags in workload_flags(settings, max_tokens, workloads, generated).items()}
