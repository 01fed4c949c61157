"""Why a run was as fast as it was. The speedup splits exactly into two measured factors:

    speedup = tokens_per_step_ratio / step_cost_ratio
            = (speculative tokens per step ÷ baseline's) / (speculative step time ÷ baseline's)

The first is what acceptance buys, the second what a speculative step costs (drafting plus verifying
k+1 tokens). `explain()` picks one sentence from the figures that says which factor decides and, when the
run loses, what would help. On the concurrent schedule the step time also holds what sharing the hardware
cost (specplay.run.sharing): the sentence names it, and reads the draft's share only from the stretch
where both engines ran beside each other, once a solo stretch has measured the sharing; without one it
says the step time includes the sharing and blames nothing of it on the draft. Pure logic: no vLLM, no Gradio.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from specplay.core.events import BASELINE, SPECULATIVE
from specplay.presets import capabilities
from specplay.presets.methods import K_DRAFT_PASSES, facts_of_kind
from specplay.run.noise import Noise, cost_below_one_clause, noise_sentence, within_noise
from specplay.run.sharing import Sharing, sharing_of

PAYS = 1.05  # above this the run counts as a win, below 1/PAYS as a loss
WEAK_GAIN = 1.25  # fewer than a quarter of a token extra per step: drafts are rarely accepted
HEAVY_COST = 1.25  # a speculative step a quarter longer than a plain one is expensive
# A decode step reads every weight once, so weight bytes ÷ memory bandwidth is its floor. A step well above a
# small floor is mostly fixed per-step overhead (launches, scheduling), which drafting adds to.
OVERHEAD_BOUND = 2.0  # measured step > this × the floor
SMALL_FLOOR_S = 0.002  # ... and the floor under 2 ms (a ~1B model on a datacenter GPU)
V2_DRAFT_ADVICE = ("the V1 runner (`model_runner: v1` in the preset, that is VLLM_USE_V2_MODEL_RUNNER=0) or "
                   "parallel drafting (PARD) would pay")
# Measured on an H200 (vLLM 0.32, 8B target, 1B draft, acceptance 0.7): the draft model at k=3 0.80× on V1,
# PARD (all k drafts in one pass) 1.82× at k=7 (docs/benchmarks.md).
V1_DRAFT_ADVICE = "parallel drafting (PARD: one draft pass proposes all k tokens) would pay"


@dataclass(frozen=True)
class Factors:
    speedup: float
    gain: float  # tokens_per_step_ratio
    cost: float  # step_cost_ratio
    acceptance_rate: float | None
    baseline_step_s: float
    async_scheduling: dict  # role -> bool | None
    step_floor_s: float | None = None  # the baseline step's bandwidth floor, when known
    model_runner: str | None = None  # the speculative engine's ("v1" | "v2"), when known
    noise: Noise | None = None  # the run's 95% intervals (specplay.run.noise), when it has enough steps
    sharing: Sharing | None = None  # the concurrent schedule's split (specplay.run.sharing); None: sequential

    @property
    def draft_cost(self) -> float | None:
        """The step-time ratio the draft's cost is read from: the whole run's on the sequential schedule, the
        stretch with both engines beside each other on the concurrent one (None: no uncontended measure)."""
        if self.sharing is None:
            return self.cost
        return self.sharing.draft_cost if self.sharing.measured else None

    @property
    def uncontended_step_s(self) -> float | None:
        """The baseline's step with the hardware to itself (None: it never had it in this run)."""
        return self.baseline_step_s if self.sharing is None else self.sharing.baseline_alone_s


def factors(result, step_floor_s: float | None = None) -> Factors | None:
    """The two factors of a RunResult, or None when the run has too few steps to time."""
    speedup, gain, cost = result.speedup, result.tokens_per_step_ratio, result.step_cost_ratio
    step = result.baseline.step_seconds
    if not (speedup and gain and cost and step):
        return None
    return Factors(speedup, gain, cost, result.acceptance_rate, step,
                   {role: result.async_scheduling(role) for role in (BASELINE, SPECULATIVE)},
                   step_floor_s, result.model_runner(SPECULATIVE), getattr(result, "noise", None),
                   sharing_of(result))


