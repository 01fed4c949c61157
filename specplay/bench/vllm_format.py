"""The bench's serving figures in `vllm bench serve --save-result`'s JSON keys and units (vllm/benchmarks/
serve.py: milliseconds for latencies, `mean_/median_/std_/pNN_<metric>_ms`, `output_throughput` in tokens/s,
`spec_decode_acceptance_rate` in percent), so vLLM's own tools read our files: `summary.json` holds one
such result per row and engine, as `vllm bench sweep serve` writes them, with the sweep's variables beside
(role, workload, temperature, num_speculative_tokens, ...), which `vllm bench sweep plot DIR` plots:

    vllm bench sweep plot RESULTS/vllm --var-x max_concurrency --var-y median_ttft_ms --curve-by role

Pure arithmetic on traces and counters (no engines, no vLLM import)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from specplay.bench.latency import request_samples
from specplay.core.events import BASELINE, SPECULATIVE
from specplay.core.stats import LINEAR, percentile

PERCENTILES = (50, 90, 99)  # the printed `vllm bench serve` lines' --metric-percentiles
# vllm bench serve's metric name for each of the bench's samples (bench.latency calls e2el "latency")
METRICS = {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2el": "latency"}
SUMMARY_DIR, SUMMARY = "vllm", "summary.json"


def serving_figures(batch) -> dict:
    """One engine's batch as `vllm bench serve` reports a run: request counts, throughputs, and each latency
    metric's mean, median, std and percentiles in ms."""
    samples = request_samples(batch.traces)
    completed = sum(1 for t in batch.traces if t.step_times)
    tokens = sum(len(t.token_ids) for t in batch.traces)
    wall = batch.wall_seconds
    out = {"duration": wall, "completed": completed, "failed": len(batch.traces) - completed,
           "total_output_tokens": tokens,
           "request_throughput": completed / wall if wall > 0 else None,
           "output_throughput": tokens / wall if wall > 0 else None}
    for name, ours in METRICS.items():
        values = samples[ours]
        ms = lambda v: None if v is None else v * 1000  # noqa: E731
        out[f"mean_{name}_ms"] = ms(statistics.fmean(values)) if values else None
        out[f"median_{name}_ms"] = ms(statistics.median(values)) if values else None
        out[f"std_{name}_ms"] = ms(statistics.pstdev(values)) if values else None  # numpy's std: population
        for p in PERCENTILES:
            out[f"p{p}_{name}_ms"] = ms(percentile(values, p / 100, LINEAR))
    return {k: round(v, 6) if isinstance(v, float) else v for k, v in out.items()}


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


def serving(baseline, speculative) -> dict[str, dict]:
    """A row's `serving`: {role: vllm bench serve's figures}, the speculative one with its spec_decode_*."""
    return {BASELINE: serving_figures(baseline),
            SPECULATIVE: {**serving_figures(speculative), **spec_decode_figures(speculative.counters)}}


def sweep_results(report) -> list[dict]:
    """One `vllm bench serve` result per row and engine, as `vllm bench sweep serve` collects them in a
    summary.json: the run's setup keys (backend, model_id, num_prompts, request_rate, burstiness,
    max_concurrency), its figures, and the swept variables beside them."""
    out = []
    for row in report.rows:
        open_loop = row.request_rate is not None
        for role, figures in row.serving.items():
            out.append({
                "date": (report.started_utc or "").replace("-", "").replace(":", ""), "backend": "vllm",
                "label": f"{report.preset} {role}", "model_id": report.model, "num_prompts": row.requests,
                "request_rate": row.request_rate if open_loop else "inf", "burstiness": 1.0,
                "max_concurrency": None if open_loop else row.concurrency, **figures,
                # the sweep's variables (vllm bench sweep adds its overrides to each result the same way)
                "role": role, "preset": report.preset, "workload": row.workload, "temperature": row.temperature,
                "num_speculative_tokens": row.k, "acceptance": row.acceptance, "speedup": row.speedup,
            })
    return out


def write_summary(out_dir: Path, report) -> Path | None:
    """`<out_dir>/vllm/summary.json` (what `vllm bench sweep plot` globs for); None when no row has figures."""
    results = sweep_results(report)
    if not results:
        return None
    path = Path(out_dir) / SUMMARY_DIR / SUMMARY
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1, allow_nan=False) + "\n")
    return path
