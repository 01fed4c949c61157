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
        from specplay.presets.catalog import get_preset
        from specplay.presets.engines import serve_commands, serve_notes, serve_texts

        preset = get_preset(args.preset)
        if args.json:
            lines = serve_commands(preset)
            print(json.dumps({"preset": preset.name, "description": preset.description,
                              BASELINE: lines[BASELINE], SPECULATIVE: lines[SPECULATIVE],
                              "notes": {role: serve_notes(preset, role) for role in (BASELINE, SPECULATIVE)}}))
            return 0
        texts = serve_texts(preset)
        print(f"# {preset.name}: {preset.description}")
        print(f"# baseline\n{texts[BASELINE]}\n# speculative\n{texts[SPECULATIVE]}")
        return 0


def cmd_init() -> list[CLISubcommand]:
    return [ServeCommand()]
