"""`python -m specplay presets | serve-cmd | import | compare | prepare | plan | bench | launch | diff`: the playground
without the page.
Each subcommand is a CLISubcommand in its own module (specplay.cli.base); this module holds the
command table and imports only the chosen command's module, so `presets` never loads the bench or the engines
(vLLM's entrypoints/cli keeps one module per command the same way)."""

from __future__ import annotations

import argparse
import importlib
import sys

from specplay.cli.base import EXIT_BAD_INPUT, UsageError

# The command table: name -> the module whose cmd_init() makes it; `--help` lists them in this order.
COMMANDS = {
    "presets": "specplay.cli.presets",
    "serve-cmd": "specplay.cli.serve_cmd",
    "import": "specplay.cli.import_cmd",
    "prepare": "specplay.cli.prepare",
    "compare": "specplay.cli.compare",
    "plan": "specplay.cli.plan",
    "bench": "specplay.cli.bench",
    "launch": "specplay.cli.launch",
    "diff": "specplay.cli.diff",
}
CMD_MODULES = tuple(dict.fromkeys(COMMANDS.values()))


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("spec-decode-playground")
    except PackageNotFoundError:  # run from a checkout without the editable install
        import specplay

        return specplay.__version__


def subcommands(names=None) -> list:
    """The CLISubcommands of `names` (default: every command), importing only their modules."""
    modules = CMD_MODULES if names is None else tuple(dict.fromkeys(COMMANDS[n] for n in names))
    wanted = None if names is None else set(names)
    return [cmd for module in modules for cmd in importlib.import_module(module).cmd_init()
            if wanted is None or cmd.name in wanted]


def chosen(argv: list[str]) -> list[str] | None:
    """The command argv names, when it names one in the table; None (all of them) for --help, --version, no
    command or an unknown one, so argparse lists every choice."""
    first = argv[0] if argv else None
    return [first] if first in COMMANDS else None


def _parser(names=None) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="specplay", description=__doc__.split("\n")[0])
    p.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    sub = p.add_subparsers(dest="command", required=True)
    for cmd in subcommands(names):
        cmd.subparser_init(sub).set_defaults(dispatch=cmd)
    return p


def main(argv: list[str] | None = None, pair=None) -> int:
    """The command line. `pair`: an already started EnginePair for `compare` and `bench` to run on instead of
    starting (and stopping) their own (tests, embedding); it must run the preset asked for."""
    import os

    # vLLM's INFO logs drown the report; VLLM_LOGGING_LEVEL=INFO brings them back.
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")  # stdout is the report (or the JSON)
    from specplay.core.reading import UnreadableInput
    from specplay.presets.catalog import PresetError
    from specplay.presets.offline_model import OfflineModelError

    argv = sys.argv[1:] if argv is None else list(argv)
    args = _parser(chosen(argv)).parse_args(argv)
    try:
        return args.dispatch.cmd(args, pair=pair)
    except (PresetError, OfflineModelError, UsageError, UnreadableInput) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT


def run() -> None:
    """The `specplay` console script."""
    sys.exit(main())