def overhead_bound(f: Factors) -> bool:
    """The baseline step is mostly fixed overhead: well above its bandwidth floor, and that floor small."""
    floor, step = f.step_floor_s, f.uncontended_step_s
    return bool(floor and step) and floor < SMALL_FLOOR_S and step > OVERHEAD_BOUND * floor


def v2_eager_draft(f: Factors, method: str, device: str) -> bool:
    """An autoregressive draft model on a V2 runner that doesn't graph it (vLLM 0.31-0.33; 0.34 does)."""
    return (facts_of_kind(method).step_cost == K_DRAFT_PASSES and device == "gpu" and f.model_runner == "v2"
            and capabilities.draft_graphed_on_v2() is not True)


def cost_fix(f: Factors, method: str, device: str) -> str:
    """What cures an expensive draft-model step here: another runner on V2, parallel drafting on V1."""
    if v2_eager_draft(f, method, device) and capabilities.has_v1_runner() is not False:
        return f"; {V2_DRAFT_ADVICE}"
    if facts_of_kind(method).step_cost == K_DRAFT_PASSES and device == "gpu" and f.model_runner == "v1":
        return f"; {V1_DRAFT_ADVICE}"
    return ""


def sharing_reason(s: Sharing) -> str:
    """What running both engines at once did to the step time, in words (s: a concurrent run's Sharing)."""
    if not s.measured:
        return ("both engines ran at once throughout, so the step time includes what sharing the hardware cost, "
                "not only the draft's (the sequential schedule measures the draft's own cost)")
    other = "speculative" if s.role == BASELINE else "baseline"
    return (f"both engines ran at once: sharing the hardware slowed the {s.role}'s own step from "
            f"{s.alone_s * 1000:.2f} ms alone to {s.beside_s * 1000:.2f} ms beside the {other} engine "
            f"({s.factor:.2f}×), and beside each other a speculative step took {s.draft_cost:.2f}× a baseline step")


def cost_reasons(f: Factors, method: str, k: int, device: str) -> list[str]:
    """What makes a speculative step expensive here, from the measured figures and the engines' config, the
    most telling first (the sentence names two at most). On the concurrent schedule the sharing comes first,
    and the draft's share is read from `f.draft_cost`, never from the contended whole-run ratio."""
    reasons = [sharing_reason(f.sharing)] if f.sharing is not None else []
    if v2_eager_draft(f, method, device):
        reasons.append(f"on Model Runner V2 this vLLM runs the draft model without CUDA graphs ({k} eager draft "
                       f"passes a step)")
    if f.async_scheduling.get(SPECULATIVE) is False and f.async_scheduling.get(BASELINE):
        reasons.append("the speculative engine runs without async scheduling on this vLLM, the baseline with it")
    facts = facts_of_kind(method)
    passes = facts.draft_passes(k)
    cost = f.draft_cost
    if (facts.draft == "model" or facts.parallel) and cost and cost > 1 and passes:  # a draft model, DFlash, DSpark
        per_pass = (cost - 1) / passes  # what each draft pass adds, if verifying costs one step
        if per_pass >= 0.15:
            what = f"each of its {passes} passes adds" if passes > 1 else "its one pass adds"
            all_k = f", drafting all {k} tokens" if facts.parallel else ""  # DFlash, DSpark, PARD
            reasons.append(f"the draft is slow relative to the target: {what} about {per_pass:.0%} of a target "
                           f"step{all_k}")
    if overhead_bound(f):
        reasons.append(f"the target is too small for speculation to pay on this device: a "
                       f"{f.uncontended_step_s * 1000:.1f} ms step, where reading the weights takes "
                       f"{f.step_floor_s * 1000:.1f} ms, is mostly fixed overhead, which drafting adds to")
    if not reasons and cost is not None:
        reasons.append(f"proposing drafts and verifying {k + 1} tokens costs more than one plain step here")
    return reasons


