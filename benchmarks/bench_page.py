"""The page's speedup against `compare --schedule sequential`, and what the page costs the engines.

For the same prompts, same process, the order rotated each round, it measures:
  app:sequential    the running app's /run (its HTTP API via gradio_client, every live update rendered and
                    streamed as for a browser), engines one after the other (the page's default)
  app:concurrent    the same, both engines at once (they share the device)
  direct:sequential pair.stream(schedule="sequential"): exactly what `compare --schedule sequential` runs
  direct:concurrent pair.stream(schedule="concurrent"), nothing rendering (optional)

    python benchmarks/bench_page.py [--preset NAME] [--rounds 3] [--max-tokens 128] [--paths a,b,...]

Writes docs/results/page.json (or --out) and prints markdown tables. Goals: the page's speedup within 5% of
the sequential comparison's; app / direct tokens/s >= 0.97 per engine. tokens/s is the decode rate of
playground.comparison, timestamps taken where the chunks arrive in this process, so all paths are measured
the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SPEEDUP_GOAL = 0.05  # |page speedup / sequential speedup - 1|
COST_GOAL = 0.97  # app / direct tokens/s
PATHS = ("app:sequential", "app:concurrent", "direct:sequential")
REFERENCE = "direct:sequential"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default=None, help="preset to load (default: smollm2-ngram)")
    p.add_argument("--rounds", type=int, default=3, help="rounds over the prompts (each: every path once)")
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--paths", default=",".join(PATHS), help=f"comma-separated, from {PATHS + ('direct:concurrent',)}; "
                   "a path@S runs it under sys.setswitchinterval(S), e.g. app:sequential@0.0002 (the page sets 0.001)")
    p.add_argument("--out", default=str(ROOT / "docs" / "results" / "page.json"))
    return p.parse_args(argv)


def prompts_for(preset) -> list[str]:
    from specplay.page.inputs import EXAMPLES, TOKEN_EXAMPLES

    return list((TOKEN_EXAMPLES if preset.prompt_input == "token_ids" else EXAMPLES).values())


def direct_run(pair, request, schedule: str) -> dict:
    from specplay.run import stream
    from specplay.run.result import RunResult

    return RunResult.of(stream.compare(pair, request, schedule)).model_dump(mode="json")


def app_run(client, prompt: str, max_tokens: int, schedule: str) -> dict:
    from specplay.page.live_run import API_OUTPUTS

    out = dict(zip(API_OUTPUTS, client.predict(prompt, max_tokens, 0.0, schedule, api_name="/run")))
    result = out["result"]
    if result.get("error"):
        raise RuntimeError(f"the app reported: {result['error']}")
    return result


def run_path(path: str, client, pair, prompt: str, request, max_tokens: int) -> dict:
    """`kind:schedule`, or `kind:schedule@S`: the same run under sys.setswitchinterval(S), the longest a thread
    holds the GIL while another waits (page/ui.launch sets 0.001 s for this whole process, against Python's
    0.005 s; the page renders in one thread while the engines' loop thread stamps each chunk in another)."""
    base, _, interval = path.partition("@")
    kind, schedule = base.split(":")
    default = sys.getswitchinterval()
    sys.setswitchinterval(float(interval) if interval else default)
    try:
        return app_run(client, prompt, max_tokens, schedule) if kind == "app" else direct_run(pair, request, schedule)
    finally:
        sys.setswitchinterval(default)


def _mean(values) -> float | None:
    values = [v for v in values if v]
    return round(statistics.mean(values), 4) if values else None


def summarize(samples: list[dict], paths: list[str]) -> dict:
    out = {}
    for path in paths:
        for role in ("baseline", "speculative"):
            out[f"{path}:{role}_tokens_per_s"] = _mean(s[path][role]["tokens_per_s"] for s in samples)
        out[f"{path}:speedup"] = _mean(s[path]["speedup"] for s in samples)
        if path != REFERENCE and REFERENCE in paths:  # paired: same prompt, same round
            ratios = [s[path]["speedup"] / s[REFERENCE]["speedup"] for s in samples
                      if s[path]["speedup"] and s[REFERENCE]["speedup"]]
            out[f"{path}:speedup_vs_sequential"] = _mean(ratios)
            if path.startswith("app:sequential"):
                for role in ("baseline", "speculative"):
                    out[f"{path}:{role}_app_over_direct"] = _mean(
                        s[path][role]["tokens_per_s"] / s[REFERENCE][role]["tokens_per_s"] for s in samples
                        if s[path][role]["tokens_per_s"] and s[REFERENCE][role]["tokens_per_s"])
    return out


def _keep(result: dict) -> dict:
    keys = ("tokens_per_s", "ttft_s", "steps", "step_seconds", "tokens_per_step")
    return {"speedup": result["speedup"], "identical": result["identical"],
            "step_cost_ratio": result["step_cost_ratio"], "tokens_per_step_ratio": result["tokens_per_step_ratio"],
            **{role: {k: result[role][k] for k in keys} | {"tokens": len(result[role]["token_ids"])}
               for role in ("baseline", "speculative")}}


class PageLoadError(RuntimeError):
    """The page's engines did not load."""


@contextmanager
def page_on(preset, hardware):
    """The real page on one preset, on a free loopback port: (a gradio_client on it, its engine pair) once
    both engines are ready (PageLoadError if they fail to load); page and engines closed on the way out."""
    from gradio_client import Client

    from specplay.page import ui
    from specplay.hosting import closing
    from specplay.hosting.manager import PairManager

    manager = PairManager({preset.name: preset}, preset.name, hardware)
    manager.load(preset.name)
    demo = ui.build_page(manager)
    ui.launch(demo, "127.0.0.1", _free_port(), block=False)
    try:
        while manager.status().state == "loading":
            time.sleep(1)
        if manager.status().state != "ready":
            raise PageLoadError(f"engines failed to load: {manager.status().message}")
        yield Client(demo.local_url, verbose=False), manager.pair
    finally:
        closing.close(demo)
        manager.shutdown()


def main(argv=None) -> int:
    args = parse_args(argv)
    from specplay.core.hardware import detect
    from specplay.presets.catalog import DEFAULT_PRESET, get_preset

    preset = get_preset(args.preset or DEFAULT_PRESET)
    try:
        with page_on(preset, detect()) as (client, pair):
            return measure(args, preset, client, pair)
    except PageLoadError as exc:
        print(exc, file=sys.stderr)
        return 1


def measure(args, preset, client, pair) -> int:
    from specplay.core.hardware import detect
    from specplay.page.inputs import build_request
    from specplay.page.live_run import UPDATE_HZ

    hardware = detect()
    paths = args.paths.split(",")
    prompts = prompts_for(preset)
    requests = [build_request(preset, p, args.max_tokens, 0.0) for p in prompts]
    for path in paths:  # one unmeasured run each: first-use costs (compiles, caches) out of the numbers
        run_path(path, client, pair, prompts[0], requests[0], args.max_tokens)
    samples = []
    for r in range(args.rounds):
        for i, (prompt, request) in enumerate(zip(prompts, requests)):
            shift = (r * len(prompts) + i) % len(paths)  # rotate which path goes first
            sample = {"round": r, "prompt": i}
            for path in paths[shift:] + paths[:shift]:
                sample[path] = _keep(run_path(path, client, pair, prompt, request, args.max_tokens))
            samples.append(sample)
            print(f"round {r} prompt {i}: " + ", ".join(f"{path} {sample[path]['speedup']}×" for path in paths),
                  flush=True)
    from specplay.engine.base import engines_json

    summary = summarize(samples, paths)
    report = {
        "preset": preset.name, "hardware": hardware.describe(), "platform": platform.platform(),
        "max_tokens": args.max_tokens, "rounds": args.rounds, "prompts": len(prompts), "paths": paths,
        "update_hz": UPDATE_HZ, "summary": summary, "samples": samples,
        "engines": engines_json(pair.engine_info()),
        "definition": "tokens/s = decode rate (tokens after the first / time from first to last token), "
                      "engine-side timestamps; ratios are means over runs paired by round and prompt",
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nPage benchmark: {preset.name} on {hardware.describe()}, {len(samples)} prompts × rounds, "
          f"max_tokens {args.max_tokens}\n")
    print("| path | baseline tok/s | speculative tok/s | speedup | speedup ÷ sequential comparison's |")
    print("|---|---|---|---|---|")
    for path in paths:
        ratio = summary.get(f"{path}:speedup_vs_sequential")
        print(f"| {path} | {summary[f'{path}:baseline_tokens_per_s']} | {summary[f'{path}:speculative_tokens_per_s']}"
              f" | {summary[f'{path}:speedup']} | {ratio if ratio is not None else '(reference)'} |")
    for role in ("baseline", "speculative"):
        ratio = summary.get(f"app:sequential:{role}_app_over_direct")
        if ratio is not None:
            print(f"\n{role}: app / direct tokens/s (sequential) = {ratio} (goal ≥ {COST_GOAL})", end="")
    print(f"\n\nwritten to {out}")
    return 0


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":  # vLLM spawns engine processes that re-import the main module
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(main())
