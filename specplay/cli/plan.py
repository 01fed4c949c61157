"""`plan`: will the preset's two engines fit in memory? (the plan layer's arguments and report)"""

from __future__ import annotations

from specplay.cli.base import CLISubcommand, UsageError


class PlanCommand(CLISubcommand):
    name = "plan"
    help = "will the preset's two engines fit in memory?"
    epilog = "exit codes: 0 they fit, 3 they don't, 4 can't tell, 2 a bad preset or bad arguments"

    def add_arguments(self, parser) -> None:
        from specplay.plan.cli import add_arguments

        add_arguments(parser)

    def cmd(self, args, pair=None) -> int:
        from specplay.plan.cli import run_cli

        try:
            return run_cli(args)
        except SystemExit as exc:  # plan's argument checks exit with a message: a bad argument, 2
            if isinstance(exc.code, str):
                raise UsageError(exc.code) from None
            raise


def cmd_init() -> list[CLISubcommand]:
    return [PlanCommand()]
