"""How much of a run's speedup is noise: a 95% interval for the speedup and for both its factors, from the
run's own per-step times (`noise_of`), and the words for it (`within_noise`, `cost_below_one_clause`).

Method (docs/metrics.md): a percentile bootstrap over decode steps. Each engine's decode steps are units
of (seconds since the previous streamed chunk, tokens, steps): a chunk is one step, except on the
baseline, where a merged chunk of n tokens is n steps (one token a step), and on the speculative engine
when its request's counters count more steps than chunks (vLLM merged some), where the extra steps are
spread over the chunks in proportion to their accepted tokens. `RESAMPLES` times, with a fixed seed, both
engines' units are resampled with replacement (each engine on its own) and the three figures recomputed
as the run computes them (Σ tokens / Σ steps, Σ seconds / Σ steps, speculative ÷ baseline); the interval
is the 2.5th to 97.5th percentile. Summed over the same units the point figures are exactly the run's.

The bootstrap sees step-to-step jitter within the run; it can't see what moves a whole run (another
process on the cores for its length). Measured on 2 shared cores (smollm2-ngram, rewrite prompts, 96 tokens,
sequential): one prompt's step time ratio was 1.10× (interval 1.06–1.13×) in one run and 0.88× (0.84–0.92×)
in the next, so repeating the run (`pooled_runs`, with its `spread`) is still the stronger test.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, SerializationInfo, model_serializer, model_validator

from specplay.core.events import ROLES, TOKENS
from specplay.run.fields import Count, Ratio, Rounded4, exact

RESAMPLES = 1000
SEED = 0
LEVEL = 0.95
MIN_STEPS = 5  # fewer timed decode steps on either engine: no interval (a bootstrap of 3 says nothing)


class Interval(BaseModel):
    """A 95% interval; its JSON is [low, high] (4 digits, unless dumped exactly: result.EXACT)."""

    model_config = ConfigDict(frozen=True)

    low: Ratio
    high: Ratio

    @model_validator(mode="before")
    @classmethod
    def _from_pair(cls, data):
        if isinstance(data, (list, tuple)):
            if len(data) != 2:
                raise ValueError("an interval is [low, high]")
            return {"low": data[0], "high": data[1]}
        return data

    @model_serializer
    def _pair(self, info: SerializationInfo) -> list[float]:
        return [self.low, self.high] if exact(info) else [round(self.low, 4), round(self.high, 4)]

    def holds(self, x: float) -> bool:
        return self.low <= x <= self.high

    def __str__(self) -> str:
        return f"{self.low:.2f}–{self.high:.2f}×"


class Noise(BaseModel):
    """The run's three figures' 95% intervals (speculative ÷ baseline)."""

    model_config = ConfigDict(frozen=True)

    speedup: Interval
    tokens_per_step_ratio: Interval
    step_cost_ratio: Interval
    resamples: int = RESAMPLES

    @property
    def within_noise(self) -> bool:
        """The speedup's interval holds 1×: this run can't tell a gain from no gain."""
        return self.speedup.holds(1.0)


def step_units(step_sizes, step_times, decode_steps: int, steps_source: str):
    """Per decode chunk (after the prefill one): (seconds, tokens, steps), or None when there is nothing
    to time. `steps_source` TOKENS: one token a step."""
    if len(step_sizes) < 2 or len(step_times) != len(step_sizes) or decode_steps <= 0:
        return None
    sizes = list(step_sizes[1:])
    seconds = [b - a for a, b in zip(step_times, step_times[1:])]
    if steps_source == TOKENS:
        steps = [float(n) for n in sizes]
    else:
        extra = max(0, decode_steps - len(sizes))  # steps vLLM merged into chunks
        accepted = sum(n - 1 for n in sizes)
        steps = [1.0 + (extra * (n - 1) / accepted if accepted else extra / len(sizes)) for n in sizes]
    return seconds, [float(n) for n in sizes], steps


def _units_of(side):
    """`side`: an EngineTrace or an EngineResult (both have step_sizes, step_times, steps, steps_source)."""
    return step_units(side.step_sizes, side.step_times, max(0, side.steps - 1), side.steps_source)


def _resampled(units, resamples: int, rng):
    """Per resample: (tokens per step, seconds per step) of one engine."""
    import numpy as np

    seconds, tokens, steps = (np.asarray(u) for u in units)
    picks = rng.integers(0, len(seconds), size=(resamples, len(seconds)))
    n = steps[picks].sum(axis=1)
    return tokens[picks].sum(axis=1) / n, seconds[picks].sum(axis=1) / n


def noise_of(baseline, speculative, resamples: int = RESAMPLES, seed: int = SEED) -> Noise | None:
    """The run's intervals from both engines' decode steps (EngineTrace or EngineResult each); None when
    either engine has fewer than MIN_STEPS timed decode steps or a step took no time."""
    return _bootstrap([_units_of(baseline), _units_of(speculative)], resamples, seed)


def _pooled(units):
    present = [u for u in units if u is not None]
    return tuple(sum((list(u[i]) for u in present), []) for i in range(3)) if present else None


class Pooled(BaseModel):
    """Several runs of one prompt and preset, pooled: their decode steps summed per engine (as a bench row
    pools a batch), so the figures are Σ over all runs' steps, and one interval over all of them. The run
    JSON's `pooled` object (a series' run: RunResult.pooled)."""

    model_config = ConfigDict(frozen=True)

    runs: Count
    speedup: Rounded4
    tokens_per_step_ratio: Rounded4
    step_cost_ratio: Rounded4
    speedup_interval: Interval | None = None
    # the lowest and highest single run's speedup: run-to-run drift, which no run's own steps show
    single_run_spread: Interval | None = None
    single_run_intervals: tuple[Interval | None, ...] = ()

    @property
    def within_noise(self) -> bool:
        return self.speedup_interval is not None and self.speedup_interval.holds(1.0)


def pooled_runs(results, resamples: int = RESAMPLES, seed: int = SEED) -> Pooled | None:
    """"Run it 3 times": RunResults of the same prompt and preset pooled into one set of figures whose
    interval is narrower than each run's (the steps of all runs resampled together); None when nothing timed."""
    units = [_pooled([_units_of(r.side(role)) for r in results]) for role in ROLES]
    if any(u is None or not u[0] or sum(u[0]) <= 0 for u in units):
        return None
    (b_sec, b_tok, b_steps), (s_sec, s_tok, s_steps) = units
    gain = (sum(s_tok) / sum(s_steps)) / (sum(b_tok) / sum(b_steps))
    cost = (sum(s_sec) / sum(s_steps)) / (sum(b_sec) / sum(b_steps))
    speedups = [r.speedup for r in results if r.speedup]
    noise = _bootstrap(units, resamples, seed)
    return Pooled(runs=len(results), speedup=gain / cost, tokens_per_step_ratio=gain, step_cost_ratio=cost,
                  speedup_interval=noise.speedup if noise else None,
                  single_run_spread=Interval(low=min(speedups), high=max(speedups)) if speedups else None,
                  single_run_intervals=tuple(r.speedup_interval for r in results))


