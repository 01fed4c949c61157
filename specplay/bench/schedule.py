"""Dynamic k from a bench's k × concurrency table: the best measured k at each number of requests in flight,
as vLLM's `num_speculative_tokens_per_batch_size` schedule ([first batch size, last, k], inclusive ranges
from 1), printed as a `speculative_config` fragment and savable as a preset. Pure logic on bench rows.

Each concurrency level measured owns the batch sizes from itself up to the next level measured; the last
runs to MAX_BATCH (vLLM clips a range to its max_num_seqs). Adjacent ranges with the same k are merged.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from specplay.presets.verifiers import is_synthetic

MAX_BATCH = 1024
NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{0,63}$")


@dataclass(frozen=True)
class DynamicK:
    best_k: dict[int, int]  # concurrency -> the k that measured fastest there
    speedups: dict[int, dict[int, float]]  # concurrency -> k -> speedup (geometric mean over the rows)
    schedule: list[list[int]]  # [[first, last, k], ...]

    @property
    def fragment(self) -> dict:
        """The `speculative_config` keys that ask vLLM for this schedule (k is the largest it uses)."""
        return {"num_speculative_tokens": max(k for _, _, k in self.schedule),
                "num_speculative_tokens_per_batch_size": self.schedule}

    def sentence(self) -> str:
        fixed = {k: [self.speedups[c].get(k) for c in self.speedups] for k in _ks(self.speedups)}
        full = {k: v for k, v in fixed.items() if None not in v}
        levels = ", ".join(f"k={self.best_k[c]} at {c} in flight" for c in sorted(self.best_k))
        text = f"Dynamic k: {levels}."
        if full:
            best_fixed = max(full, key=lambda k: _geomean(full[k]))
            losses = [(c, self.speedups[c][self.best_k[c]] / self.speedups[c][best_fixed] - 1) for c in self.speedups]
            worst = max(losses, key=lambda item: item[1])
            if worst[1] > 0.005:
                text += (f" The best single k (k={best_fixed}) gives up {worst[1]:.0%} at {worst[0]} in flight, "
                         "which the schedule keeps.")
            else:
                text += f" One k (k={best_fixed}) is best at every level measured: no schedule needed."
        return text


def _ks(speedups: dict[int, dict[int, float]]) -> list[int]:
    return sorted({k for by_k in speedups.values() for k in by_k})


def _geomean(values) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def dynamic_k(rows) -> DynamicK | None:
    """The schedule from closed-loop rows with a speedup; None unless ≥ 2 concurrency levels and ≥ 2 k's."""
    cells: dict[int, dict[int, list[float]]] = {}
    for row in rows:
        if row.request_rate is not None or not row.speedup or not row.k:
            continue
        cells.setdefault(int(row.concurrency), {}).setdefault(int(row.k), []).append(float(row.speedup))
    speedups = {c: {k: _geomean(v) for k, v in by_k.items()} for c, by_k in sorted(cells.items())}
    if len(speedups) < 2 or len(_ks(speedups)) < 2:
        return None
    best = {c: max(by_k, key=by_k.get) for c, by_k in speedups.items()}
    levels = sorted(best)
    schedule: list[list[int]] = []
    for i, c in enumerate(levels):
        first = 1 if i == 0 else c
        last = levels[i + 1] - 1 if i + 1 < len(levels) else MAX_BATCH
        if schedule and schedule[-1][2] == best[c]:
            schedule[-1][1] = last
        else:
            schedule.append([first, last, best[c]])
    return DynamicK(best, speedups, schedule)


def as_json(rows) -> dict | None:
    """The bench result's `dynamic_k`: the schedule, its speculative_config fragment and its sentence."""
    dyn = dynamic_k(rows)
    if dyn is None:
        return None
    return {"schedule": dyn.schedule, "speculative_config": dyn.fragment, "sentence": dyn.sentence(),
            "best_k": {str(c): k for c, k in dyn.best_k.items()}}


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
    spec = dict(data["speculative_config"])
    spec.update(dyn.fragment)
    if is_synthetic(spec) and spec.get("synthetic_acceptance_rates"):
        spec["synthetic_acceptance_rates"] = _rates(spec["synthetic_acceptance_rates"], spec["num_speculative_tokens"])
    data.update(name=name, speculative_config=spec,
                description=f"{data.get('description', '')} — dynamic k from a bench: {dyn.sentence()}".strip())
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    return path
