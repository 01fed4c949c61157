"""A preset's `target` section beyond the keys the playground reads: any engine argument of the installed
vLLM (its EngineArgs fields, read from vLLM's source by engine.vllm_engine_args; no list kept here), given to
both engines verbatim, to the `vllm serve` lines and to `launch`'s servers. A key the vLLM lacks is named
with its close matches; a value of the wrong kind is refused with the field's own help text. Where vLLM
can't be asked (not installed, facts without engine arguments), the keys go to vLLM unjudged: it says.

Also the one rule on what the section may ask of a page others reach: `trust_remote_code` runs the model
repository's Python on the host, so a page served beyond this machine refuses it unless its operator
allows it (remote_code_problem).
"""

from __future__ import annotations

import difflib
from pathlib import Path

from specplay.presets.schema import PresetError, Target

# Engine arguments the preset gives in a section of its own (the playground sets them per engine).
OWN_SECTIONS = {"speculative_config": "the preset's speculative_config section",
                "gpu_memory_utilization": "memory.baseline_gpu_memory_utilization and "
                                          "memory.speculative_gpu_memory_utilization (one per engine)"}
# Of a target's engine arguments, those that name the target's own files: not given to the stepper's draft
# engine (engines.draft_engine_settings), which loads another model with the target's other settings.
TARGET_ONLY = ("revision", "code_revision", "tokenizer", "tokenizer_revision", "hf_config_path",
               "served_model_name", "hf_overrides", "model_weights")
REMOTE_CODE = "trust_remote_code"


class UnknownEngineArgument(PresetError):
    """A target key the vLLM has no engine argument for; `close_matches`: the ones it is close to (a typo)."""

    def __init__(self, message: str, close_matches: tuple[str, ...] = ()):
        super().__init__(message)
        self.close_matches = close_matches


def extra_keys(target: dict) -> list[str]:
    """The keys of a target section (as written) beyond the ones the playground types."""
    return [key for key in target if key not in Target.model_fields]


def _fits(value, arg: dict) -> bool:
    kinds = set(arg.get("kinds") or ("any",))
    if "any" in kinds:
        return True
    if value is None:
        return "none" in kinds
    if isinstance(value, bool):
        return "bool" in kinds
    if isinstance(value, int):
        return bool({"int", "float"} & kinds)
    if isinstance(value, float):
        return "float" in kinds
    if isinstance(value, str):
        return "str" in kinds or ("choice" in kinds and value in arg.get("choices", ()))
    if isinstance(value, list):
        return "list" in kinds
    if isinstance(value, dict):
        return "dict" in kinds
    return False


_KIND_WORDS = {"int": "an int", "float": "a float", "bool": "a bool", "str": "a str", "none": "null",
               "list": "a list", "dict": "a mapping"}


def _expected(arg: dict) -> str:
    """The kinds a field takes, then vLLM's own help for it (what `vllm serve --help` says)."""
    words = [_KIND_WORDS.get(k, k) for k in arg.get("kinds", ()) if k != "choice"]
    if arg.get("choices"):
        words.append(f"one of {', '.join(arg['choices'])}")
    return f"{' or '.join(words)} ({arg.get('help') or 'no help text in vLLM'})"


def check_target(source: Path, target, facts) -> None:
    """Every extra key of a target section against the vLLM of `facts` (engine.vllm_facts.VllmFacts):
    PresetError for a key owned by another section, a wrong kind of value or a typo (close matches);
    UnknownEngineArgument without close matches (a key of another vLLM: the preset loads, and can't run)."""
    if not isinstance(target, dict):
        return
    for key in extra_keys(target):
        if key in OWN_SECTIONS:
            raise PresetError(f"{source.name}: field 'target.{key}': expected it in {OWN_SECTIONS[key]}, "
                              f"got it in target")
    args = getattr(facts, "engine_args", None)
    if not args:
        return
    for key in extra_keys(target):
        arg = args.get(key)
        if arg is None:
            close = tuple(difflib.get_close_matches(str(key), sorted(args), n=3))
            if close:
                raise PresetError(f"{source.name}: field 'target.{key}': expected an engine argument of the "
                                  f"installed vLLM (close matches: {', '.join(close)}), got unknown key {key!r}")
            raise UnknownEngineArgument(f"needs a vLLM whose engine arguments have {key!r}; vLLM {facts.version} "
                                        f"has no such argument")
        if not _fits(target[key], arg):
            raise PresetError(f"{source.name}: field 'target.{key}': expected {_expected(arg)}, "
                              f"got {target[key]!r}")


def engine_extras(target: Target) -> dict:
    """The target's engine arguments beyond the typed ones, as written (vLLM's names, vLLM's values)."""
    return dict(target.model_extra or {})


def remote_code_problem(target: Target, served_to_others: bool, allowed: bool) -> str | None:
    """Why a page can't load this target: `trust_remote_code: true` on a page served to others (a
    non-loopback host, or a share link) runs the model repository's Python for every visitor's load, so
    the operator must allow it (`allowed`: app.py's --allow-remote-code). None where it can load. Asked by
    hosting/options.py for every preset the page would offer: the first one refused stops the app (exit 2),
    the others aren't offered."""
    if not engine_extras(target).get(REMOTE_CODE) or not served_to_others or allowed:
        return None
    return (f"{target.model} sets trust_remote_code: its repository's Python would run on this host for a page "
            "served to others; run the page on 127.0.0.1, or allow it with --allow-remote-code")
