"""What each of vLLM's verifiers (`speculative_config.rejection_sample_method`) promises at temperature 0, in
one table: whether the speculative output is the target's own, and, where it isn't, the one sentence that
says why outputs differ (the page's badge, `compare`'s verdict, the run JSON's `verifier_exact`). Which names
exist is the installed vLLM's (`engine.probes.vllm_facts`); a name this table doesn't know gets neutral facts.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT = "standard"  # vLLM's default when speculative_config names none
SYNTHETIC = "synthetic"  # the dummy-* presets' verifier: acceptance set by the preset


@dataclass(frozen=True)
class Verifier:
    name: str
    exact: bool | None  # at T=0 the speculative output is the target's own; None: not known to the playground
    reads_target: bool = True  # accepts by the target's probabilities (synthetic doesn't: no near-tie to show)
    why_different: str | None = None  # why outputs differ at T=0 by design; None: only numerics can do it


VERIFIERS = {v.name: v for v in (
    Verifier("standard", True),
    # lossless joint verification: at T=0 it accepts exactly what the standard verifier does; it can accept more
    # only when sampling (measured on the H200: the same tokens per step as standard at T=0, 14/14 identical)
    Verifier("block", True),
    Verifier(SYNTHETIC, False, reads_target=False, why_different=(
        "Why: this preset accepts drafted tokens synthetically (dummy weights), so outputs differ by design; "
        "watch the speed, not the text.")),
    Verifier("fly", False, why_different=(
        "Why: this preset verifies with FLy (rejection_sample_method: fly), which vLLM calls lossy: where the "
        "target is unsure (its top tokens' entropy above fly_entropy_threshold) and the next drafts agree, it "
        "accepts a drafted token the target would not have picked. It trades exactness for speed, so outputs "
        "differ by design, even at temperature 0.")),
)}


def verifier_named(name: str | None) -> Verifier:
    name = name or DEFAULT
    return VERIFIERS.get(name) or Verifier(name, None, why_different=(
        f"Why: this preset verifies with {name!r} (rejection_sample_method), which the playground doesn't know; "
        "whether it keeps the target's output exact is for vLLM's documentation of it to say."))


def verifier_of(speculative_config) -> Verifier:
    """The verifier of a typed speculative_config (presets.speculation.Speculation), or of vLLM's keys as
    written (a dict, before they are typed; None: vLLM's default)."""
    if speculative_config is None or isinstance(speculative_config, dict):
        return verifier_named((speculative_config or {}).get("rejection_sample_method"))
    return verifier_named(speculative_config.rejection_sample_method)


def is_synthetic(speculative_config) -> bool:
    """Synthetic acceptance (the dummy-* presets): speed figures only, acceptance set by the preset."""
    return verifier_of(speculative_config).name == SYNTHETIC
