"""python -m specplay plan: print a preset's memory plan; the exit status says whether it fits."""

from __future__ import annotations

import json
import os
import sys

from specplay.core.hardware import Hardware, detect

EXIT_FITS, EXIT_DOES_NOT_FIT, EXIT_UNKNOWN = 0, 3, 4


def add_arguments(parser) -> None:
    parser.add_argument("--preset", required=True)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--gpu-gib", type=float, default=None,
                        help="plan for GPUs of this much memory (GiB) instead of this machine's")
    parser.add_argument("--gpus", type=int, default=None, help="with --gpu-gib: how many (default: the preset's)")
    parser.add_argument("--free-gib", type=float, default=None, help="with --gpu-gib: free memory per GPU (default: all)")
    parser.add_argument("--ram-gib", type=float, default=None, help="plan the CPU engines against this much available RAM")


def run_cli(args) -> int:
    """Print the plan; exit 0 when it fits, 3 when it doesn't, 4 when it can't tell (a config is missing)."""
    from specplay.plan.memory import MachineMemory, plan
    from specplay.plan.report import format_plan
    from specplay.presets.catalog import get_preset

    preset = get_preset(args.preset)
    hardware = memory = None
    if args.gpu_gib is None and (args.gpus is not None or args.free_gib is not None):
        raise SystemExit("--gpus and --free-gib go with --gpu-gib (the GPUs' total memory)")
    if args.gpu_gib is not None:
        count = args.gpus or preset.gpus
        memory = MachineMemory.gpu(args.gpu_gib, args.free_gib, count=count, name=f"{args.gpu_gib:g} GiB GPU")
        hardware = Hardware(count, memory.gpu_name, tuple(range(os.cpu_count() or 1)))
    elif args.ram_gib is not None:
        hardware = detect()
        if hardware.gpu_count:
            raise SystemExit("--ram-gib plans the CPU engines; this machine has a GPU (set PLAYGROUND_FORCE_CPU=1)")
        memory = MachineMemory.cpu(args.ram_gib)
    result = plan(preset, hardware, memory)
    print(json.dumps(result.as_dict()) if args.json else format_plan(result))
    if result.device == "cpu" and preset.device == "gpu":
        print(f"(--gpu-gib N plans {preset.name} for GPUs of N GiB)", file=sys.stderr)
    if not result.complete:
        return EXIT_UNKNOWN
    return EXIT_FITS if result.fits else EXIT_DOES_NOT_FIT
