"""python -m specplay plan: print a preset's memory plan; the exit status says whether it fits."""

from __future__ import annotations

import json
import os
import sys

from specplay.core.hardware import Hardware, detect

EXIT_FITS, EXIT_DOES_NOT_FIT, EXIT_UNKNOWN = 0, 3, 4


def add_arguments(parser) -> None:
    from specplay.presets.adhoc import add_arguments as add_own_pair_arguments

    parser.add_argument("--preset", help="a shipped preset's name (or your own pair: below)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--gpu-gib", type=float, default=None,
                        help="plan for GPUs of this much memory (GiB) instead of this machine's")
    parser.add_argument("--gpus", type=int, default=None, help="with --gpu-gib: how many (default: the preset's)")
    parser.add_argument("--free-gib", type=float, default=None, help="with --gpu-gib: free memory per GPU (default: all)")
    parser.add_argument("--ram-gib", type=float, default=None, help="plan the CPU engines against this much available RAM")
    add_own_pair_arguments(parser)


def run_cli(args) -> int:
    """Print the plan; exit 0 when it fits, 3 when it doesn't, 4 when it can't tell (a config is missing); a
    draft and target that don't go together are refused first, naming both numbers (SystemExit: exit 2)."""
    from specplay.plan.memory import MachineMemory, plan
    from specplay.plan.gate import PairRefused, gate
    from specplay.plan.report import format_plan
    from specplay.presets.adhoc import named_preset

    preset = named_preset(args)
    try:
        pair = gate(preset, here=False)  # a plan is for any machine: only the pair itself is checked
    except PairRefused as exc:
        raise SystemExit(str(exc)) from None
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
    if args.json:
        print(json.dumps({**result.as_dict(), "pair_check": pair.as_dict()}))
    else:
        print(format_plan(result))
        print("\n".join([f"draft and target: {'; '.join(pair.checked)}"] * bool(pair.checked) + list(pair.unchecked)))
    if result.device == "cpu" and preset.device == "gpu":
        print(f"(--gpu-gib N plans {preset.name} for GPUs of N GiB)", file=sys.stderr)
    if not result.complete:
        return EXIT_UNKNOWN
    return EXIT_FITS if result.fits else EXIT_DOES_NOT_FIT
