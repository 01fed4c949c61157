"""A subcommand of `python -m specplay`, as vLLM's CLI has them (vllm/entrypoints/cli/types.py): a `name`,
`subparser_init` adding its parser, `cmd` running it. Each module of specplay.cli defines one and lists it
in `cmd_init()`; main.py collects them."""

from __future__ import annotations

import argparse
import sys

EXIT_OK, EXIT_RUN_ERROR, EXIT_BAD_INPUT = 0, 1, 2
EXIT_CODES = "exit codes: 0 ok, 1 the run failed, 2 a bad preset or bad arguments"


class UsageError(Exception):
    """A bad argument, prompt or preset for this machine: main prints it and exits EXIT_BAD_INPUT."""


class CLISubcommand:
    name: str
    help: str = ""
    epilog: str = EXIT_CODES

    def subparser_init(self, subparsers) -> argparse.ArgumentParser:
        parser = subparsers.add_parser(self.name, help=self.help, description=self.help, epilog=self.epilog,
                                       formatter_class=argparse.RawDescriptionHelpFormatter)
        self.add_arguments(parser)
        return parser

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        pass

    def cmd(self, args: argparse.Namespace, pair=None) -> int:
        raise NotImplementedError


def check_runnable(preset, hardware=None, remote: bool = False, here: bool = True):
    """UsageError unless the gate (plan.gate) lets the pair through: it can run on this machine (or on servers
    elsewhere: remote mode), and its draft goes with its target (their config.json files, read before the
    engines take minutes to start). Returns the gate's PairCheck."""
    from specplay.plan.gate import PairRefused, gate

    try:
        return gate(preset, hardware, here=here, remote=remote)
    except PairRefused as exc:
        raise UsageError(str(exc)) from None


def gated_preset(args, default=None, hardware=None, remote: bool = False, here: bool = True):
    """(the preset the command line names, the gate's PairCheck): every command's one way to its pair."""
    from specplay.presets.adhoc import named_preset

    preset = named_preset(args, default)
    return preset, check_runnable(preset, hardware, remote=remote, here=here)


def stderr_log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def console(stream=None):
    """A rich Console that stays plain text when not a terminal (tests and pipes capture it)."""
    from rich.console import Console

    return Console(file=stream or sys.stdout, highlight=False, soft_wrap=False,
                   width=None if (stream or sys.stdout).isatty() else 120)
