"""Benchmark presets side by side in one run: what `python -m specplay compare --json` reports, plus the
same engines driven directly (a bare AsyncLLM.generate loop, no pair thread or queue), plus load time and
memory per engine. Presets sharing a target reuse the resident baseline engine.

  python benchmarks/bench_presets.py --presets smollm2-ngram --out docs/results/cpu.json
  python benchmarks/bench_presets.py --presets dummy-llama8b-draft1b-k3,dummy-llama8b-eagle-k3 --out docs/results/h200.json

Timings use the sequential schedule (baseline, then speculative), so neither engine slows the other;
each figure is the median over --repeats runs after one discarded warm run.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

BENCH_PROMPTS = {
    "code": "Write a Python function that parses an ISO 8601 date string and returns a datetime, with a docstring and three doctests.",
    "rewrite": (
        "Rewrite the following paragraph in formal English, keeping every fact:\n"
        "so basically the new build system is way faster, it caches everything it compiled before and only "
        "rebuilds the files you touched, which means a clean build takes ten minutes but after that most "
        "builds take under thirty seconds. also it runs the tests in parallel now, so the test suite that "
        "used to take an hour takes fifteen minutes on an eight core machine."
    ),
}


def memory_by_engine(pair) -> dict:
    """GPU memory (NVML, per engine process) and resident memory, in GiB, via the page's telemetry."""
    from specplay.engine.telemetry import NvmlReader, rss_bytes

    pids = pair.process_ids()
    out = {f"{role}_rss_gib": round(rss_bytes(p) / 2**30, 2) for role, p in pids.items()}
    try:
        reader = NvmlReader()
        used = reader.read(pids)
        if reader.per_process:
            out.update({f"{role}_gpu_gib": round(b / 2**30, 2) for role, b in used.items()})
        reader.close()
    except Exception:  # no NVML: a CPU machine
        pass
    return out


def device_used_gib() -> float | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        return round(sum(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(i)).used
                         for i in range(pynvml.nvmlDeviceGetCount())) / 2**30, 2)
    except Exception:
        return None


def direct_tokens_per_s(pair, role: str, ids: list[int], request) -> tuple[float | None, float | None]:
    """Drive one engine with nothing of the playground between: timestamps taken in the generate loop.
    Returns (tokens/s, steps/s), by the same definitions as the comparison's (EngineTrace)."""
    from specplay.run.comparison import EngineTrace

    engine = pair.engines[role]

    async def run():
        trace = EngineTrace(role)
        async for chunk in engine.stream(f"direct-{time.monotonic_ns()}", ids, request):
            token_ids = chunk.token_ids
            if token_ids:
                trace.token_ids.extend(token_ids)
                trace.step_sizes.append(len(token_ids))
                trace.step_times.append(time.monotonic())
        if trace.decode_seconds <= 0:
            return None, None
        # steps/s doesn't depend on how many drafts a step happened to accept (random under synthetic
        # acceptance), so it compares the two paths' overhead directly
        return trace.tokens_per_s, (len(trace.step_times) - 1) / trace.decode_seconds

    return pair._call(run())


