"""Do compiled CPU engines give the eager ones' tokens? The suite runs every CPU engine eager
(PLAYGROUND_CPU_EAGER=1: `enforce_eager`, half the start time; compiled, the suite's two `vllm serve` servers
took 299 s to start on a fresh machine), while the page and `vllm serve` run compiled. This runs the same
prompts through one preset's pair both ways, each in a process of its own, and compares every token.

    .venv/bin/python benchmarks/eager_check.py [--preset smollm2-ngram] [--n 2] [--max-tokens 48] [--out FILE.json]

Exit status 0 when every prompt's tokens agree on both engines both ways, 1 otherwise."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = ("rewrite", "code", "chat")


def worker(preset_name: str, n: int, max_tokens: int) -> dict:
    """In this process: start the pair, run each prompt one engine after the other, return the token ids."""
    sys.path.insert(0, str(ROOT))
    from specplay.bench.workloads import load_workload
    from specplay.core.events import BASELINE, SPECULATIVE, Schedule
    from specplay.presets.catalog import get_preset
    from specplay.run import stream
    from specplay.run.pairs import open_pair

    t0 = time.monotonic()
    pair = open_pair(get_preset(preset_name), log=lambda m: None)
    pair.start()
    started = time.monotonic() - t0
    runs = {}
    try:
        for workload in WORKLOADS:
            for prompt in load_workload(workload, n):
                c = stream.compare(pair, prompt.request(max_tokens=max_tokens), Schedule.SEQUENTIAL)
                if c.finished is None or c.finished.error:  # two empty outputs must not pass for identical ones
                    raise SystemExit(f"{prompt.id}: the run failed: {c.finished and c.finished.error}")
                runs[prompt.id] = {role: list(c.traces[role].token_ids) for role in (BASELINE, SPECULATIVE)}
    finally:
        pair.shutdown()
    return {"start_s": round(started, 1), "runs": runs}


def run_mode(args, eager: bool) -> dict:
    env = dict(os.environ, PLAYGROUND_FORCE_CPU="1", OMP_NUM_THREADS="1", PLAYGROUND_CPU_EAGER="1" if eager else "0")
    out = subprocess.run([sys.executable, __file__, "--worker", "--preset", args.preset, "--n", str(args.n),
                          "--max-tokens", str(args.max_tokens)], env=env, capture_output=True, text=True, cwd=ROOT)
    if out.returncode != 0:
        raise SystemExit(f"the {'eager' if eager else 'compiled'} run failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="smollm2-ngram")
    p.add_argument("--n", type=int, default=2, help="prompts per workload (rewrite, code, chat)")
    p.add_argument("--max-tokens", type=int, default=48)
    p.add_argument("--out", default=None)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.preset, args.n, args.max_tokens)))
        return 0
    eager, compiled = run_mode(args, eager=True), run_mode(args, eager=False)
    prompts = {}
    for pid, tokens in eager["runs"].items():
        other = compiled["runs"][pid]
        prompts[pid] = {role: tokens[role] == other[role] for role in tokens}
        prompts[pid]["tokens"] = len(tokens["baseline"])
    same = all(v["baseline"] and v["speculative"] for v in prompts.values())
    result = {"preset": args.preset, "max_tokens": args.max_tokens, "all_identical": same,
              "start_s": {"eager": eager["start_s"], "compiled": compiled["start_s"]}, "prompts": prompts,
              "command": "python benchmarks/eager_check.py " + " ".join(argv if argv is not None else sys.argv[1:])}
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
