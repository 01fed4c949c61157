"""A `vllm serve` line (or vLLM's `--config` YAML) read as the installed vLLM reads it: its own parser
(`vllm serve`'s, built without a GPU), its own `AsyncEngineArgs.from_cli_args`, then only the engine arguments
that differ from what `vllm serve MODEL` alone gives, as plain values. What `specplay import` turns into a
preset, and what its round-trip test reads `serve-cmd`'s lines back with: one reader for both sides.

Nothing is parsed by hand that vLLM parses: flags, `--no-...` booleans, JSON configs, `--config` files (their
keys spliced in by vLLM's own rule, cli > config). A user's config file is read here bounded
(core.reading), never by vLLM: vLLM gets a copy of the checked data, written by us.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import shlex
import tempfile
from pathlib import Path

import yaml

from specplay.core.reading import OPTION_MAX_BYTES, UnreadableInput, load_yaml

# What a serve line's words hold besides flags: `vllm serve` puts the model in model_tag, the subcommand's
# own bookkeeping in these; none is an engine argument or a server option a user sets.
_BOOKKEEPING = {"model_tag", "subparser", "dispatch_function", "config"}


class ServeLineError(ValueError):
    """A serve line or config vLLM's own parser refuses (an unknown flag, a bad value, no model): one line."""


@dataclasses.dataclass(frozen=True)
class ServeArgs:
    """A serve line as vLLM reads it: the environment in front of it, the engine arguments that differ from
    vLLM's defaults (model always, `speculative_config` a dict), and the server's own options that are no
    engine argument (--port, --host: a preset doesn't hold them), as flags."""

    env: dict
    engine_args: dict
    server_options: tuple[str, ...]
    notes: tuple[str, ...] = ()  # what vLLM read otherwise than it is written, one sentence each


def _parser_class():
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    class RaisingParser(FlexibleArgumentParser):
        """vLLM's parser, saying what it refuses instead of printing usage and exiting the process."""

        def error(self, message):
            raise ServeLineError(" ".join(str(message).split()))

    return RaisingParser


@functools.lru_cache(maxsize=1)
def _serve_parser():
    """(the top parser, `vllm serve`'s subcommand) as the `vllm` command builds them."""
    from vllm.entrypoints.cli.serve import ServeSubcommand

    parser = _parser_class()(prog="vllm")
    command = ServeSubcommand()
    command.subparser_init(parser.add_subparsers(dest="subparser"))
    return parser, command


def _plain(value):
    """An engine argument's value as a preset holds it (YAML): enums by their name (as vLLM's CLI and
    configs take them: `cudagraph_mode: NONE`), config objects by their fields."""
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, (list, tuple, set)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if hasattr(value, "model_dump"):
        return _plain(value.model_dump())
    return value


def _changed(value, default):
    """The part of `value` that differs from `default`: a config object's changed fields only."""
    value, default = _plain(value), _plain(default)
    if isinstance(value, dict) and isinstance(default, dict) and value.keys() == default.keys():
        return {k: _changed(v, default[k]) for k, v in value.items() if v != default[k]}
    return value


def _namespace(words: list[str]):
    """vLLM's namespace for `serve` + words, checked by the subcommand as `vllm serve` checks it."""
    parser, command = _serve_parser()
    if any(w in ("-h", "--help", "--version") or w.startswith("--help=") for w in words):  # argparse would print
        raise ServeLineError("asks vLLM for --help or --version, not for a server")
    try:
        args = parser.parse_args(["serve", *words])
        if getattr(args, "model_tag", None):
            args.model = args.model_tag  # what `vllm serve MODEL` does
        command.validate(args)
    except ServeLineError:
        raise
    except SystemExit as exc:  # an action that exits (none is left but argparse's own): never the caller's process
        raise ServeLineError(f"vLLM's parser exited ({exc.code})") from None
    except (ValueError, TypeError, KeyError, AssertionError, RecursionError) as exc:
        raise ServeLineError(" ".join(str(exc).split()) or type(exc).__name__) from None
    return args


