"""Identity and speed over varied prompts, one preset, each engine alone (the sequential schedule): per prompt
whether the outputs are identical over their full length, the speedup, its two factors and the page's
one-sentence explanation. Used to check a preset on a device (e.g. the SmolLM2 presets in bf16 on a GPU).

    python benchmarks/bench_prompts.py --presets smollm2-ngram,smollm2-layerskip-draft \
        --prompts examples,code:3,chat:3,rewrite:2,qa:2 --max-tokens 512 --out docs/results/x.json

`examples` are the page's example prompts; `NAME:N` takes the first N prompts of a shipped workload;
`tokens:N` makes N fixed token-id prompts (for dummy-weight presets, which have no tokenizer), each a
random stretch that repeats, so that n-gram lookup finds something to propose. On a GPU each preset's
record has the GPU memory of each engine's processes from NVML, summed over the GPUs they use.
Natural stops (no ignore_eos), so "identical" covers each output to its end. Presets sharing a target
reuse the resident baseline engine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def prompt_list(spec: str) -> list[tuple[str, str]]:
    from specplay.page.inputs import EXAMPLES
    from specplay.bench.workloads import load_workload

    out = []
    for item in spec.split(","):
        name, _, n = item.partition(":")
        if name == "tokens":
            import random

            rng = random.Random(0)
            for i in range(int(n or 4)):
                stretch = [rng.randrange(1000, 20000) for _ in range(24)]
                out.append((f"tokens-{i}", stretch + stretch[:16] + [rng.randrange(1000, 20000) for _ in range(8)]))
        elif name == "examples":
            out += [(f"example-{kind}", text) for kind, text in EXAMPLES.items()]
        else:
            out += [(f"{name}-{p.id}", p.prompt) for p in load_workload(name, int(n) if n else None)]
    return out


def gpu_memory_gib(pair) -> dict:
    """Each engine's GPU memory from NVML: its engine-core process and children (TP workers), summed over
    every GPU they hold."""
    from specplay.engine.telemetry import NvmlReader

    reader = NvmlReader()
    try:
        used = reader.read(pair.process_ids())
        return {role: round(b / 2**30, 2) for role, b in used.items()} | {"per_process": reader.per_process}
    finally:
        reader.close()


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--presets", default="smollm2-ngram")
    p.add_argument("--prompts", default="examples,code:3,chat:3,rewrite:2,qa:2")
    p.add_argument("--max-tokens", type=int, default=512)
    p.add_argument("--out", required=True)
    return p.parse_args(argv)


def request_for(text, preset, max_tokens: int):
    """Token ids (`tokens:N`, for presets without a tokenizer) stop at ignore_eos as the preset says; text
    stops naturally."""
    from specplay.core.events import GenerationRequest

    return (GenerationRequest(prompt="", prompt_token_ids=tuple(text), max_tokens=max_tokens,
                              ignore_eos=preset.ignore_eos) if isinstance(text, list)
            else GenerationRequest(prompt=text, max_tokens=max_tokens))


def prompt_row(pair, preset, hardware, label: str, request) -> dict:
    """One prompt through both engines, one after the other: its identity, speedup and explanation."""
    from specplay.plan.memory import target_step_floor_s as step_floor_s
    from specplay.core.events import Schedule
    from specplay.run.compare_prompt import result_on

    typed = result_on(pair, preset, request, Schedule.SEQUENTIAL, hardware, step_floor_s(preset, hardware))
    result = typed.model_dump(mode="json")
    row = {"prompt": label, "identical": result["identical"],
           "first_divergence": result["first_divergence"],
           "tokens": [len(result[r]["token_ids"]) for r in ("baseline", "speculative")],
           "speedup": result["speedup"], "tokens_per_step_ratio": result["tokens_per_step_ratio"],
           "step_cost_ratio": result["step_cost_ratio"],
           "acceptance_rate": result["speculative"]["acceptance_rate"],
           "tokens_per_s": [result[r]["tokens_per_s"] for r in ("baseline", "speculative")],
           "step_ms": [round((result[r]["step_seconds"] or 0) * 1000, 3) for r in ("baseline", "speculative")],
           "explanation": typed.explanation}
    if not result["identical"]:
        row["divergence_context"] = result.get("divergence_context")
    return row


def preset_rows(pair, name: str, preset, hardware, prompts, max_tokens: int) -> list[dict]:
    rows = []
    for label, text in prompts:
        row = prompt_row(pair, preset, hardware, label, request_for(text, preset, max_tokens))
        rows.append(row)
        print(f"{name} {label}: identical={row['identical']} speedup={row['speedup']} "
              f"({row['tokens_per_step_ratio']} / {row['step_cost_ratio']}) {row['tokens']}", flush=True)
    return rows


def preset_record(pair, preset, hardware, rows: list[dict]) -> dict:
    """A preset's summary over its prompts, with its engines and (on a GPU) their memory."""
    from specplay.engine.base import engines_json
    from specplay.presets.catalog import dtype_for

    speedups = [r["speedup"] for r in rows if r["speedup"]]
    memory = gpu_memory_gib(pair) if hardware.device == "gpu" else None
    return {
        "dtype": dtype_for(preset, hardware.device), "engines": engines_json(pair.engine_info()),
        "identical": f"{sum(r['identical'] for r in rows)}/{len(rows)}",
        "speedup_median": round(statistics.median(speedups), 3) if speedups else None,
        "speedup_range": [min(speedups), max(speedups)] if speedups else None,
        "load_seconds": pair.status.load_seconds, "gpu_memory_gib": memory,
        "tensor_parallel_size": preset.target.tensor_parallel_size, "rows": rows,
    }


def main(argv=None) -> int:
    args = parse_args(argv)

    from specplay.run.pairs import open_pair, switch_in_place
    from specplay.core.hardware import detect
    from specplay.presets.catalog import get_preset

    hardware = detect()
    prompts = prompt_list(args.prompts)
    report = {"hardware": hardware.describe(), "platform": platform.platform(), "max_tokens": args.max_tokens,
              "schedule": "sequential", "presets": {}}
    pair = None
    try:
        for name in args.presets.split(","):
            preset = get_preset(name)
            # presets sharing a target keep the resident pair (its baseline engine); others get a new one
            if pair is None or not switch_in_place(pair, preset, hardware, log=lambda m: print(m, file=sys.stderr)):
                if pair is not None:
                    pair.shutdown()
                pair = open_pair(preset, hardware)
                pair.start()
            rows = preset_rows(pair, name, preset, hardware, prompts, args.max_tokens)
            record = report["presets"][name] = preset_record(pair, preset, hardware, rows)
            print(f"{name}: identical {record['identical']}, speedup median "
                  f"{record['speedup_median']} range {record['speedup_range']}")
            write_report(report, Path(args.out))  # after each preset: a run cut short by a deadline keeps its presets
    finally:
        if pair is not None:
            pair.shutdown()
    print(f"written to {args.out}")
    return 0


def write_report(report: dict, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":  # vLLM spawns engine processes that re-import the main module
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(main())
