"""`python -m specplay presets | serve-cmd | compare | prepare | plan | bench`: the playground without the page.
Each subcommand is a CLISubcommand in its own module (specplay.cli.base); this module only collects them."""

from __future__ import annotations

import argparse
import sys

from specplay.cli.base import EXIT_BAD_INPUT, UsageError

# In the order `--help` lists them.
CMD_MODULES = ("specplay.cli.presets", "specplay.cli.serve_cmd", "specplay.cli.prepare", "specplay.cli.compare",
               "specplay.cli.plan", "specplay.cli.bench", "specplay.cli.launch")


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("spec-decode-playground")
    except PackageNotFoundError:  # run from a checkout without the editable install
        import specplay

        return specplay.__version__


def subcommands() -> list:
    import importlib

    return [cmd for name in CMD_MODULES for cmd in importlib.import_module(name).cmd_init()]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="specplay", description=__doc__.split("\n")[0])
    p.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    sub = p.add_subparsers(dest="command", required=True)
    for cmd in subcommands():
        cmd.subparser_init(sub).set_defaults(dispatch=cmd)
    return p


def main(argv: list[str] | None = None, pair=None) -> int:
    """The command line. `pair`: an already started EnginePair for `compare` and `bench` to run on instead of
    starting (and stopping) their own (tests, embedding); it must run the preset asked for."""
    import os

    # vLLM's INFO logs drown the report; VLLM_LOGGING_LEVEL=INFO brings them back.
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")  # stdout is the report (or the JSON)
    from specplay.presets.catalog import PresetError
    from specplay.presets.offline_model import OfflineModelError

    args = _parser().parse_args(argv)
    try:
        return args.dispatch.cmd(args, pair=pair)
    except (PresetError, OfflineModelError, UsageError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT


def run() -> None:
    """The `specplay` console script."""
    sys.exit(main())
