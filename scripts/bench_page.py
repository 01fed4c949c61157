"""Does the page slow the engines? Tokens/s of each engine observed through the running app (its HTTP API,
driven by gradio_client, with every live update rendered and streamed as for a browser) versus the same
engines driven directly (pair.stream, nothing rendering), same prompts, same process, alternating.

    python scripts/bench_page.py [--preset NAME] [--rounds 3] [--max-tokens 128]

Writes docs/results/page.json (or --out) and prints a markdown table. Goal: app / direct >= 0.97 for both engines.
tokens/s is the engines' decode rate as defined in playground.comparison (timestamps taken where the
chunks arrive in this process), so both paths are measured the same way.
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
GOAL = 0.97


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default=None, help="preset to load (default: smollm2-ngram)")
    p.add_argument("--rounds", type=int, default=3, help="rounds over the prompts (each: app and direct)")
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--out", default=str(ROOT / "docs" / "results" / "page.json"))
    return p.parse_args(argv)


def prompts_for(preset) -> list[str]:
    from playground.ui import EXAMPLES, TOKEN_EXAMPLES

    return list((TOKEN_EXAMPLES if preset.prompt_input == "token_ids" else EXAMPLES).values())


def direct_run(pair, request) -> dict:
    from playground.comparison import Comparison

    comparison = Comparison()
    for event in pair.stream(request, schedule="concurrent"):
        comparison.add(event)
    return comparison.as_dict()


def app_run(client, prompt: str, max_tokens: int) -> dict:
    out = client.predict(prompt, max_tokens, 0.0, api_name="/run")
    result = out[10]  # the page's raw result JSON (see ui.RUN_OUTPUTS)
    if result.get("error"):
        raise RuntimeError(f"the app reported: {result['error']}")
    return result


def summarize(samples: list[dict]) -> dict:
    out = {}
    for path in ("app", "direct"):
        for role in ("baseline", "speculative"):
            values = [s[path][role]["tokens_per_s"] for s in samples if s[path][role]["tokens_per_s"]]
            out[f"{path}_{role}_tokens_per_s"] = round(statistics.mean(values), 2) if values else None
    for role in ("baseline", "speculative"):
        ratios = [s["app"][role]["tokens_per_s"] / s["direct"][role]["tokens_per_s"] for s in samples
                  if s["app"][role]["tokens_per_s"] and s["direct"][role]["tokens_per_s"]]
        out[f"ratio_{role}"] = round(statistics.mean(ratios), 4) if ratios else None
        out[f"ratio_{role}_min"] = round(min(ratios), 4) if ratios else None
    return out


def main(argv=None) -> int:
    args = parse_args(argv)
    from gradio_client import Client

    from playground import ui
    from playground.hardware import detect
    from playground.pair_manager import PairManager
    from playground.presets import DEFAULT_PRESET, get_preset

    preset = get_preset(args.preset or DEFAULT_PRESET)
    hardware = detect()
    manager = PairManager({preset.name: preset}, preset.name, hardware)
    manager.load(preset.name)
    demo = ui.build_page(manager)
    ui.launch(demo, "127.0.0.1", _free_port(), block=False)
    try:
        while manager.status().state == "loading":
            time.sleep(1)
        if manager.status().state != "ready":
            print(f"engines failed to load: {manager.status().message}", file=sys.stderr)
            return 1
        client = Client(demo.local_url, verbose=False)
        pair = manager.pair
        prompts = prompts_for(preset)
        requests = [ui.build_request(preset, p, args.max_tokens, 0.0) for p in prompts]
        # one unmeasured run each way: first-use costs (compiles, caches) out of the numbers
        app_run(client, prompts[0], args.max_tokens)
        direct_run(pair, requests[0])
        samples = []
        for r in range(args.rounds):
            for i, (prompt, request) in enumerate(zip(prompts, requests)):
                first_app = (r + i) % 2 == 0  # alternate which path goes first
                sample = {"round": r, "prompt": i}
                for path in (("app", "direct") if first_app else ("direct", "app")):
                    sample[path] = app_run(client, prompt, args.max_tokens) if path == "app" else direct_run(pair, request)
                for path in ("app", "direct"):
                    sample[path] = {role: {k: sample[path][role][k] for k in ("tokens_per_s", "ttft_s", "steps")}
                                    | {"tokens": len(sample[path][role]["token_ids"])}
                                    for role in ("baseline", "speculative")}
                samples.append(sample)
                print(f"round {r} prompt {i}: " + ", ".join(
                    f"{path} {sample[path]['baseline']['tokens_per_s']}/{sample[path]['speculative']['tokens_per_s']}"
                    for path in ("app", "direct")) + " tok/s (baseline/speculative)", flush=True)
        summary = summarize(samples)
        report = {
            "preset": preset.name, "hardware": hardware.describe(), "platform": platform.platform(),
            "max_tokens": args.max_tokens, "rounds": args.rounds, "prompts": len(prompts),
            "update_hz": ui.UPDATE_HZ, "goal_ratio": GOAL, "summary": summary, "samples": samples,
            "definition": "tokens/s = decode rate (tokens after the first / time from first to last token), "
                          "engine-side timestamps; ratio = app / direct, mean over paired runs",
        }
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=2) + "\n")
        print()
        print(f"Page benchmark: {preset.name} on {hardware.describe()}, {len(samples)} paired runs, "
              f"max_tokens {args.max_tokens}, charts at {ui.UPDATE_HZ:g} Hz")
        print()
        print("| engine | direct tok/s | through the app tok/s | app / direct (mean) | worst pair | goal |")
        print("|---|---|---|---|---|---|")
        for role in ("baseline", "speculative"):
            ratio = summary[f"ratio_{role}"]
            print(f"| {role} | {summary[f'direct_{role}_tokens_per_s']} | {summary[f'app_{role}_tokens_per_s']} | "
                  f"{ratio} | {summary[f'ratio_{role}_min']} | {'✓' if ratio and ratio >= GOAL else '✗'} ≥ {GOAL} |")
        print(f"\nwritten to {out}")
        return 0
    finally:
        demo.close()
        manager.shutdown()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":  # vLLM spawns engine processes that re-import the main module
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(main())
