"""The memory plan against what the engines really take: for each preset, `plan` before loading, then the
pair loaded, then each engine's memory read the way the page reads it (NVML per engine process on a GPU,
RSS on the CPU). Presets sharing a target reuse the resident baseline engine.

    python benchmarks/plan_check.py --presets dummy-llama8b-eagle-k3,dummy-llama8b-draft1b-k3 --out FILE

Goal (GPU): each engine's planned total (its gpu_memory_utilization share plus the CUDA context) within
15% of NVML's reading.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from specplay.core.units import GIB  # noqa: E402  (after the path: the checkout's specplay)

GOAL = 0.15


def planned_total_bytes(row, device: str) -> int | None:
    """What the plan says the engine's process holds: on a GPU its reservation (utilization x total) plus the
    CUDA context of each of its GPUs; on the CPU its estimated resident memory."""
    from specplay.plan.memory import CUDA_CONTEXT_GIB

    if device == "gpu":
        return None if row.reserve_bytes is None else int(row.reserve_bytes + CUDA_CONTEXT_GIB * GIB * max(1, len(row.gpus)))
    return row.ram_bytes


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--presets", required=True)
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)

    from specplay.run.pairs import open_pair, switch_in_place
    from specplay.core.hardware import detect
    from specplay.plan.memory import plan
    from specplay.presets.catalog import get_preset
    from specplay.engine.telemetry import sampler_for_pair

    hardware = detect()
    report = {"hardware": hardware.describe(), "goal": GOAL, "presets": {}}
    pair = None
    try:
        for name in args.presets.split(","):
            preset = get_preset(name)
            memory_plan = plan(preset, hardware)  # before loading: what is free now
            if pair is None or not switch_in_place(pair, preset, hardware, log=lambda m: print(m, file=sys.stderr)):
                if pair is not None:
                    pair.shutdown()
                    time.sleep(5)  # let the old processes release their memory before the next plan
                pair = open_pair(preset, hardware, warmup=True)
                pair.start()
            sampler = sampler_for_pair(pair, gpu=hardware.device == "gpu").start()
            time.sleep(2.0)
            series, measured_as = sampler.series(), sampler.label  # the label before stop() closes NVML
            sampler.stop()
            rows = {}
            for row in memory_plan.engines:
                measured = series[row.role].latest if row.role in series else None
                planned = planned_total_bytes(row, hardware.device)
                ratio = planned / measured if planned and measured else None
                rows[row.role] = {"planned_gib": round(planned / GIB, 2) if planned else None,
                                  "measured_gib": round(measured / GIB, 2) if measured else None,
                                  "planned_over_measured": round(ratio, 3) if ratio else None,
                                  "within_goal": ratio is not None and abs(ratio - 1) <= GOAL,
                                  "weights_gib": round(row.weight_bytes / GIB, 2) if row.weight_bytes else None,
                                  "kv_bytes_per_token": row.kv_bytes_per_token}
                print(f"{name} {row.role}: planned {rows[row.role]['planned_gib']} GiB, measured "
                      f"{rows[row.role]['measured_gib']} GiB ({measured_as})", flush=True)
            report["presets"][name] = {"fits": memory_plan.fits, "reason": memory_plan.reason,
                                       "measured_as": measured_as, "engines": rows, "plan": memory_plan.as_dict()}
    finally:
        if pair is not None:
            pair.shutdown()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, default=str) + "\n")
    print(f"written to {out}")
    return 0


if __name__ == "__main__":  # vLLM spawns engine processes that re-import the main module
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(main())
