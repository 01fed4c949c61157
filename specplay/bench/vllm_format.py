"""The bench's serving figures in `vllm bench serve --save-result`'s JSON keys and units (vllm/benchmarks/
serve.py: milliseconds for latencies, `mean_/median_/std_/pNN_<metric>_ms`, `output_throughput` in tokens/s,
`spec_decode_acceptance_rate` in percent), so vLLM's own tools read our files: `summary.json` holds one
such result per row and engine, as `vllm bench sweep serve` writes them, with the sweep's variables beside
(role, workload, temperature, num_speculative_tokens, ...), which `vllm bench sweep plot DIR` plots:

    vllm bench sweep plot RESULTS/vllm --var-x max_concurrency --var-y median_ttft_ms --curve-by role

(its defaults, --var-x total_token_throughput --var-y median_ttft_ms, are keys of every result). The per-request
lists are those of `--save-detailed` (input_lens, output_lens, ttfts, itls, latencies, start_times,
generated_texts, errors); `--goodput` SLOs (ms) give request_goodput, None without, as vLLM writes it.

Pure arithmetic on traces and counters (no engines, no vLLM import)."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

from specplay.bench.latency import request_samples
from specplay.core.events import BASELINE, SPECULATIVE
from specplay.core.stats import LINEAR, percentile

PERCENTILES = (50, 90, 99)  # the printed `vllm bench serve` lines' --metric-percentiles
# vllm bench serve's metric name for each of the bench's samples (bench.latency calls e2el "latency")
METRICS = {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2el": "latency"}
SUMMARY_DIR, SUMMARY = "vllm", "summary.json"


GOODPUT_METRICS = ("ttft", "tpot", "e2el")  # what vllm bench serve's --goodput takes (its VALID_NAMES), in ms


def parse_goodput(pairs) -> dict[str, float]:
    """vllm bench serve's `--goodput ttft:500 tpot:50 e2el:2000`: per metric, the SLO in milliseconds (a
    request is good when it meets every one given); ValueError naming the pair that isn't one."""
    slos: dict[str, float] = {}
    for pair in pairs or ():
        name, _, value = str(pair).partition(":")
        try:
            ms = float(value)
        except ValueError:
            ms = None
        if name not in GOODPUT_METRICS or ms is None or not ms >= 0:
            raise ValueError(f"goodput: expected KEY:MS with KEY one of {', '.join(GOODPUT_METRICS)} and MS a "
                             f"number of milliseconds >= 0 (vllm bench serve's --goodput), got {pair!r}")
        slos[name] = ms
    return slos


def _requests(traces) -> list[dict]:
    """Per request, as vllm bench serve's RequestFuncOutput has it (seconds): success, ttft, itl (the gaps
    between chunks), latency (e2e), tpot ((e2e - ttft) / (tokens - 1), 0 for one token), start time."""
    out = []
    for t in traces:
        ok = bool(t.step_times) and t.submitted_at is not None
        tokens = len(t.token_ids) if ok else 0
        ttft = t.step_times[0] - t.submitted_at if ok else 0.0
        latency = t.step_times[-1] - t.submitted_at if ok else 0.0
        out.append({"ok": ok, "tokens": tokens, "input": t.prompt_tokens, "ttft": ttft, "latency": latency,
                    "itl": [b - a for a, b in zip(t.step_times, t.step_times[1:])] if ok else [],
                    "tpot": (latency - ttft) / (tokens - 1) if tokens > 1 else 0.0, "start": t.submitted_at,
                    "times": list(t.step_times), "sizes": list(t.step_sizes), "text": t.text})
    return out


def _peaks(requests: list[dict]) -> dict:
    """vllm bench serve's max_output_tokens_per_s and max_concurrent_requests: one-second buckets from the
    first request's start (tokens counted where they arrived; vLLM counts a chunk as one, we count its tokens)."""
    done = [r for r in requests if r["ok"]]
    if not done:
        return {"max_output_tokens_per_s": 0.0, "max_concurrent_requests": 0}
    first = min(r["start"] for r in done)
    buckets = int(math.ceil(max(r["start"] + r["latency"] for r in done) - first)) + 1
    tokens, active = [0] * buckets, [0] * buckets
    for r in done:
        for at, size in zip(r["times"], r["sizes"]):
            tokens[min(int(at - first), buckets - 1)] += size
        for second in range(int(r["start"] - first), int(r["start"] + r["latency"] - first) + 1):
            active[second] += 1
    return {"max_output_tokens_per_s": float(max(tokens)), "max_concurrent_requests": max(active)}


def _good(requests: list[dict], slos: dict[str, float]) -> int:
    """Completed requests meeting every SLO (vLLM's rule: metric <= SLO, tpot 0 for a one-token answer)."""
    field = {"ttft": "ttft", "tpot": "tpot", "e2el": "latency"}
    return sum(1 for r in requests if r["ok"] and all(r[field[m]] * 1000 <= ms for m, ms in slos.items()))


