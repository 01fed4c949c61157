"""`presets`: what the catalog offers and whether each preset runs on this machine."""

from __future__ import annotations

import json

from specplay.cli.base import CLISubcommand, console


class PresetsCommand(CLISubcommand):
    name = "presets"
    help = "list presets: method, k, and whether each can run here"
    epilog = "exit codes: 0 ok, 2 a preset file is invalid"

    def add_arguments(self, parser) -> None:
        parser.add_argument("--json", action="store_true", help="print one JSON object: the machine and the presets")

    def cmd(self, args, pair=None) -> int:
        from rich.table import Table

        from specplay.core.hardware import detect
        from specplay.presets.catalog import availability, default_preset_name, load_presets

        hw = detect()
        presets = load_presets()
        default = default_preset_name(hw, presets)
        rows = []
        for p in presets.values():
            a = availability(p, hw)
            rows.append({"name": p.name, "default": p.name == default, "method": p.method,
                         "k": p.num_speculative_tokens, "runnable": a.runnable, "reason": a.reason,
                         "description": p.description})
        if args.json:
            print(json.dumps({"machine": hw.describe(), "presets": rows}))
            return 0
        out = console()
        out.print(f"this machine: {hw.describe()}\n")
        table = Table("preset", "method", "k", "runs here / description", box=None, pad_edge=False)
        for r in rows:
            table.add_row(r["name"] + (" (default)" if r["default"] else ""), r["method"], str(r["k"]),
                          f"{'yes' if r['runnable'] else 'no'}: {r['reason']}\n{r['description']}")
        out.print(table)
        return 0


def cmd_init() -> list[CLISubcommand]:
    return [PresetsCommand()]
