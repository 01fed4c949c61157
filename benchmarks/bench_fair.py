"""Is the page's speedup fair on 2 cores? The same page and engine pair, run under several core layouts,
switched between runs by re-pinning the processes (so every layout sees the same engines, prompts and
machine load, interleaved):

  split          baseline's worker on core 0, speculative's on core 1, the app and both engines'
                 schedulers (engine-core processes) free to run anywhere (the layout before the fix)
  split-swapped  the same with the workers' cores swapped
  host0          the app and both schedulers on core 0, both workers on core 1 (the fix: one engine runs
                 at a time in the sequential schedule, each with a core free of the app)
  host1          the same with the cores swapped

For each prompt, round and layout it runs the app's /run (sequential schedule, every update rendered and
streamed as for a browser) and pair.stream(schedule="sequential") with nothing rendering (the in-process
reference), order rotated. Goal: the page's speedup within 5% of the reference, whatever the layout.

    python benchmarks/bench_fair.py [--prompts examples,code:1] [--rounds 2] [--max-tokens 96]

Writes docs/results/cpu-page-fair-smollm2-ngram.json (or --out) and prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
ALL = (0, 1)
# layout: (app and schedulers, baseline worker, speculative worker)
LAYOUTS = {"split": (ALL, (0,), (1,)), "split-swapped": (ALL, (1,), (0,)),
           "host0": ((0,), (1,), (1,)), "host1": ((1,), (0,), (0,))}
PATHS = ("app", "direct")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default=None)
    p.add_argument("--prompts", default="examples,code:1", help="as benchmarks/bench_prompts.py --prompts")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--max-tokens", type=int, default=96)
    p.add_argument("--layouts", default=",".join(LAYOUTS))
    p.add_argument("--out", default=str(ROOT / "docs" / "results" / "cpu-page-fair-smollm2-ngram.json"))
    return p.parse_args(argv)


def _pin_threads(pid: int, cores, only=None, skip=None) -> None:
    for tid in os.listdir(f"/proc/{pid}/task"):
        tid = int(tid)
        if (only is None or tid == only) and tid != skip:
            try:
                os.sched_setaffinity(tid, cores)
            except OSError:  # a thread that just ended
                pass


def apply_layout(pair, layout: str) -> None:
    """Re-pin at run time what the layout's processes would get at start: every thread of this process and
    of each engine-core process to the host cores; each worker's main thread (its one OpenMP thread) to
    the engine's core, its other threads with the host."""
    import psutil

    host, baseline, speculative = LAYOUTS[layout]
    _pin_threads(os.getpid(), host)
    cores = {"baseline": baseline, "speculative": speculative}
    for role, pids in pair.process_ids().items():
        core = cores[role]
        for pid in pids:
            _pin_threads(pid, host)
            for worker in psutil.Process(pid).children(recursive=True):
                _pin_threads(worker.pid, host if host != ALL else core, skip=worker.pid)
                _pin_threads(worker.pid, core, only=worker.pid)


def _keep(result: dict) -> dict:
    return {"speedup": result["speedup"], "step_cost_ratio": result["step_cost_ratio"],
            "tokens_per_step_ratio": result["tokens_per_step_ratio"],
            **{role: {"tokens_per_s": result[role]["tokens_per_s"], "step_seconds": result[role]["step_seconds"]}
               for role in ("baseline", "speculative")}}


def _median(values):
    values = [v for v in values if v is not None]
    return round(statistics.median(values), 4) if values else None


def summarize(samples: list[dict], layouts: list[str]) -> dict:
    """Per layout and path: median speedup and step-cost ratio; per-sample ratios paired by prompt and round
    against the reference (direct, host0 layout) and against direct in the same layout."""
    out = {}
    for layout in layouts:
        for path in PATHS:
            key = f"{layout}:{path}"
            out[f"{key}:speedup"] = _median(s[key]["speedup"] for s in samples)
            out[f"{key}:step_cost_ratio"] = _median(s[key]["step_cost_ratio"] for s in samples)
            for role in ("baseline", "speculative"):
                out[f"{key}:{role}_tokens_per_s"] = _median(s[key][role]["tokens_per_s"] for s in samples)
            if "host0:direct" in samples[0]:
                out[f"{key}:speedup_vs_reference"] = _median(
                    s[key]["speedup"] / s["host0:direct"]["speedup"] for s in samples)
        out[f"{layout}:app_vs_direct"] = _median(
            s[f"{layout}:app"]["speedup"] / s[f"{layout}:direct"]["speedup"] for s in samples)
    return out