def serving_figures(batch, goodput: dict[str, float] | None = None) -> dict:
    """One engine's batch as `vllm bench serve --save-result --save-detailed` writes a run: request counts,
    token totals, throughputs (request_goodput with `goodput` SLOs, else None as vLLM), each latency metric's
    mean, median, std and percentiles in ms, and the per-request lists (input_lens, ttfts, itls, ...)."""
    samples, requests = request_samples(batch.traces), _requests(batch.traces)
    completed = sum(r["ok"] for r in requests)
    output = sum(r["tokens"] for r in requests)
    inputs = [r["input"] for r in requests]
    total_input = sum(inputs) if None not in inputs else None  # unknown where a trace doesn't carry it
    wall = batch.wall_seconds
    per_s = lambda n: n / wall if n is not None and wall > 0 else None  # noqa: E731
    out = {"duration": wall, "completed": completed, "failed": len(requests) - completed,
           "total_input_tokens": total_input, "total_output_tokens": output,
           "request_throughput": per_s(completed),
           "request_goodput": per_s(_good(requests, goodput)) if goodput else None,
           "output_throughput": per_s(output),
           "total_token_throughput": per_s(total_input + output if total_input is not None else None),
           **_peaks(requests)}
    for name, ours in METRICS.items():
        values = samples[ours]
        ms = lambda v: None if v is None else v * 1000  # noqa: E731
        out[f"mean_{name}_ms"] = ms(statistics.fmean(values)) if values else None
        out[f"median_{name}_ms"] = ms(statistics.median(values)) if values else None
        out[f"std_{name}_ms"] = ms(statistics.pstdev(values)) if values else None  # numpy's std: population
        for p in PERCENTILES:
            out[f"p{p}_{name}_ms"] = ms(percentile(values, p / 100, LINEAR))
    out = {k: round(v, 6) if isinstance(v, float) else v for k, v in out.items()}
    out.update({  # --save-detailed's per-request lists, in vLLM's units (seconds), one entry per request
        "input_lens": inputs, "output_lens": [r["tokens"] for r in requests],
        "ttfts": [round(r["ttft"], 6) for r in requests], "itls": [[round(g, 6) for g in r["itl"]] for r in requests],
        "latencies": [round(r["latency"], 6) for r in requests],
        "start_times": [round(r["start"], 6) if r["start"] is not None else None for r in requests],
        "generated_texts": [r["text"] for r in requests],
        "errors": ["" if r["ok"] else "no token streamed (aborted or failed)" for r in requests]})
    return out


def spec_decode_figures(counters) -> dict:
    """The speculative engine's counters as vllm bench serve reports them (acceptance rate in percent)."""
    if not counters.num_draft_tokens:
        return {}
    drafts = counters.num_drafts
    return {
        "spec_decode_acceptance_rate": round(counters.num_accepted_tokens / counters.num_draft_tokens * 100, 4),
        "spec_decode_acceptance_length": round(1 + counters.num_accepted_tokens / drafts, 4) if drafts else 0.0,
        "spec_decode_num_drafts": drafts,
        "spec_decode_draft_tokens": counters.num_draft_tokens,
        "spec_decode_accepted_tokens": counters.num_accepted_tokens,
        "spec_decode_per_position_acceptance_rates": [round(n / drafts, 4) if drafts else 0.0
                                                      for n in counters.accepted_per_position],
    }


def serving(baseline, speculative, goodput: dict[str, float] | None = None) -> dict[str, dict]:
    """A row's `serving`: {role: vllm bench serve's figures}, the speculative one with its spec_decode_*."""
    return {BASELINE: serving_figures(baseline, goodput),
            SPECULATIVE: {**serving_figures(speculative, goodput), **spec_decode_figures(speculative.counters)}}


def sweep_results(report) -> list[dict]:
    """One `vllm bench serve` result per row and engine, as `vllm bench sweep serve` collects them in a
    summary.json: the run's setup keys (backend, model_id, num_prompts, request_rate, burstiness,
    max_concurrency), its figures, and the swept variables beside them."""
    out = []
    for row in report.rows:
        open_loop = row.request_rate is not None
        for role, figures in row.serving.items():
            out.append({
                "date": _date(report.started_utc), "endpoint_type": "vllm", "backend": "vllm",
                "label": f"{report.preset} {role}", "model_id": report.model, "tokenizer_id": report.model,
                "num_prompts": row.requests,
                "request_rate": row.request_rate if open_loop else "inf", "burstiness": 1.0,
                "max_concurrency": None if open_loop else row.concurrency, **figures,
                # the sweep's variables (vllm bench sweep adds its overrides to each result the same way)
                "role": role, "preset": report.preset, "workload": row.workload, "temperature": row.temperature,
                "num_speculative_tokens": row.k, "acceptance": row.acceptance, "speedup": row.speedup,
            })
    return out


def _date(utc: str | None) -> str:
    """vllm bench serve's `date` ("%Y%m%d-%H%M%S") from the report's ISO stamp ("" when unknown)."""
    digits = "".join(ch for ch in (utc or "") if ch.isdigit())
    return f"{digits[:8]}-{digits[8:14]}" if len(digits) >= 14 else ""


def write_summary(out_dir: Path, report) -> Path | None:
    """`<out_dir>/vllm/summary.json` (what `vllm bench sweep plot` globs for); None when no row has figures."""
    results = sweep_results(report)
    if not results:
        return None
    path = Path(out_dir) / SUMMARY_DIR / SUMMARY
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1, allow_nan=False) + "\n")
    return path