def _bootstrap(units, resamples: int, seed: int) -> Noise | None:
    import numpy as np

    if any(u is None or len(u[0]) < MIN_STEPS or sum(u[0]) <= 0 for u in units):
        return None
    rng = np.random.default_rng(seed)
    (b_tps, b_sec), (s_tps, s_sec) = (_resampled(u, resamples, rng) for u in units)
    if (b_sec <= 0).any() or (s_sec <= 0).any():
        return None  # a resample of zero-second chunks only: no rate to compare
    gain, cost = s_tps / b_tps, s_sec / b_sec
    tail = (1 - LEVEL) / 2 * 100

    def interval(values) -> Interval:
        low, high = np.percentile(values, [tail, 100 - tail])
        return Interval(low=float(low), high=float(high))

    return Noise(speedup=interval(gain / cost), tokens_per_step_ratio=interval(gain),
                 step_cost_ratio=interval(cost), resamples=resamples)


def within_noise(noise: Noise | None) -> bool:
    return noise is not None and noise.within_noise


def cost_below_one_clause(cost: float, noise: Noise | None) -> str:
    """What a speculative step measured cheaper than the baseline's means (it verifies more tokens, so it
    can't be, from the work alone): noise when its interval holds 1×, else flagged as a real effect of
    something outside the step's arithmetic. "" when the step isn't cheaper or there is no interval."""
    if round(cost, 2) >= 1 or noise is None:  # as the sentence prints it: 0.996 reads 1.00×
        return ""
    ci = noise.step_cost_ratio
    if ci.holds(1.0):
        return (f"the speculative step measuring {cost:.2f}× the baseline's is within this run's noise "
                f"(95% interval {ci})")
    return (f"the speculative step measured {cost:.2f}× the baseline's (95% interval {ci}), cheaper beyond this "
            f"run's step-to-step noise though it verifies more tokens, so the engines were timed under different "
            f"conditions (another process on the cores, per-step host work) and the speedup is partly that; "
            f"running it again tells")


def noise_sentence(speedup: float, noise: Noise, factors: str) -> str:
    """The explanation's start when the speedup's interval holds 1× (`factors`: "1.05× the tokens per step at
    1.00× the step time")."""
    return (f"Within noise ({speedup:.2f}×): {factors}, and the speedup's 95% interval, {noise.speedup}, holds 1×, "
            f"so this run can't tell a gain from a loss")
