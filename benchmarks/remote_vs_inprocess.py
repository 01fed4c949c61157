"""Remote mode against the in-process pair, same preset, same prompts, one run (issue 20's H200 check).

    python benchmarks/remote_vs_inprocess.py --preset dummy-llama8b-eagle-k3 --out docs/results/h200-remote-eagle.json
    python benchmarks/remote_vs_inprocess.py --preset smollm2-ngram-gpu --out docs/results/h200-remote-smollm2.json
    # also a request-rate sweep (`specplay bench --request-rate`) against the launched servers:
    python benchmarks/remote_vs_inprocess.py --preset dummy-llama8b-eagle-k3 --out R.json \
        --sweep-rates 1,2,4,8,16,32,inf --sweep-prompts 32 --sweep-dir bench-results/rate-sweep

Order: `specplay launch`'s two `vllm serve` processes (as the preset's serve lines say), the prompts through
remote mode, the optional sweep, the servers stopped; then the in-process pair, the same prompts. Each
prompt runs --repeats times after one discarded warm run, sequential schedule (each engine alone), T=0.
Prompts: token ids for dummy-weight presets (`token_id_prompts`), else the first of each text workload.
Writes one JSON (per prompt and mode: tok/s per engine, speedup, acceptance, identity) and prints the
remote ÷ in-process ratios.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specplay.bench.workloads import load_workload, token_id_prompts  # noqa: E402
from specplay.core.events import BASELINE, SPECULATIVE, GenerationRequest, Schedule  # noqa: E402
from specplay.engine.base import engines_json  # noqa: E402
from specplay.presets.catalog import get_preset  # noqa: E402
from specplay.run import stream  # noqa: E402

TEXT_WORKLOADS = ("qa", "summarize", "code", "chat")


def prompts_for(preset, n: int) -> list:
    if preset.prompt_input == "token_ids":
        return token_id_prompts(n, 64)
    out = []
    for name in TEXT_WORKLOADS:
        out += load_workload(name, max(1, n // len(TEXT_WORKLOADS) + 1))
    return out[:n]


def request_of(prompt, preset, max_tokens: int | None) -> GenerationRequest:
    return prompt.request(max_tokens=max_tokens or preset.default_max_tokens, ignore_eos=preset.ignore_eos)


def measure(pair, preset, prompts, repeats: int, max_tokens: int | None) -> list[dict]:
    rows = []
    for prompt in prompts:
        request = request_of(prompt, preset, max_tokens)
        stream.compare(pair, request, Schedule.SEQUENTIAL, num_speculative_tokens=preset.num_speculative_tokens)
        runs = []
        for _ in range(repeats):
            c = stream.compare(pair, request, Schedule.SEQUENTIAL, num_speculative_tokens=preset.num_speculative_tokens)
            b, s = c.traces[BASELINE], c.traces[SPECULATIVE]
            runs.append({"baseline_tok_s": b.tokens_per_s, "speculative_tok_s": s.tokens_per_s,
                         "speedup": c.speedup, "acceptance_rate": c.counters.acceptance_rate,
                         "mean_acceptance_length": c.counters.mean_acceptance_length,
                         "acceptance_source": c.counters_source, "identical": c.identical,
                         "tokens": [len(b.token_ids), len(s.token_ids)]})
        rows.append({"prompt": prompt.id, "runs": runs, **{f"median_{k}": _median(runs, k) for k in
                     ("baseline_tok_s", "speculative_tok_s", "speedup", "acceptance_rate", "mean_acceptance_length")}})
    return rows


def _median(runs, key):
    values = [r[key] for r in runs if r[key] is not None]
    return round(statistics.median(values), 4) if values else None


def sweep(preset, urls: dict, rates: str, n: int, out_dir: str, concurrency: str = "1") -> int:
    """`specplay bench --request-rate` against the launched servers (the CLI as a user runs it)."""
    argv = [sys.executable, "-m", "specplay", "bench", "--preset", preset.name, "--request-rate", rates,
            "--num-prompts", str(n), "--baseline-url", urls[BASELINE], "--speculative-url", urls[SPECULATIVE],
            "--max-concurrency", concurrency, "--result-dir", out_dir, "--no-png", "--server-timeout", "300"]
    print("$", " ".join(argv), flush=True)
    return subprocess.run(argv).returncode


def remote_rows(preset, prompts, args) -> tuple[list[dict], dict]:
    from specplay.run.launch import launch
    from specplay.run.remote import open_remote_pair

    t0 = time.monotonic()
    servers = launch(preset)
    info = {"start_s": round(time.monotonic() - t0, 1), "commands": servers.commands}
    try:
        pair = open_remote_pair(servers.urls[BASELINE], servers.urls[SPECULATIVE], preset, timeout_s=300)
        pair.start(progress=lambda msg, frac: None)
        info["engines"] = engines_json(pair.engine_info())
        rows = measure(pair, preset, prompts, args.repeats, args.max_tokens)
        pair.shutdown()
        if args.sweep_rates:
            info["sweep_rc"] = sweep(preset, servers.urls, args.sweep_rates, args.sweep_prompts, args.sweep_dir,
                                     args.sweep_concurrency)
    finally:
        servers.stop()
    return rows, info


def inprocess_rows(preset, prompts, args) -> tuple[list[dict], dict]:
    from specplay.run.pairs import open_pair

    t0 = time.monotonic()
    pair = open_pair(preset, log=lambda *a: None)
    pair.start(progress=lambda msg, frac: None)
    info = {"start_s": round(time.monotonic() - t0, 1), "engines": engines_json(pair.engine_info())}
    try:
        return measure(pair, preset, prompts, args.repeats, args.max_tokens), info
    finally:
        pair.shutdown()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", required=True)
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=None)
    ap.add_argument("--out", required=True)
    ap.add_argument("--sweep-rates", default=None, help="e.g. 1,2,4,8,16,inf: a remote request-rate sweep")
    ap.add_argument("--sweep-prompts", type=int, default=32)
    ap.add_argument("--sweep-dir", default="bench-results/remote-rate-sweep")
    ap.add_argument("--sweep-concurrency", default="1", help="the sweep's closed-loop rows (--max-concurrency)")
    ap.add_argument("--mode", choices=["both", "remote", "inprocess"], default="both",
                    help="one half only (two device calls), merged into --out when it holds the other")
    args = ap.parse_args(argv)
    preset = get_preset(args.preset)
    prompts = prompts_for(preset, args.prompts)
    out = Path(args.out)
    result = json.loads(out.read_text()) if out.exists() and args.mode != "both" else {}
    result.update({"preset": preset.name, "prompts": [p.id for p in prompts], "repeats": args.repeats})
    if args.mode in ("both", "remote"):
        result["remote"], result["remote_info"] = remote_rows(preset, prompts, args)
    if args.mode in ("both", "inprocess"):
        result["inprocess"], result["inprocess_info"] = inprocess_rows(preset, prompts, args)
    if "remote" in result and "inprocess" in result:
        result["ratios"] = ratios(result["remote"], result["inprocess"])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, default=str))
    print(json.dumps(result.get("ratios") or result, indent=1, default=str)[:4000])
    return 0


def ratios(remote: list[dict], local: list[dict]) -> dict:
    """Per prompt, remote ÷ in-process for each engine's tok/s, the speedup and the acceptance."""
    out = {}
    for r, p in zip(remote, local):
        out[r["prompt"]] = {k: (round(r[f"median_{k}"] / p[f"median_{k}"], 3) if r[f"median_{k}"] and p[f"median_{k}"]
                                else None)
                            for k in ("baseline_tok_s", "speculative_tok_s", "speedup", "acceptance_rate")}
    return out


if __name__ == "__main__":
    sys.exit(main())