def run_rounds(args, client, pair, prompts, requests, layouts, save) -> list[dict]:
    """Every prompt and round under every layout, the layouts' order rotated; `save(samples)` after each
    prompt, so a run cut short (a loaded machine) keeps what it measured."""
    from bench_page import app_run, direct_run

    samples = []
    for r in range(args.rounds):
        for i, (prompt, request) in enumerate(zip(prompts, requests)):
            shift = (r * len(prompts) + i) % len(layouts)
            sample = {"round": r, "prompt": i}
            for j, layout in enumerate(layouts[shift:] + layouts[:shift]):
                apply_layout(pair, layout)
                time.sleep(0.2)  # the schedulers' spin (1 s after their last read) settles where it now runs
                for path in (PATHS if (i + j + r) % 2 == 0 else PATHS[::-1]):
                    result = (app_run(client, prompt, args.max_tokens, "sequential") if path == "app"
                              else direct_run(pair, request, "sequential"))
                    sample[f"{layout}:{path}"] = _keep(result)
            samples.append(sample)
            save(samples)
            print(f"round {r} prompt {i}: " + ", ".join(
                f"{k} {v['speedup']}× ({v['step_cost_ratio']})" for k, v in sample.items() if ":" in k), flush=True)
    return samples


def main(argv=None) -> int:
    args = parse_args(argv)
    from bench_page import PageLoadError, page_on
    from specplay.core.hardware import detect
    from specplay.presets.catalog import DEFAULT_PRESET, get_preset

    preset, hardware = get_preset(args.preset or DEFAULT_PRESET), detect()
    try:
        with page_on(preset, hardware) as (client, pair):
            return measure(args, preset, hardware, client, pair)
    except PageLoadError as exc:
        print(exc, file=sys.stderr)
        return 1


def measure(args, preset, hardware, client, pair) -> int:
    from bench_page import app_run, direct_run
    from bench_prompts import prompt_list
    from specplay.page.inputs import build_request

    layouts = args.layouts.split(",")
    prompts = [text for _, text in prompt_list(args.prompts)]
    requests = [build_request(preset, p, args.max_tokens, 0.0) for p in prompts]
    app_run(client, prompts[0], args.max_tokens, "sequential")  # first-use costs out of the numbers
    direct_run(pair, requests[0], "sequential")
    load_before, out = os.getloadavg(), Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)

    from specplay.engine.base import engines_json

    def save(samples):
        report = {"preset": preset.name, "hardware": hardware.describe(), "platform": platform.platform(),
                  "max_tokens": args.max_tokens, "rounds": args.rounds, "prompts": args.prompts,
                  "layouts": {k: [list(c) for c in LAYOUTS[k]] for k in layouts},
                  "loadavg_before": load_before, "loadavg_after": os.getloadavg(),
                  "summary": summarize(samples, layouts), "samples": samples,
                  "engines": engines_json(pair.engine_info())}
        out.write_text(json.dumps(report, indent=2) + "\n")

    samples = run_rounds(args, client, pair, prompts, requests, layouts, save)
    print_table(summarize(samples, layouts), layouts)
    print(f"\nwritten to {out}")
    return 0


def print_table(summary: dict, layouts: list[str]) -> None:
    print("\n| layout | path | baseline tok/s | speculative tok/s | step-cost ratio | speedup | ÷ reference |")
    print("|---|---|---|---|---|---|---|")
    for layout in layouts:
        for path in PATHS:
            k = f"{layout}:{path}"
            print(f"| {layout} | {path} | {summary[f'{k}:baseline_tokens_per_s']} | "
                  f"{summary[f'{k}:speculative_tokens_per_s']} | {summary[f'{k}:step_cost_ratio']} | "
                  f"{summary[f'{k}:speedup']} | {summary.get(f'{k}:speedup_vs_reference')} |")


if __name__ == "__main__":  # vLLM spawns engine processes that re-import the main module
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(main())
