"""`serve-cmd`: the `vllm serve` lines a preset stands for."""

from __future__ import annotations

import json

from specplay.cli.base import CLISubcommand
from specplay.core.events import BASELINE, SPECULATIVE


class ServeCommand(CLISubcommand):
    name = "serve-cmd"
    help = "print the `vllm serve` lines a preset corresponds to"
    epilog = "exit codes: 0 ok, 2 no such preset"

    def add_arguments(self, parser) -> None:
        parser.add_argument("--preset", required=True)
        parser.add_argument("--json", action="store_true", help="print one JSON object: preset, baseline, speculative")

    def cmd(self, args, pair=None) -> int:
        from specplay.presets.catalog import get_preset, serve_commands

        preset = get_preset(args.preset)
        lines = serve_commands(preset)
        if args.json:
            print(json.dumps({"preset": preset.name, "description": preset.description,
                              BASELINE: lines[BASELINE], SPECULATIVE: lines[SPECULATIVE]}))
            return 0
        print(f"# {preset.name}: {preset.description}")
        print(f"# baseline\n{lines[BASELINE]}\n# speculative\n{lines[SPECULATIVE]}")
        return 0


def cmd_init() -> list[CLISubcommand]:
    return [ServeCommand()]
