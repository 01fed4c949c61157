"""Advice, measured: the k the guide's rule recommends from the measured acceptance rate, the k that
measured fastest, one sentence where they disagree and why, and which term of the step cost eats the
gain (from measured pass times, `passes`). Pure logic on bench rows (bench.report.BenchRow).

The guide's rule: k=3 is conservative, 5 the default, 7 aggressive; from the k you run, raise k when more
than 70% of drafted tokens are accepted, lower it below 50%, else keep it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from specplay.bench.passes import cost_sentence
from specplay.bench.schedule import OFF, decide
from specplay.presets.methods import facts_of_kind

LEVELS = {3: "conservative", 5: "default", 7: "aggressive"}
RAISE_ABOVE, LOWER_BELOW = 0.70, 0.50
COST_GROWS = 1.05  # the step-cost factor at the largest k this much above the smallest's: it grows with k
# A speculative step does all a plain step does and more: a step-cost factor below this means the baseline's
# batch ran slow (shared cores, a noisy neighbour), and every row that reuses it is skewed.
IMPLAUSIBLE_COST = 0.95
GROUP_KEYS = ("workload", "temperature", "concurrency", "acceptance", "request_rate")


class Advice(BaseModel):
    """The k advice for one group of rows (bench.json's `advice`: its dump; an older file's extra keys
    are ignored)."""

    model_config = ConfigDict(frozen=True, extra="ignore")
    workload: str
    temperature: float
    concurrency: int
    acceptance: float | None  # synthetic acceptance of these rows, if any
    current_k: int  # the k the rule starts from: the preset's, or the measured k closest to it
    acceptance_rate: float | None  # measured at current_k
    rule: str  # raise | lower | keep
    rule_k: int
    best_k: int
    best_speedup: float | None
    agree: bool
    sentence: str
    request_rate: float | str | None = None  # open-loop rows: their request rate ("inf": all at once)


def rule_k(current_k: int, acceptance_rate: float | None) -> tuple[str, int]:
    """The guide's rule: (raise | lower | keep, the k it leads to among 3 / 5 / 7)."""
    if acceptance_rate is None:
        return "keep", current_k
    if acceptance_rate > RAISE_ABOVE:
        up = [level for level in LEVELS if level > current_k]
        return "raise", min(up) if up else current_k
    if acceptance_rate < LOWER_BELOW:
        down = [level for level in LEVELS if level < current_k]
        return "lower", max(down) if down else current_k
    return "keep", current_k


def _percent(rate: float) -> str:
    """A whole percent, or one decimal where rounding would land on a threshold the rate is not past: an H100
    bench printed "50% of drafted tokens accepted (below 50%)" for 49.8%."""
    shown = round(rate * 100)
    near = (shown == round(LOWER_BELOW * 100) and rate < LOWER_BELOW) or (shown == round(RAISE_ABOVE * 100)
                                                                          and rate > RAISE_ABOVE)
    return f"{rate:.1%}" if near else f"{rate:.0%}"


def _level(k: int) -> str:
    return f"k={k} ({LEVELS[k]})" if k in LEVELS else f"k={k}"


def _why(rows_by_k: dict, rule_wants_more: bool, kind: str, async_scheduling: bool | None) -> str:
    """Why the measured best sits on the other side of the rule's k: what the step-cost factor did."""
    lo, hi = min(rows_by_k), max(rows_by_k)
    c_lo, c_hi = rows_by_k[lo].step_cost_ratio, rows_by_k[hi].step_cost_ratio
    g_lo, g_hi = rows_by_k[lo].tokens_per_step_ratio, rows_by_k[hi].tokens_per_step_ratio
    if not (c_lo and c_hi and g_lo and g_hi):
        return "too few steps were timed to say why"
    trend = f"the step-cost factor goes from {c_lo:.2f}× at k={lo} to {c_hi:.2f}× at k={hi}"
    gain = f"tokens per step {g_lo:.2f}× → {g_hi:.2f}×"
    facts = facts_of_kind(kind)  # the method table: does drafting run passes, one per position?
    passes, per_position = facts.drafts_cost_a_pass, facts.draft_passes(2) == 2
    if rule_wants_more:
        if c_hi > c_lo * COST_GROWS:
            cause = (" because the speculative engine runs without async scheduling here, so every step waits "
                     "for the host while it drafts and verifies k+1 tokens" if async_scheduling is False else
                     f" because each extra draft position adds {'a draft pass and ' if per_position else ''}"
                     "verification work to every step" + (" (one pass drafts all k, so the draft's own cost "
                                                          "barely grows)" if facts.parallel else ""))
            return f"{trend}{cause}, and a longer draft buys too little to cover it ({gain})"
        return f"acceptance falls off at the later positions: {gain}, while {trend}"
    if c_hi <= c_lo * COST_GROWS:
        free = f" ({'n-gram' if facts.lookup else kind} drafts cost no forward pass)" if passes is False else ""
        return f"{trend}: extra draft positions are almost free{free}, so even a few accepted tokens pay ({gain})"
    return f"the accepted tokens outweigh the extra cost: {gain}, while {trend}"


