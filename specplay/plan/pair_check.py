"""Do a preset's target and draft go together? Read from their config.json files before any engine loads,
with the planner's own reader (shapes.load_config: a local folder, the cache, a bundled stand-in): a draft
model must have the target's vocabulary (vLLM verifies its tokens as the target's ids, and refuses a
draft_model of another size, unless speculative_config sets use_heterogeneous_vocab: the refusal says so), and
max_model_len must fit both models' positions. A config that can't be had from here is said ("can't check:
..."), never a failure."""

from __future__ import annotations

from dataclasses import dataclass

from specplay.core.reading import UnreadableInput
from specplay.plan.shapes import ConfigUnavailable, load_config
from specplay.presets.models import local_folder, resolve_model

# rope_scaling types whose factor stretches max_position_embeddings (vLLM's _get_and_verify_max_len); the
# others (llama3, longrope, ...) already count their scaled length there.
_STRETCHING_ROPE = ("linear", "dynamic", "yarn")


@dataclass(frozen=True)
class PairCheck:
    mismatch: str | None  # one sentence, naming both numbers: the pair can't run as given
    checked: tuple[str, ...] = ()  # what was compared
    unchecked: tuple[str, ...] = ()  # "can't check: ..." sentences

    def as_dict(self) -> dict:
        return {"mismatch": self.mismatch, "checked": list(self.checked), "unchecked": list(self.unchecked)}


# config.json fields that size the model: where present, each must be a positive integer (bool isn't one)
_SHAPE_FIELDS = ("vocab_size", "max_position_embeddings", "hidden_size", "num_hidden_layers", "num_attention_heads",
                 "num_key_value_heads", "intermediate_size", "head_dim")


def _text(config: dict) -> dict:
    text = config.get("text_config")  # multimodal wrappers keep the LM's in text_config
    return text if isinstance(text, dict) and text else config


def _count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def config_problem(config) -> str | None:
    """Why `config` can't be a model's config.json (one phrase), or None. The reader (core.reading) already
    bounded its size, depth and numbers."""
    if not isinstance(config, dict):
        return f"expected a JSON object, got {type(config).__name__}"
    if config.get("text_config") is not None and not isinstance(config["text_config"], dict):
        return f"text_config is {type(config['text_config']).__name__}, not an object"
    text = _text(config)
    for key in _SHAPE_FIELDS:
        if text.get(key) is not None and not _count(text[key]):
            return f"{key} is {str(text[key])[:20]!r}, not a positive integer"
    rope = text.get("rope_scaling")
    if rope is not None and not isinstance(rope, dict):
        return f"rope_scaling is {type(rope).__name__}, not an object"
    factor = (rope or {}).get("factor")
    if factor is not None and (isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 0 < factor <= 1024):
        return f"rope_scaling.factor is {str(factor)[:20]!r}, not a number from 0 to 1024"
    return None


def max_positions(config: dict) -> int | None:
    text = _text(config)
    n = text.get("max_position_embeddings")
    if not _count(n):
        return None
    rope = text.get("rope_scaling") or {}
    kind = rope.get("rope_type") or rope.get("type") if isinstance(rope, dict) else None
    factor = rope.get("factor") if isinstance(rope, dict) else None
    if kind in _STRETCHING_ROPE and isinstance(factor, (int, float)) and factor > 1:
        n = int(n * factor)
    return n


def vocab(config: dict) -> int | None:
    n = _text(config).get("vocab_size")
    return n if _count(n) else None


class _BadConfig(Exception):
    """A config.json no model could have: check_pair's mismatch."""


def _config(role: str, ref: str, unchecked: list) -> dict | None:
    try:
        config = load_config(ref)[0]
    except ConfigUnavailable as exc:
        unchecked.append(f"can't check: the {role}'s {exc}")
        return None
    except UnreadableInput as exc:
        raise _BadConfig(f"the {role}'s config can't be read: {exc}") from None
    problem = config_problem(config)
    if problem:
        raise _BadConfig(f"the {role}'s config.json ({resolve_model(ref)}): {problem}")
    return config