def bench_preset(pair, preset, prompts: list[str], max_tokens: int, repeats: int) -> list[dict]:
    from specplay.run import stream
    from specplay.run.result import RunResult
    from specplay.core.events import BASELINE, SPECULATIVE, GenerationRequest, Schedule

    rows = []
    cases = {"token ids": None} if preset.prompt_input == "token_ids" else {p: BENCH_PROMPTS[p] for p in prompts}
    for prompt_name, text in cases.items():
        request = GenerationRequest(
            prompt=text or "", prompt_token_ids=tuple(range(1000, 1032)) if text is None else None,
            max_tokens=max_tokens, ignore_eos=preset.ignore_eos)  # text: natural stops (after EOS a
        # small model repeats itself, which would flatter n-gram lookup)
        ids = pair.prompt_token_ids(request)
        runs, direct, steps = [], {BASELINE: [], SPECULATIVE: []}, {BASELINE: [], SPECULATIVE: []}
        for i in range(repeats + 1):
            c = stream.compare(pair, request, Schedule.SEQUENTIAL)
            for role in direct:
                direct[role].append(direct_tokens_per_s(pair, role, ids, request))
            for role in steps:  # exact step counts (steps_source), not chunks
                steps[role].append(c.traces[role].decode_steps / c.traces[role].decode_seconds)
            if i:  # the first run is a warm-up
                runs.append(RunResult.of(c).model_dump(mode="json"))
        med = lambda xs: round(statistics.median(x for x in xs if x is not None), 2)  # noqa: E731
        b_tps = med(r[BASELINE]["tokens_per_s"] for r in runs)
        s_tps = med(r[SPECULATIVE]["tokens_per_s"] for r in runs)
        last = runs[-1][SPECULATIVE]
        mal = med(r[SPECULATIVE]["mean_acceptance_length"] or 1 for r in runs)
        rows.append({
            "preset": preset.name, "method": preset.method, "k": preset.num_speculative_tokens,
            "prompt": prompt_name, "output_tokens": len(last["token_ids"]),
            "identical": all(r["identical"] for r in runs),
            "baseline_tokens_per_s": b_tps, "speculative_tokens_per_s": s_tps,
            "speedup": round(s_tps / b_tps, 3),
            "baseline_direct_tokens_per_s": med(d[0] for d in direct[BASELINE][1:]),
            "speculative_direct_tokens_per_s": med(d[0] for d in direct[SPECULATIVE][1:]),
            "baseline_steps_per_s": med(steps[BASELINE][1:]), "speculative_steps_per_s": med(steps[SPECULATIVE][1:]),
            "baseline_direct_steps_per_s": med(d[1] for d in direct[BASELINE][1:]),
            "speculative_direct_steps_per_s": med(d[1] for d in direct[SPECULATIVE][1:]),
            "acceptance_rate": med(r[SPECULATIVE]["acceptance_rate"] or 0 for r in runs),
            "mean_acceptance_length": mal,
            "speedup_per_acceptance_length": round(s_tps / b_tps / mal, 3),  # "efficiency" before
            "ttft_s": {BASELINE: med(r[BASELINE]["ttft_s"] for r in runs), SPECULATIVE: med(r[SPECULATIVE]["ttft_s"] for r in runs)},
            "load_seconds": dict(pair.status.load_seconds or {}),
            "memory": memory_by_engine(pair),
            "runs": repeats,
        })
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> int:
    import os

    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    from specplay.run.pairs import open_pair
    from specplay.core.hardware import detect
    from specplay.presets.catalog import engine_settings, get_preset

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--presets", required=True)
    ap.add_argument("--prompts", default="code,rewrite")
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    hardware = detect()
    results = {"machine": hardware.describe(), "python": platform.python_version(), "command": " ".join(sys.argv),
               "started": time.strftime("%Y-%m-%d %H:%M:%S"), "rows": [], "device_used_gib": {}}
    try:
        import vllm  # noqa: F401  (only to record the version)
        results["vllm"] = vllm.__version__
    except Exception:
        pass
    pair, pair_baseline = None, None
    try:
        for name in args.presets.split(","):
            preset = get_preset(name)
            baseline, speculative = engine_settings(preset, hardware)
            if pair is not None and pair_baseline == baseline:
                before = device_used_gib()
                pair.swap_speculative(speculative, tag=preset)
            else:
                if pair is not None:
                    pair.shutdown()
                before = device_used_gib()
                pair = open_pair(preset, hardware)
                pair.start()
                pair_baseline = baseline
            results["device_used_gib"][name] = {"before_start": before, "after_start": device_used_gib()}
            results["rows"] += bench_preset(pair, preset, args.prompts.split(","), args.max_tokens, args.repeats)
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text(json.dumps(results, indent=1) + "\n")  # partial results survive a crash
    finally:
        if pair is not None:
            pair.shutdown()
    print(markdown_table(results["rows"]))
    return 0


def markdown_table(rows: list[dict]) -> str:
    head = ("| preset | prompt | baseline tok/s (direct) | speculative tok/s (direct) | speedup | acceptance | "
            "mean acc. length | speedup ÷ MAL | load s (b / s) | memory GiB (b / s) | identical |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|")
    lines = [head]
    for r in rows:
        m = r["memory"]
        mem = (f"{m.get('baseline_gpu_gib')} / {m.get('speculative_gpu_gib')} GPU" if "baseline_gpu_gib" in m
               else f"{m.get('baseline_rss_gib')} / {m.get('speculative_rss_gib')} RSS")
        load = r["load_seconds"]
        lines.append(
            f"| {r['preset']} | {r['prompt']} | {r['baseline_tokens_per_s']} ({r['baseline_direct_tokens_per_s']}) | "
            f"{r['speculative_tokens_per_s']} ({r['speculative_direct_tokens_per_s']}) | {r['speedup']}× | "
            f"{r['acceptance_rate']:.1%} | {r['mean_acceptance_length']} | {r['speedup_per_acceptance_length']} | "
            f"{load.get('baseline')} / {load.get('speculative')} | {mem} | {r['identical']} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