def advise(rows: list, preset_k: int, kind: str, async_scheduling: bool | None) -> list[Advice]:
    """One Advice per (workload, temperature, concurrency[, acceptance]) group of bench rows; `kind`: the
    method table's (a preset's `speculative_config.kind`: "pard", not vLLM's "draft_model")."""
    groups: dict[tuple, dict[int, dict]] = {}
    for row in rows:
        groups.setdefault(tuple(getattr(row, key) for key in GROUP_KEYS), {})[row.k] = row
    return [_advice(key, by_k, preset_k, kind, async_scheduling) for key, by_k in groups.items()]


def _advice(key: tuple, by_k: dict, preset_k: int, kind: str, async_scheduling: bool | None) -> Advice:
    where = dict(zip(GROUP_KEYS, key))  # workload, temperature, concurrency, acceptance
    ks = sorted(by_k)
    current = min(ks, key=lambda k: (abs(k - preset_k), k))
    rate = by_k[current].acceptance_rate
    verdict, target = rule_k(current, rate)
    timed = [k for k in ks if by_k[k].speedups]
    # the dynamic-k rule's own verdict (bench.schedule.decide): one decision per level, ties named
    # each k's runs (--num-runs): the low end measured; one run: its speedup less the tie margin
    decision = decide({k: by_k[k].speedups for k in timed}) if timed else None
    best = decision.k if decision is not None and decision.k != OFF else current
    speedup = by_k[best].speedup
    rate_text = f"{_percent(rate)} of drafted tokens accepted at k={current}" if rate is not None else f"no drafts at k={current}"
    threshold = {"raise": " (above 70%)", "lower": " (below 50%)", "keep": " (between 50% and 70%)"}[verdict]
    rule = f"the guide's rule says {verdict} to {_level(target)}" if verdict != "keep" else f"the guide's rule says keep {_level(target)}"
    if verdict != "keep" and target == current:
        rule = f"the guide's rule would {verdict} k, and k={current} is already its {'largest' if verdict == 'raise' else 'smallest'} level"
    best_text = _best_text(decision, speedup)
    measured = ", ".join(map(str, ks))
    if len(ks) == 1:
        sentence = (f"{rate_text.capitalize()}{threshold}: {rule}; only k={ks[0]} was measured "
                    f"({speedup:.2f}×)" if speedup is not None else f"{rate_text.capitalize()}{threshold}: {rule}")
        sentence += "; measure more k (--k) to compare." + cost_sentence(by_k[current]) + _suspect(by_k)
        return Advice(**where, current_k=current, acceptance_rate=rate, rule=verdict, rule_k=target, best_k=best,
                      best_speedup=speedup, agree=True, sentence=sentence)
    tied = decision is not None and target in {k for k, _, _ in decision.ties}
    agree = best == target or tied or (target not in by_k and (best - current) * (target - current) > 0)
    if decision is not None and decision.k == OFF:
        agree = False
        sentence = f"{rate_text.capitalize()}{threshold}: {rule}, but {best_text}."
    elif tied:
        sentence = (f"{rate_text.capitalize()}{threshold}: {rule}, and {best_text}: rule and measurement agree "
                    "within the tie margin.")
    elif best == target:
        sentence = f"{rate_text.capitalize()}{threshold}: {rule}, and {best_text}: rule and measurement agree."
    elif agree:
        sentence = (f"{rate_text.capitalize()}{threshold}: {rule} (not measured; measured k={measured}); "
                    f"{best_text}, in the rule's direction.")
    else:
        wants_more = target > best
        sentence = (f"{rate_text.capitalize()}{threshold}: {rule}, but {best_text}: "
                    f"{_why(by_k, wants_more, kind, async_scheduling)}.")
    return Advice(**where, current_k=current, acceptance_rate=rate, rule=verdict, rule_k=target, best_k=best,
                  best_speedup=speedup, agree=agree, sentence=sentence + cost_sentence(by_k[current]) + _suspect(by_k))


def _best_text(decision, speedup: float | None) -> str:
    """The measured side of the advice, in the dynamic-k rule's words (decision: a schedule.Decision)."""
    if decision is None or speedup is None:
        return "no k could be timed"
    if decision.k == OFF:
        return f"no k measured clearly faster than the baseline: {decision.label()}"
    if decision.ties:
        return f"the rule keeps {decision.label()}, measured {speedup:.2f}×"
    return f"k={decision.k} measured fastest ({speedup:.2f}×)"


def _suspect(by_k: dict) -> str:
    low = [k for k, row in sorted(by_k.items()) if (row.step_cost_ratio or 1) < IMPLAUSIBLE_COST]
    if not low:
        return ""
    return (f" Caution: the step-cost factor is below 1 at k={', '.join(map(str, low))}, so the baseline's batch "
            "probably ran slow; rerun before trusting these speedups.")