def _plain_data(value) -> bool:
    """Whether a preset file (YAML) can hold `value` as it is."""
    if isinstance(value, (list, tuple)):
        return all(_plain_data(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain_data(v) for k, v in value.items())
    return value is None or isinstance(value, (str, int, float, bool))


def _fold_spec_flags(args: dict) -> dict:
    """--spec-method/--spec-model/--spec-tokens into speculative_config, as EngineArgs.create_speculative_config
    does when the engine starts (same rule: a key given both ways is refused)."""
    flags = (("spec_method", "method"), ("spec_model", "model"), ("spec_tokens", "num_speculative_tokens"))
    given = {key: args.pop(field) for field, key in flags if args.get(field) is not None}
    for field, _ in flags:
        args.pop(field, None)
    if not given and args.get("speculative_config") is None:
        return args
    spec = {str(k).replace("-", "_"): v for k, v in (args.get("speculative_config") or {}).items()}
    clash = sorted(set(given) & set(spec))
    if clash:
        raise ServeLineError(f"--spec-* and --speculative-config both give {clash[0]!r}: vLLM refuses that")
    args["speculative_config"] = {**spec, **given}
    return args


def _read(words: list[str], env: dict) -> ServeArgs:
    from vllm import AsyncEngineArgs

    args = _namespace(words)
    model = getattr(args, "model", None)
    if not model:
        raise ServeLineError("no model: `vllm serve MODEL ...` (or `model:` in the config file)")
    defaults = _namespace([model])
    names = {f.name for f in dataclasses.fields(AsyncEngineArgs)}
    try:
        given, default = AsyncEngineArgs.from_cli_args(args), AsyncEngineArgs.from_cli_args(defaults)
    except (ValueError, TypeError) as exc:
        raise ServeLineError(" ".join(str(exc).split())) from None
    engine_args = {"model": model}
    for name in sorted(names - {"model"}):
        if getattr(given, name) != getattr(default, name):
            engine_args[name] = _changed(getattr(given, name), getattr(default, name))
            if not _plain_data(engine_args[name]):
                raise ServeLineError(f"--{name.replace('_', '-')}: a value a preset file can't hold "
                                     f"({type(getattr(given, name)).__name__})")
    server = [f"--{key.replace('_', '-')}" for key, value in sorted(vars(args).items())
              if key not in names | _BOOKKEEPING and value != getattr(defaults, key, None)]
    return ServeArgs(env, _fold_spec_flags(engine_args), tuple(server))


def read_serve_line(text: str) -> ServeArgs:
    """A `vllm serve MODEL --flag ...` line, as a shell gives it (quotes, `NAME=value` in front), read by the
    installed vLLM's parser; ServeLineError of one line for anything it refuses."""
    if len(text) > OPTION_MAX_BYTES:
        raise ServeLineError(f"over {OPTION_MAX_BYTES // 1024} KiB; a serve line is one command")
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise ServeLineError(f"not a shell line ({exc})") from None
    env = {}
    while words and "=" in words[0] and not words[0].startswith("-"):
        key, value = words.pop(0).split("=", 1)
        env[key] = value
    if words[:2] != ["vllm", "serve"]:
        raise ServeLineError(f"expected `vllm serve MODEL ...`, got {' '.join(words[:2])!r}")
    if any(w == "--config" or w.startswith("--config=") for w in words):
        raise ServeLineError("--config FILE in a serve line: give the file with --vllm-config FILE")
    if (len(words) < 3 or words[2].startswith("-")) and not any(w.split("=")[0] == "--model" for w in words):
        raise ServeLineError("no model: `vllm serve MODEL ...` (vLLM would serve its own default model)")
    return _read(words[2:], env)


def _dropped_falses(data: dict) -> list[str]:
    """The config's `KEY: false` for a --KEY/--no-KEY flag whose default isn't false: `vllm serve --config`
    reads the file on its top parser, which has no --no-KEY, so vLLM drops them (vllm#51401's fix reaches
    only parsers that have it) and the default stays."""
    actions = _serve_parser()[0]._subparsers._group_actions[0].choices["serve"]._option_string_actions
    flags = {key: actions.get("--no-" + key.replace("_", "-")) for key, value in data.items() if value is False}
    return [key for key, action in flags.items() if action is not None and action.default is not False]


def read_vllm_config(path, model: str | None = None) -> ServeArgs:
    """vLLM's `--config` YAML (`vllm serve [MODEL] --config FILE`: flat keys as flags, nested ones as JSON),
    read bounded, then given to vLLM's parser as `--config` on a copy we write; `model` in front, as the
    command line's MODEL (it wins over the file's `model:`, as in vLLM)."""
    what = f"--vllm-config: {path}"
    try:
        data = load_yaml(path, OPTION_MAX_BYTES, what)
    except UnreadableInput as exc:
        raise ServeLineError(str(exc)) from None
    if not isinstance(data, dict) or not all(isinstance(k, str) for k in data):
        raise ServeLineError(f"{what}: expected a mapping of vllm serve options, as --config takes it")
    if not model and not data.get("model"):
        raise ServeLineError(f"{what}: no model (a `model:` key, or --model M)")
    with tempfile.TemporaryDirectory() as folder:
        copy = Path(folder) / "config.yaml"
        copy.write_text(yaml.safe_dump(data))
        read = _read(([model] if model else []) + ["--config", str(copy)], {})
    dropped = [key for key in _dropped_falses(data) if key.replace("-", "_") not in read.engine_args]
    if not dropped:
        return read
    note = (f"{', '.join(f'{k}: false' for k in dropped)}: `vllm serve --config` drops a false flag (its default "
            f"stays), so the preset does too; --no-{dropped[0].replace('_', '-')} on the command line is what sets it")
    return dataclasses.replace(read, notes=(note,))
