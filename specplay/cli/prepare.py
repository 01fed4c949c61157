"""`prepare`: the offline models built into the project cache."""

from __future__ import annotations

from specplay.cli.base import CLISubcommand


class PrepareCommand(CLISubcommand):
    name = "prepare"
    help = "build the offline models into the project cache (idempotent)"
    epilog = "exit codes: 0 ok, 2 an offline model can't be built"

    def cmd(self, args, pair=None) -> int:
        from specplay.presets.offline_model import ensure_offline_models

        for name, path in ensure_offline_models().items():
            print(f"{name}: {path}")
        return 0


def cmd_init() -> list[CLISubcommand]:
    return [PrepareCommand()]
