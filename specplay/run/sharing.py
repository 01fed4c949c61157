"""What running both engines at once cost a run: on the concurrent schedule the two engines share the
hardware, so a step-time ratio read from it mixes the draft's cost with the sharing. `sharing_of(result)`
splits them from the run's own arrival times; pure logic, no vLLM, no UI.

The uncontended measure is the run's solo stretch: once one engine has finished, the other runs alone for
the rest of its request (the same prompt, the same context length). Its steps there against its steps
while the other still ran give what sharing cost (`factor` = step beside ÷ step alone). Over the stretch
where both ran, each was slowed by the other, so speculative step ÷ baseline step there is the draft's
share with both slowed alike (`draft_cost`): the figure the draft's cost is read from on this schedule,
never the whole run's ratio, whose baseline side is part alone, part shared. Where neither engine had a
solo stretch of MIN_SOLO_STEPS steps (both finished together), there is no uncontended measure:
`measured` is False and the explanation says the step time includes the sharing, attributing nothing of
it to the draft.
"""

from __future__ import annotations

from dataclasses import dataclass

from specplay.core.events import BASELINE, SPECULATIVE, Schedule
from specplay.run.noise import step_units

MIN_SOLO_STEPS = 3  # decode steps an engine must run alone (and beside the other) to time each stretch


@dataclass(frozen=True)
class Sharing:
    """A concurrent run's step times split by whether the other engine was running."""

    role: str | None = None  # the engine that had the solo stretch (None: neither had one)
    alone_s: float | None = None  # its mean step once the other had finished
    beside_s: float | None = None  # its mean step while the other ran
    draft_cost: float | None = None  # speculative step ÷ baseline step, both while the other ran
    baseline_alone_s: float | None = None  # the baseline's step alone, where the baseline had the stretch

    @property
    def measured(self) -> bool:
        return bool(self.alone_s and self.beside_s and self.draft_cost)

    @property
    def factor(self) -> float | None:
        """How much sharing the hardware slowed the solo engine's step: beside ÷ alone."""
        return self.beside_s / self.alone_s if self.measured else None


def _units(side):
    """Per decode chunk: (start, end, steps), from an EngineResult or EngineTrace with arrival times."""
    times = tuple(side.step_times)
    units = step_units(side.step_sizes, times, max(0, side.steps - 1), side.steps_source)
    if units is None:
        return []
    return [(a, b, steps) for a, b, steps in zip(times, times[1:], units[2])]


def _mean_step(units) -> tuple[float | None, float]:
    steps = sum(n for _, _, n in units)
    return ((sum(b - a for a, b, _ in units) / steps) if steps else None), steps


def sharing_of(result) -> Sharing | None:
    """A concurrent run's Sharing (`result`: a RunResult or Comparison-like with .schedule, .baseline and
    .speculative sides carrying arrival times); None on the sequential schedule, where nothing is shared."""
    if getattr(result, "schedule", None) != Schedule.CONCURRENT:
        return None
    units = {BASELINE: _units(result.baseline), SPECULATIVE: _units(result.speculative)}
    if not all(units.values()):
        return Sharing()
    start = max(u[0][0] for u in units.values())  # both decoding
    end = min(u[-1][1] for u in units.values())  # the first to finish has its last token
    beside = {role: [u for u in us if u[0] >= start and u[1] <= end] for role, us in units.items()}
    (base_beside, nb), (spec_beside, ns) = _mean_step(beside[BASELINE]), _mean_step(beside[SPECULATIVE])
    if nb < MIN_SOLO_STEPS or ns < MIN_SOLO_STEPS:
        return Sharing()
    for role, beside_s in ((BASELINE, base_beside), (SPECULATIVE, spec_beside)):
        alone_s, n = _mean_step([u for u in units[role] if u[0] >= end])
        if n >= MIN_SOLO_STEPS and alone_s:
            return Sharing(role, alone_s, beside_s, spec_beside / base_beside,
                           alone_s if role == BASELINE else None)
    return Sharing()
