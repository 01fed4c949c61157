"""The bench's prediction from measured pass times, beside the one that assumes a verify step costs one
plain forward pass (`predicted_speedup`, 1 + Σ aⁱ). Per row, with t_b the baseline's step time and t_s the
speculative one's: a speculative step is a verify pass (taken to cost t_b) plus the method's draft passes,
so the drafts cost (t_s − t_b) / t_b target steps in all, and the speedup to expect is the tokens a step
yields over t_s / t_b. Pure arithmetic on numbers the bench measured."""

from __future__ import annotations

from specplay.presets.methods import facts_of_kind
from specplay.presets.speculation import Speculation


def draft_passes(kind: str, k: int) -> int | None:
    """Draft forward passes in one speculative step, from the method table (presets.methods) by kind: none
    for a lookup drafter (n-gram, suffix), one for all k when drafting in parallel ("pard", DFlash, DSpark),
    else one per drafted token; None for a method the table doesn't know."""
    return facts_of_kind(kind).draft_passes(k)


def preset_draft_passes(speculative_config: Speculation, k: int) -> int | None:
    """The same for a preset's speculative_config."""
    return speculative_config.facts.draft_passes(k)


def measured_prediction(baseline_step_s: float | None, speculative_step_s: float | None, passes: int | None,
                        tokens_per_step: float | None) -> dict:
    """{"draft_pass_cost": one draft pass as a fraction of a baseline step (None without draft passes),
    "predicted_speedup_measured": tokens_per_step / (t_s / t_b)}; None where a time is missing."""
    if not baseline_step_s or not speculative_step_s or passes is None:
        return {"draft_pass_cost": None, "predicted_speedup_measured": None}
    cost = speculative_step_s / baseline_step_s
    return {"draft_pass_cost": (cost - 1) / passes if passes else None,
            "predicted_speedup_measured": tokens_per_step / cost if tokens_per_step else None}


def cost_sentence(row) -> str:
    """Which term of the step cost eats the gain, from a bench row's measured times ("" when unknown)."""
    passes, cost, gain = row.draft_passes, row.step_cost_ratio, row.tokens_per_step_ratio
    if passes is None or not cost or not gain:
        return ""
    extra, bought = cost - 1, gain - 1  # target steps the drafting adds; tokens a step gains
    if passes:
        each = row.draft_pass_cost
        term = (f"the {passes} draft pass{'es' if passes > 1 else ''} cost {extra:.2f} target steps"
                + (f" ({each:.2f} each)" if passes > 1 and each is not None else ""))
    else:
        term = f"verifying the drafts costs {extra:.2f} target steps (there is no draft pass)"
    who = "drafting" if passes else "verification"
    effect = ("eats the whole gain" if extra >= bought else "eats most of the gain" if extra > bought / 2
              else "leaves most of the gain")
    return (f" Measured pass times: {term}, {'more' if extra >= bought else 'less'} than the {bought:.2f} extra "
            f"tokens a step yields: {who} {effect}.")
