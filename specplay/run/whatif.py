"""What if: the standard speedup model of speculative decoding, one place for the page's what-if sliders and
the bench lab's predicted-vs-measured chart.

A step verifies k drafted tokens; each is accepted with probability α given the ones before it were, so a
step yields 1 + α + α² + ... + α^k = (1 − α^(k+1)) / (1 − α) tokens on average. It costs one target forward
pass (the verify, 1 in units of a baseline step) plus the method's draft passes, each costing c baseline
steps:

    speedup = (1 − α^(k+1)) / (1 − α) / (verify + passes · c)
    chained drafts (a draft model, EAGLE, MTP: k passes):  (1 − α^(k+1)) / ((1 − α)(1 + k·c))
    parallel drafting (PARD: one pass for all k):          (1 − α^(k+1)) / ((1 − α)(1 + c))
    n-gram / suffix lookup (no pass):                      (1 − α^(k+1)) / (1 − α)

Per-position acceptance replaces α^(i+1) by the share of steps whose i-th draft was accepted (vLLM's
`accepted_per_position` ÷ `num_drafts`). The passes per step come from the method table
(`specplay.presets.methods`: `facts_for(speculative_config).draft_passes(k)`).

`predicted_speedup` is the model; `best_k` the k it favours; `measured(result, ...)` a run's own α, rates and c,
where the sliders start. Pure arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from specplay.run.sharing import sharing_of

K_MAX = 16  # the largest k best_k tries for a single α


def expected_tokens(acceptance: float | Sequence[float], k: int) -> float:
    """Tokens a verification step yields on average: 1 + Σ_{i<k} P(draft i accepted). `acceptance`: one α
    (P = α^(i+1)) or per-position rates (P = rates[i]; positions past the list count as never accepted)."""
    if isinstance(acceptance, (int, float)):
        a = min(max(float(acceptance), 0.0), 1.0)
        return float(k + 1) if a == 1.0 else (1 - a ** (k + 1)) / (1 - a)
    return 1.0 + sum(float(r) for r in list(acceptance)[:k])


def predicted_speedup(acceptance: float | Sequence[float], k: int, draft_cost: float = 0.0, passes: int = 0,
                      verify_cost: float = 1.0) -> float:
    """The standard model's speedup: expected tokens per step ÷ the step's cost in baseline steps
    (`verify_cost` for the verify pass, 1 in the model, plus `passes` draft passes of `draft_cost` each).
    `passes`: the method's draft passes per step at this k (MethodFacts.draft_passes(k)); 0 for n-gram."""
    return expected_tokens(acceptance, k) / (verify_cost + passes * max(draft_cost, 0.0))


def best_k(acceptance: float | Sequence[float], draft_cost: float, passes_for: Callable[[int], int],
           verify_cost: float = 1.0, k_max: int = K_MAX) -> tuple[int, float]:
    """(k, predicted speedup) of the k in 1..k_max the model favours (the smallest on a tie). With
    per-position rates only the measured positions count (k up to their number). `passes_for(k)`: draft
    passes at k, e.g. `facts_for(speculative_config).draft_passes`."""
    top = k_max if isinstance(acceptance, (int, float)) else max(1, len(acceptance))
    scored = [(predicted_speedup(acceptance, k, draft_cost, passes_for(k), verify_cost), -k) for k in range(1, top + 1)]
    speedup, neg_k = max(scored)
    return -neg_k, speedup


def alpha_from_mean(accepted_per_draft: float, k: int) -> float | None:
    """The single α whose model yields this mean of accepted drafts per step (Σ_{i<k} α^(i+1) = it), by
    bisection: the α that reproduces the run's mean acceptance length. None where k or the mean is 0."""
    if k <= 0 or accepted_per_draft is None:
        return None
    target = min(max(accepted_per_draft, 0.0), float(k))
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if expected_tokens(mid, k) - 1 < target else (lo, mid)
    return (lo + hi) / 2


@dataclass(frozen=True)
class Measured:
    """A run's values for the what-if, where the sliders start."""

    k: int
    passes: int  # draft passes per step at k (the method table's)
    alpha: float | None  # the α whose model gives the run's mean acceptance length (alpha_from_mean)
    rates: tuple[float, ...]  # per position: share of drafts whose i-th token was accepted
    draft_cost: float | None  # one draft pass, in baseline steps: (step_cost_ratio − 1) / passes; None without passes
    verify_cost: float  # the verify pass in baseline steps: the step_cost_ratio for a lookup method, else 1
    step_cost_ratio: float | None  # measured speculative ÷ baseline step time
    speedup: float | None  # measured
    # the concurrent schedule's: what the cost comes from (specplay.run.sharing.Sharing); None: sequential
    cost_note: str | None = None

    @property
    def predicted(self) -> float | None:
        """The model's speedup at the run's own α, k and c (beside `speedup`, the measured one)."""
        if self.alpha is None:
            return None
        return predicted_speedup(self.alpha, self.k, self.draft_cost or 0.0, self.passes, self.verify_cost)


def measured(result, k: int, passes: int) -> Measured:
    """The what-if's starting point from a RunResult: α and per-position rates from its counters, the
    draft's cost per pass from its step-time ratio (verify taken as one baseline step: the model's
    assumption), or, for a method without draft passes, the verify's own measured cost. On the concurrent
    schedule the cost comes from the stretch where both engines ran beside each other (run.sharing), never
    from the whole run's ratio; without a solo stretch to measure the sharing, no cost is read (the model's
    defaults: no draft cost, a verify of one step) and `cost_note` says why."""
    c = result.counters
    rates = tuple(n / c.num_drafts for n in c.accepted_per_position) if c.num_drafts else ()
    alpha = alpha_from_mean(c.num_accepted_tokens / c.num_drafts, k) if c.num_drafts else None
    cost, basis, note = result.step_cost_ratio, result.step_cost_ratio, None
    sharing = sharing_of(result)
    if sharing is not None:
        basis = sharing.draft_cost if sharing.measured else None
        note = (f"both engines ran at once: the cost is read from the steps they ran beside each other "
                f"({basis:.2f}×, not the run's {cost:.2f}×)" if basis and cost else
                "both engines ran at once throughout: their step times include the sharing, so the cost starts "
                "at the model's default (the sequential schedule measures it)")
    draft_cost = (basis - 1) / passes if basis and passes else None
    verify_cost = basis if basis and not passes else 1.0
    return Measured(k, passes, alpha, rates, draft_cost, verify_cost, cost, result.speedup, note)
