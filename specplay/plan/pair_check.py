"""Do a preset's target and draft go together? Read from their config.json files before any engine loads,
with the planner's own reader (shapes.load_config: a local folder, the cache, a bundled stand-in): a draft
model must have the target's vocabulary (vLLM verifies its tokens as the target's ids, and refuses a
draft_model of another size), and max_model_len must fit both models' positions. A config that can't be
had from here is said ("can't check: ..."), never a failure."""

from __future__ import annotations

from dataclasses import dataclass

from specplay.plan.shapes import ConfigUnavailable, load_config
from specplay.presets.models import resolve_model

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


def _text(config: dict) -> dict:
    return config.get("text_config") or config  # multimodal wrappers keep the LM's in text_config


def max_positions(config: dict) -> int | None:
    text = _text(config)
    n = text.get("max_position_embeddings")
    if not isinstance(n, int):
        return None
    rope = text.get("rope_scaling") or {}
    kind = rope.get("rope_type") or rope.get("type") if isinstance(rope, dict) else None
    factor = rope.get("factor") if isinstance(rope, dict) else None
    if kind in _STRETCHING_ROPE and isinstance(factor, (int, float)) and factor > 1:
        n = int(n * factor)
    return n


def vocab(config: dict) -> int | None:
    n = _text(config).get("vocab_size")
    return n if isinstance(n, int) else None


def _config(role: str, ref: str, unchecked: list) -> dict | None:
    try:
        return load_config(ref)[0]
    except ConfigUnavailable as exc:
        unchecked.append(f"can't check: the {role}'s {exc}")
        return None


def _length_mismatch(role: str, ref: str, config: dict, max_len: int, checked: list) -> str | None:
    positions = max_positions(config)
    if positions is None:
        return None
    checked.append(f"max_model_len {max_len:,} within the {role}'s {positions:,} positions")
    if max_len > positions:
        return (f"max_model_len {max_len} is more than the {role}'s max_position_embeddings {positions} "
                f"({resolve_model(ref)}); lower it to {positions} or less")
    return None


def check_pair(preset) -> PairCheck:
    """The target's length, and a draft model's vocabulary and length, against the preset."""
    checked, unchecked = [], []
    max_len, spec = preset.target.max_model_len, preset.speculative_config
    target = _config("target", preset.target.model, unchecked)
    mismatch = _length_mismatch("target", preset.target.model, target, max_len, checked) if target else None
    draft_ref = spec.model if preset.facts.draft == "model" else None
    if mismatch or not isinstance(draft_ref, str):  # heads share the target's embedding: vLLM checks them
        return PairCheck(mismatch, tuple(checked), tuple(unchecked))
    draft = _config("draft", draft_ref, unchecked)
    if draft is None:
        return PairCheck(None, tuple(checked), tuple(unchecked))
    ours, theirs = (vocab(target) if target else None), vocab(draft)
    if ours is not None and theirs is not None:
        checked.append(f"vocabulary of {ours:,} tokens in both")
        if ours != theirs:
            return PairCheck(f"the draft's vocabulary has {theirs} tokens ({resolve_model(draft_ref)}) and the "
                             f"target's {ours} ({resolve_model(preset.target.model)}): a draft model must share "
                             "the target's vocabulary",
                             tuple(checked), tuple(unchecked))
    elif target is not None:
        unchecked.append("can't check: the vocabularies (a config.json without vocab_size)")
    return PairCheck(_length_mismatch("draft", draft_ref, draft, max_len, checked), tuple(checked), tuple(unchecked))
