"""`serve-cmd`: the `vllm serve` lines a preset stands for."""

from __future__ import annotations

import json

from specplay.cli.base import CLISubcommand
from specplay.core.events import BASELINE, SPECULATIVE


class ServeCommand(CLISubcommand):
    name = "serve-cmd"
    help = "print the `vllm serve` lines a preset corresponds to"
    epilog = "exit codes: 0 ok, 2 no such preset, or a bad preset file or pair"

    def add_arguments(self, parser) -> None:
        from specplay.presets.adhoc import add_arguments as add_own_pair_arguments

        parser.add_argument("--preset", help="a shipped preset's name (or your own pair: below)")
        parser.add_argument("--json", action="store_true", help="print one JSON object: preset, baseline, speculative")
        add_own_pair_arguments(parser)

    def cmd(self, args, pair=None) -> int:
        from specplay.cli.base import gated_preset
        from specplay.presets.engines import serve_commands, serve_notes, serve_texts

        preset, _ = gated_preset(args, here=False)  # the lines are for any machine: only the pair is checked
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
