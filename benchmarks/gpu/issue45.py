"""Issue 45's GPU measurements in one process, through the product's own run path (run/compare_prompt.py, what
`specplay compare` calls): per preset, one pair started once, then the same prompt on the concurrent and the
sequential schedule (the explanation each gives, the step-cost ratio), what vLLM reserved for each engine's KV
cache (EngineInfo.kv_cache_bytes) beside the memory plan's estimate (plan.memory, what `specplay plan` prints),
and, for `--repeat`, the same greedy prompt run N times in a row (does the first run's output differ from the
later ones, and does it with prefix caching off).

    python benchmarks/gpu/issue45.py --preset dummy-llama8b-dflash --out $OUT/dflash.json
    python benchmarks/gpu/issue45.py --preset smollm2-ngram-gpu --repeat 5 --variant '{}' \
        --variant '{"enable_prefix_caching": false}' --out $OUT/ngram.json
"""

from __future__ import annotations

import argparse
import json
import time

PROMPT = ("Rewrite this paragraph in a formal register, keeping every fact: the team shipped the release late "
          "because the tests were flaky, the build server ran out of disk twice, and nobody had written down "
          "how to roll back. Next time they will pin the toolchain and keep a runbook.")


def _pair(preset, variant: dict):
    """The preset's in-process pair, with `variant`'s engine arguments on both engines."""
    import dataclasses

    from specplay.engine.pair import EnginePair
    from specplay.presets.engines import engine_settings
    from specplay.run.pairs import open_pair

    pair = open_pair(preset)  # also prepares the offline model where the preset needs it
    if not variant:
        return pair
    settings = [dataclasses.replace(s, engine_args={**s.engine_args, **variant}) for s in engine_settings(preset)]
    return EnginePair(*settings, tag=preset)


def _run(pair, preset, schedule: str, max_tokens: int):
    """(the run of the prompt on `schedule`, the request it was given: its text, or token ids for dummy weights)"""
    from specplay.core.events import GenerationRequest
    from specplay.engine.base import PromptError
    from specplay.run.compare_prompt import result_on

    request = GenerationRequest(prompt=PROMPT, max_tokens=max_tokens, temperature=0.0)
    try:
        pair.prompt_token_ids(request)
    except PromptError:  # a dummy-weights preset has no tokenizer: the prompt as token ids, as the bench gives them
        request = GenerationRequest(prompt="", prompt_token_ids=tuple(1000 + (7 * i) % 5000 for i in range(64)),
                                    max_tokens=max_tokens, temperature=0.0, ignore_eos=True)
    return result_on(pair, preset, request, schedule), request


def _record(path, preset, result, request) -> None:
    """The run as a recording (what `compare --record` writes: run/recording.py), made on this machine."""
    from specplay.core.hardware import detect
    from specplay.run.recording import provenance, recording_of, write_recording

    write_recording(recording_of(result, provenance(preset, detect(), "issue45.py"), request), path)


def measure(name: str, variant: dict, repeat: int, max_tokens: int, record: str | None = None) -> dict:
    from specplay.plan.memory import plan
    from specplay.presets.catalog import get_preset

    preset = get_preset(name)
    planned = {row.role: row.kv_capacity_bytes for row in plan(preset).engines}
    pair = _pair(preset, variant)
    t0 = time.monotonic()
    pair.start()
    out = {"preset": name, "variant": variant, "start_s": round(time.monotonic() - t0, 1),
           "kv_planned_bytes": planned, "runs": []}
    try:
        schedules = ["sequential"] * repeat if repeat else ["concurrent", "sequential", "concurrent", "sequential"]
        for schedule in schedules:
            result, request = _run(pair, preset, schedule, max_tokens)
            out["runs"].append({
                "schedule": schedule, "identical": result.identical, "speedup": result.speedup,
                "tokens_per_step_ratio": result.tokens_per_step_ratio, "step_cost_ratio": result.step_cost_ratio,
                "explanation": result.explanation, "baseline_token_ids": list(result.baseline.token_ids),
                "kv_reserved_bytes": {role: info.kv_cache_bytes for role, info in result.engines.items()},
            })
            print(json.dumps({k: v for k, v in out["runs"][-1].items() if k != "baseline_token_ids"}), flush=True)
            if record and schedule == "sequential":
                _record(record, preset, result, request)  # the last sequential run
    finally:
        pair.shutdown()
    ids = [r["baseline_token_ids"] for r in out["runs"]]
    out["outputs_equal_across_runs"] = [i == ids[0] for i in ids]
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--preset", required=True)
    parser.add_argument("--repeat", type=int, default=0, help="N sequential runs of one prompt (0: 2 per schedule)")
    parser.add_argument("--variant", action="append", default=None, help="engine arguments as JSON, per pair")
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--out", required=True)
    parser.add_argument("--record", default=None, help="also write the last sequential run as a recording here")
    args = parser.parse_args()
    from specplay.core.hardware import detect

    found = {"device": detect().describe(), "pairs": []}
    try:
        import vllm

        found["vllm"] = vllm.__version__
    except Exception:
        pass
    for variant in [json.loads(v) for v in (args.variant or ["{}"])]:
        found["pairs"].append(measure(args.preset, variant, args.repeat, args.max_tokens, args.record))
        with open(args.out, "w") as f:  # after each pair: a run cut short still leaves what it measured
            json.dump(found, f, indent=1)


if __name__ == "__main__":
    main()