def explain(result, method: str, k: int, device: str, step_floor_s: float | None = None) -> str | None:
    """One sentence: which factor decides this run's speedup, and what would help when it loses. `result`:
    a RunResult or its Factors; `step_floor_s`: see Factors."""
    f = result if isinstance(result, Factors) else factors(result, step_floor_s)
    if f is None:
        return None
    head = f"{f.gain:.2f}× the tokens per step at {f.cost:.2f}× the step time"
    weak, heavy = f.gain < WEAK_GAIN, f.cost > HEAVY_COST
    accepted = f"{f.acceptance_rate:.0%} of drafted tokens accepted" if f.acceptance_rate is not None else "few drafts accepted"
    advice = facts_of_kind(method).advice  # the method table's
    fix = cost_fix(f, method, device)
    cheaper = cost_below_one_clause(f.cost, f.noise)  # a step cheaper than the baseline's: noise or flagged
    # the concurrent schedule's sharing, named in every sentence (those giving reasons name it among them)
    shared = f"; {sharing_reason(f.sharing)}" if f.sharing is not None else ""
    if within_noise(f.noise):
        return (f"{noise_sentence(f.speedup, f.noise, head)}; "
                f"{cheaper or 'more runs or more tokens would narrow it'}{shared}.")
    if cheaper:
        verdict = "pays" if f.speedup >= PAYS else "loses" if f.speedup < 1 / PAYS else "breaks even"
        return f"Speculation {verdict} ({f.speedup:.2f}×): {head}, but {cheaper}{shared}."
    if f.speedup >= PAYS:
        if heavy:
            named = 2 if f.sharing is not None else 1  # the sharing, then what the draft's share says
            return (f"Speculation pays ({f.speedup:.2f}×): {head}; cheaper steps would gain more, since "
                    f"{'; '.join(cost_reasons(f, method, k, device)[:named])}.")
        return (f"Speculation pays ({f.speedup:.2f}×): {head}, so acceptance decides and the steps stay "
                f"cheap{shared}.")
    if weak and heavy:
        return (f"Both factors lose ({f.speedup:.2f}×): only {accepted} ({f.gain:.2f}× the tokens per step), and "
                f"each step takes {f.cost:.2f}× as long, since {'; '.join(cost_reasons(f, method, k, device)[:2])}; "
                f"{advice}{fix}.")
    if heavy:
        return (f"Steps are too expensive ({f.speedup:.2f}×): each yields {f.gain:.2f}× the tokens but takes "
                f"{f.cost:.2f}× as long, since {'; '.join(cost_reasons(f, method, k, device)[:2])}{fix}.")
    if weak:
        return (f"Drafts were rarely accepted ({f.speedup:.2f}×): {accepted}, so a step yields only {f.gain:.2f}× "
                f"the tokens, not enough for steps {f.cost:.2f}× as long; {advice}{shared}.")
    return (f"Acceptance and step cost cancel out ({f.speedup:.2f}×): {head}; more accepted tokens per step or "
            f"cheaper steps would tip it{shared}.")


def beside_sentence(here, there, here_name: str = "this run", there_name: str = "the recording") -> str | None:
    """Why two runs' speedups differ (two RunResults: a live run and a recording set beside it), from the same
    two factors: the log of the speedups' ratio is the tokens-per-step part less the step-cost part, so the
    sentence says which part is the larger and by how much each moved. None where a figure is missing."""
    figures = [(r.speedup, r.tokens_per_step_ratio, r.step_cost_ratio) for r in (here, there)]
    if any(v is None or v <= 0 for f in figures for v in f):
        return None
    (s1, t1, c1), (s2, t2, c2) = figures
    gain, cost = math.log(t2 / t1), math.log(c1 / c2)  # each > 0 where it favours `there`
    bigger = ("the tokens per step (what acceptance and k buy)" if abs(gain) >= abs(cost)
              else "the step time (what drafting and verifying cost against a plain step)")
    return (f"{there_name[0].upper()}{there_name[1:]} measured {s2:.2f}× against {here_name}'s {s1:.2f}×: "
            f"{t2:.2f}× the tokens per step against {t1:.2f}×, at {c2:.2f}× the step time against {c1:.2f}×, "
            f"so most of the difference is in {bigger}.")
