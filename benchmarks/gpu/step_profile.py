#!/usr/bin/env python3
"""Where a decode step's time goes, from the traces of vLLM's torch profiler (`spec_probe.py --profile-dir`).

    python3 benchmarks/gpu/step_profile.py PROFILE_DIR [--out summary.json]

PROFILE_DIR holds one folder per probe config (spec_probe.py writes PROFILE_DIR/NAME/), each with the
worker's trace (*.json.gz). Decode steps are split at vLLM's per-step annotation
(`execute_context_0(0)_generation_G(g)`: no prefill in the step); per step, medians of: the period (one
step's start to the next's), the GPU's kernel time in it (the union of kernel intervals) and its idle rest,
and what the host launched: CUDA-graph launches, eager kernel launches, attention calls (FlashAttention's
op) with their CPU time. A busy GPU means the work itself costs the time; an idle one that the host
(Python, launches, metadata) does.
Does not import vLLM or torch.
"""
from __future__ import annotations

import argparse
import bisect
import gzip
import json
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

GRAPH_LAUNCHES = ("cudaGraphLaunch", "cuGraphLaunch")
KERNEL_LAUNCHES = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx",
                   "cudaLaunchCooperativeKernel")
STEP = re.compile(r"execute_context_(\d+)\((\d+)\)_generation_(\d+)\((\d+)\)")  # vLLM's per-step annotation


def load(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return json.load(f).get("traceEvents", [])


def union_us(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def decode_steps(events: list[dict]) -> list[dict]:
    """vLLM's per-step annotations (`execute_context_C(c)_generation_G(g)`) of steps with no prefill."""
    steps = []
    for ev in events:
        m = STEP.fullmatch(ev.get("name", "")) if ev.get("ph") == "X" else None
        if m and ev.get("cat") == "user_annotation" and m.group(1) == "0" and int(m.group(3)) > 0:
            steps.append(ev)
    return sorted(steps, key=lambda e: e["ts"])


def summarize(events: list[dict]) -> dict:
    """Per decode step (from one step's start to the next's): the period, GPU kernel time (the union of
    kernel intervals), the GPU's idle rest, and what the host launched in it."""
    steps = decode_steps(events)
    if len(steps) < 3:
        return {"error": f"{len(steps)} decode steps in the trace"}
    bounds = [e["ts"] for e in steps]
    kernels = sorted((e["ts"], e["ts"] + e.get("dur", 0)) for e in events if e.get("cat") == "kernel")
    host = defaultdict(list)  # what: [(ts, dur)]
    for e in events:
        name, cat = e.get("name", ""), e.get("cat", "")
        if cat in ("cuda_runtime", "cuda_driver") and name in GRAPH_LAUNCHES:
            host["graph_launches"].append((e["ts"], e.get("dur", 0)))
        elif cat in ("cuda_runtime", "cuda_driver") and name in KERNEL_LAUNCHES:
            host["kernel_launches"].append((e["ts"], e.get("dur", 0)))
        elif cat == "cpu_op" and ("fa3_C::fwd" in name or "flash_attn" in name):
            host["attention_calls"].append((e["ts"], e.get("dur", 0)))
    rows = []
    for a, b in zip(bounds, bounds[1:]):
        lo, hi = bisect.bisect_left(kernels, (a,)), bisect.bisect_left(kernels, (b,))
        busy = union_us([(max(x, a), min(y, b)) for x, y in kernels[lo:hi]])
        row = {"period_ms": (b - a) / 1e3, "gpu_busy_ms": busy / 1e3, "kernels": hi - lo}
        for what, calls in host.items():
            inside = [d for ts, d in calls if a <= ts < b]
            row[what] = len(inside)
            row[f"{what}_cpu_ms"] = sum(inside) / 1e3
        rows.append(row)
    med = {k: round(statistics.median(r.get(k, 0) for r in rows), 3) for k in rows[0]}
    med["gpu_idle_ms"] = round(med["period_ms"] - med["gpu_busy_ms"], 3)
    med["gpu_busy_fraction"] = round(med["gpu_busy_ms"] / med["period_ms"], 3)
    g = STEP.fullmatch(steps[0]["name"])
    return {"decode_steps": len(steps), "tokens_per_request_step": int(g.group(4)) // max(1, int(g.group(3))),
            "per_step_median": med, "step_annotation_cpu_ms": round(statistics.median(e["dur"] for e in steps) / 1e3, 3)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("profile_dir")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    out = {}
    for folder in sorted(p for p in Path(args.profile_dir).iterdir() if p.is_dir()):
        traces = sorted(folder.rglob("*.json.gz")) + sorted(folder.rglob("*.json"))
        traces = [t for t in traces if "trace" in t.name or t.suffix in (".gz", ".json")]
        if not traces:
            out[folder.name] = {"error": "no trace"}
            continue
        biggest = max(traces, key=lambda t: t.stat().st_size)  # the worker's (the front end's is small)
        out[folder.name] = {"trace": biggest.name, **summarize(load(biggest))}
        print(f"{folder.name}: {json.dumps(out[folder.name].get('per_step_median', out[folder.name]))}", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