def _length_mismatch(role: str, ref: str, config: dict, max_len: int, checked: list) -> str | None:
    positions = max_positions(config)
    if positions is None:
        return None
    checked.append(f"max_model_len {max_len:,} within the {role}'s {positions:,} positions")
    if max_len > positions:
        return (f"max_model_len {max_len} is more than the {role}'s max_position_embeddings {positions} "
                f"({resolve_model(ref)}); lower it to {positions} or less")
    return None


HETEROGENEOUS_KEY = "use_heterogeneous_vocab"


def heterogeneous_vocab_note(target_vocab: int, draft_vocab: int) -> str:
    """What was checked of a pair whose vocabularies differ by the preset's leave (use_heterogeneous_vocab)."""
    return (f"vocabularies of {target_vocab:,} (target) and {draft_vocab:,} (draft) tokens differ: allowed by "
            f"{HETEROGENEOUS_KEY} (vLLM drafts greedily from the tokens both share){_installed_lacks_it()}")


def _installed_lacks_it() -> str:
    """'' where the installed vLLM has the key (or can't be asked), else the clause saying it hasn't: asked of
    vLLM's own SpeculativeConfig (presets.capabilities), never of a version list."""
    from specplay.presets.capabilities import installed_facts

    facts = installed_facts()
    if facts is None or HETEROGENEOUS_KEY in facts.fields:
        return ""
    return f"; the installed vLLM {facts.version} has no {HETEROGENEOUS_KEY}, so the pair can't run on it"


def vocab_mismatch(target_ref: str, target_vocab: int, draft_ref: str, draft_vocab: int) -> str:
    """The refusal of a draft model of another vocabulary, with the key that lets vLLM run such a pair."""
    return (f"the draft's vocabulary has {draft_vocab} tokens ({resolve_model(draft_ref)}) and the target's "
            f"{target_vocab} ({resolve_model(target_ref)}): a draft model must share the target's vocabulary, "
            f"unless speculative_config sets {HETEROGENEOUS_KEY}: true (vLLM matches the tokens both share by "
            f"their text; method draft_model, greedy drafts only){_installed_lacks_it()}")


def check_pair(preset) -> PairCheck:
    """The target's length, and a draft model's vocabulary and length, against the preset; a config.json
    no model could have is a mismatch too."""
    checked, unchecked = [], []
    try:
        return _check(preset, checked, unchecked)
    except _BadConfig as exc:
        return PairCheck(str(exc), tuple(checked), tuple(unchecked))


def _check(preset, checked: list, unchecked: list) -> PairCheck:
    max_len, spec = preset.target.max_model_len, preset.speculative_config
    target = _config("target", preset.target.model, unchecked)
    mismatch = _length_mismatch("target", preset.target.model, target, max_len, checked) if target else None
    draft_ref = spec.model if preset.facts.draft == "model" else None
    if not mismatch and isinstance(spec.model, str) and draft_ref is None and local_folder(spec.model) is not None:
        _config("draft", spec.model, [])  # a head's own folder: its config.json sane, nothing to compare
    if mismatch or not isinstance(draft_ref, str):  # heads share the target's embedding: vLLM checks them
        return PairCheck(mismatch, tuple(checked), tuple(unchecked))
    draft = _config("draft", draft_ref, unchecked)
    if draft is None:
        return PairCheck(None, tuple(checked), tuple(unchecked))
    ours, theirs = (vocab(target) if target else None), vocab(draft)
    if ours is not None and theirs is not None:
        checked.append(f"vocabulary of {ours:,} tokens in both")
        if ours != theirs and spec.use_heterogeneous_vocab:
            checked[-1] = heterogeneous_vocab_note(ours, theirs)
        elif ours != theirs:
            return PairCheck(vocab_mismatch(preset.target.model, ours, draft_ref, theirs), tuple(checked),
                             tuple(unchecked))
    elif target is not None:
        unchecked.append("can't check: the vocabularies (a config.json without vocab_size)")
    return PairCheck(_length_mismatch("draft", draft_ref, draft, max_len, checked), tuple(checked), tuple(unchecked))
