"""Every file the playground reads from a user (a preset, a model's config.json, a bench dataset, a lesson,
app.py's --config, a recording, a bench.json, a GGUF's header) is read here, bounded: a regular file only (a
FIFO would hang the read, a device never ends), at most `cap` bytes (found by reading cap+1, never by trusting
a stat: /proc files and growing files lie), YAML without aliases (a 9-level alias bomb expands to gigabytes
from a few hundred bytes), nesting at most MAX_DEPTH deep (the composer and json recurse: 20,000 levels is a
RecursionError), finite numbers and integers that fit 64 bits (10^5000 breaks int() and every message that
prints it). Each refusal is an UnreadableInput of one line naming the file; a file read through a pydantic
model names its first bad field (`first_error`). The byte cap of each kind is defined here, once."""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path

import yaml

KIB, MIB = 1024, 1024 * 1024
PRESET_MAX_BYTES = 1 * MIB  # a preset or a lesson: a few KB of YAML
CONFIG_MAX_BYTES = 4 * MIB  # a model's config.json: the largest known run to tens of KB
DATASET_MAX_BYTES = 10 * MIB  # a bench workload or dataset (SpecBench's question.jsonl is ~0.1 MB)
OPTION_MAX_BYTES = 64 * KIB  # app.py --config, --auth-file, --speculative-config
RECORDING_MAX_BYTES = 32 * MIB  # compare --record's file: a run of MAX_TOKENS tokens with its step detail is far less
BENCH_MAX_BYTES = 8 * MIB  # a bench.json (--replot, diff): a sweep's rows are tens of KB
GGUF_HEADER_MAX_BYTES = 32 * MIB  # a GGUF's metadata and tensor list, not its weights (Llama 3's: ~8 MB)
MAX_DEPTH = 64  # no preset, config.json or dataset row nests anywhere near this
INT_LIMIT = 2**63  # ints past int64 are no count, length or id any engine takes


class UnreadableInput(ValueError):
    """A file or value refused before (or while) parsing it; the message is one line naming it."""


def _fail(what: str, why: str) -> UnreadableInput:
    return UnreadableInput(" ".join(f"{what}: {why}".split()))


def open_regular(path, what: str | None = None):
    """A regular file opened for binary reading (the caller closes it, and bounds what it reads);
    UnreadableInput otherwise (missing, a folder, a FIFO or device, a symlink to one, unreadable)."""
    path = Path(path).expanduser()
    what = what or str(path)
    try:
        mode = os.stat(path).st_mode  # before open: opening a FIFO blocks until a writer comes
    except OSError as exc:
        raise _fail(what, "no such file" if isinstance(exc, FileNotFoundError) else f"can't read it ({exc.strerror})") from None
    if stat.S_ISDIR(mode):
        raise _fail(what, "no such file (a folder)")
    if not stat.S_ISREG(mode):
        raise _fail(what, "not a regular file (a pipe, socket or device is never read)")
    try:
        f = os.fdopen(os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)), "rb")
    except OSError as exc:
        raise _fail(what, f"can't read it ({exc.strerror or type(exc).__name__})") from None
    if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):  # swapped between the stat and the open
        f.close()
        raise _fail(what, "not a regular file")
    return f


def read_bytes(path, cap: int, what: str | None = None) -> bytes:
    """The bytes of a regular file of at most `cap` bytes; UnreadableInput otherwise (missing, a folder, a
    FIFO or device, over the cap, unreadable)."""
    what = what or str(Path(path).expanduser())
    with open_regular(path, what) as f:
        try:
            data = f.read(cap + 1)
        except OSError as exc:
            raise _fail(what, f"can't read it ({exc.strerror or type(exc).__name__})") from None
    if len(data) > cap:
        raise _fail(what, f"over the {size_text(cap)} limit for this kind of file")
    return data


def read_text(path, cap: int, what: str | None = None) -> str:
    data = read_bytes(path, cap, what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _fail(what or str(path), f"not UTF-8 text (byte {exc.start})") from None


def size_text(n: int) -> str:
    return f"{n // MIB} MiB" if n >= MIB else f"{n // KIB} KiB" if n >= KIB else f"{n} bytes"


class _NoAliasLoader(yaml.SafeLoader):
    """SafeLoader that refuses aliases and nesting past MAX_DEPTH while composing (before anything expands)."""

    def __init__(self, stream):
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(None, None, "aliases (*name) are not accepted", event.start_mark)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise yaml.composer.ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels",
                                                  self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def yaml_loader():
    """The Loader class for yaml.load / yaml.compose on user text (aliases refused, depth bounded)."""
    return _NoAliasLoader


def parse_yaml(text: str, what: str):
    """YAML text as Python data, bounded; UnreadableInput naming the line of the first problem."""
    try:
        data = yaml.load(text, Loader=_NoAliasLoader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" (line {mark.line + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "syntax error"
        raise _fail(what, f"not valid YAML{line}: {problem}") from None
    except (ValueError, RecursionError, MemoryError) as exc:  # an int past Python's 4,300 digits
        raise _fail(what, f"not valid YAML ({type(exc).__name__})") from None
    check_values(data, what)
    return data


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > 19:  # before int(): 10^5000 is slow to convert and past int64 anyway
        raise ValueError(f"an integer of {len(text)} digits")
    return int(text)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"a number too large ({text[:20]})")
    return value


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


def parse_json(text: str, what: str):
    """JSON text as Python data, bounded: no NaN/Infinity, no 1e309, no 20-digit ints, depth <= MAX_DEPTH."""
    try:
        data = json.loads(text, parse_int=_bounded_int, parse_float=_finite_float, parse_constant=_no_constant)
    except RecursionError:
        raise _fail(what, f"not valid JSON: nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:
        detail = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise _fail(what, f"not valid JSON ({detail})") from None
    check_values(data, what)
    return data


def check_values(data, what: str) -> None:
    """UnreadableInput if `data` nests past MAX_DEPTH, holds a non-finite float or an int past int64."""
    problem = value_problem(data)
    if problem:
        raise _fail(what, problem)


def value_problem(data) -> str | None:
    """Why `data` is out of bounds (nested past MAX_DEPTH, a non-finite float, an int past int64), or None
    (iterative: a deep value can't recurse here)."""
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            return f"nested deeper than {MAX_DEPTH} levels"
        if isinstance(value, bool):
            continue
        if isinstance(value, int) and not -INT_LIMIT <= value < INT_LIMIT:
            return "an integer too large (past 64 bits)"
        if isinstance(value, float) and not math.isfinite(value):
            return "a number that isn't finite (inf or nan)"
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in (*value.keys(), *value.values()))
        elif isinstance(value, (list, tuple)):
            stack.extend((v, depth + 1) for v in value)
    return None


def load_yaml(path, cap: int = PRESET_MAX_BYTES, what: str | None = None):
    return parse_yaml(read_text(path, cap, what), what or str(path))


def load_json(path, cap: int = CONFIG_MAX_BYTES, what: str | None = None):
    return parse_json(read_text(path, cap, what), what or str(path))


def first_error(what: str, exc) -> str:
    """One line for a pydantic ValidationError of the file `what`: the first bad field's place in it (its
    loc), and why (pydantic's own message has a line per error)."""
    errors = exc.errors(include_url=False)
    error = errors[0]
    where = ".".join(str(part) for part in error["loc"])
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    if error["type"] == "json_invalid":
        return " ".join(f"{what}: not JSON ({error['msg']}){more}".split())
    return " ".join(f"{what}: {where or '(top)'}: {error['msg']}{more}".split())
