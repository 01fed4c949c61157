"""One comparison run, built from the pair's events: both outputs, identity and first divergence, timings,
acceptance. Pure logic (no vLLM, no UI): it is fed live, so the page and the CLI read the same numbers.

Definitions (documented in the README):
- ttft_s: first token's arrival minus the request's submission.
- tokens_per_s: decode throughput, (tokens - 1) / (last token's arrival - first token's arrival); the
  first token comes from prefill, which speculation doesn't change.
- steps: engine steps, counted exactly where possible (`steps_source`): the speculative engine's from its
  request's own counters ("per-request"), the baseline's from its tokens ("tokens", one a step), else the
  streamed chunks ("chunks": vLLM merges DELTA chunks a lagging consumer hasn't taken, so chunks may
  undercount).
- step_seconds: mean decode step, (last arrival - first arrival) / (steps - 1).
- tokens_per_step: mean tokens a decode step emitted, (tokens - first chunk's) / (steps - 1).
  So tokens_per_s = tokens_per_step / step_seconds, exactly.
- speedup: speculative tokens_per_s / baseline tokens_per_s
         = tokens_per_step_ratio (spec / baseline) / step_cost_ratio (spec step_seconds / baseline's).
- acceptance_rate, mean_acceptance_length: from the speculative request's counters, as vLLM defines them:
  vLLM's per-request metrics where it has them (acceptance_source "per-request"), else the difference of
  the engine's stat-logger counters over the run ("engine delta").
- speedup_per_acceptance_length: speedup / mean acceptance length, the share of acceptance's promised gain
  delivered (named "efficiency" before; vLLM's old "system efficiency" meant something else).
"""

from __future__ import annotations

from typing import Callable

from specplay.core.events import (
    BASELINE, PER_REQUEST, SPECULATIVE, TOKENS, RunFinished, RunStarted, SpecDecodeCounters, StepEvent,
)
from specplay.core.trace import EngineTrace


def first_divergence(a: list[int], b: list[int]) -> int | None:
    """Index of the first differing token, or of the end of the shorter output; None if identical."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def divergence_context(a: list[int], b: list[int], index: int, decode: Callable[[list[int]], str],
                       before: int = 3, after: int = 6) -> dict:
    """A few tokens of each side around the divergence, decoded, for people to read."""
    start = max(0, index - before)
    return {
        "common": decode(a[start:index]),
        BASELINE: decode(a[index:index + after]),
        SPECULATIVE: decode(b[index:index + after]),
    }


def divergence_candidates(a, b, index: int | None) -> dict | None:
    """At the first divergence, each side's top candidates [[token text, logprob], ...] (EngineTrace's
    top_logprobs), so a near-tie reads as one; None when neither side reported logprobs there."""
    if index is None:
        return None
    sides = {}
    for role, trace in ((BASELINE, a), (SPECULATIVE, b)):
        top = trace.top_logprobs[index] if index < len(trace.top_logprobs) else None
        sides[role] = [[text, round(logprob, 4)] for text, logprob in top] if top else []
    return sides if any(sides.values()) else None


class Comparison:
    """Accumulates one run's events; readable at any moment (live charts) and at the end (verdict)."""

    def __init__(self, decode: Callable[[list[int]], str] | None = None, num_speculative_tokens: int | None = None):
        # the baseline doesn't speculate: one token a step, however vLLM merged its chunks
        self.traces = {BASELINE: EngineTrace(BASELINE, count_steps_from=TOKENS), SPECULATIVE: EngineTrace(SPECULATIVE)}
        self.counters = SpecDecodeCounters()
        self.counters_source: str | None = None  # PER_REQUEST or ENGINE_DELTA, once the run has finished
        self.decode = decode
        self.num_speculative_tokens = num_speculative_tokens
        self.run_id: str | None = None
        self.prompt_token_ids: tuple[int, ...] = ()
        self.schedule: str | None = None
        self.finished: RunFinished | None = None
        # (arrival time, counters so far) at each speculative step: the acceptance chart's line
        self.counter_history: list[tuple[float, SpecDecodeCounters]] = []

    def add(self, event) -> None:
        if isinstance(event, RunStarted):
            self.run_id, self.prompt_token_ids, self.schedule = event.run_id, event.prompt_token_ids, event.schedule
        elif isinstance(event, StepEvent):
            self.traces[event.engine].add(event)
            if event.counters is not None:
                self.counters = event.counters
                self.counter_history.append((event.time, event.counters))
        elif isinstance(event, RunFinished):
            self.finished = event
            self.counters = event.counters
            self.counters_source = getattr(event, "counters_source", None)
            if self.counters_source == PER_REQUEST:
                self.speculative.set_verified_steps(self.counters.num_drafts, self.counters.num_accepted_tokens)

    @property
    def baseline(self) -> EngineTrace:
        return self.traces[BASELINE]

    @property
    def speculative(self) -> EngineTrace:
        return self.traces[SPECULATIVE]

    @property
    def done(self) -> bool:
        return self.finished is not None

    @property
    def first_divergence(self) -> int | None:
        return first_divergence(self.baseline.token_ids, self.speculative.token_ids)

    @property
    def identical(self) -> bool:
        return self.done and not self.finished.error and self.first_divergence is None

    @property
    def speedup(self) -> float | None:
        b, s = self.baseline.tokens_per_s, self.speculative.tokens_per_s
        return s / b if b and s else None

    @property
    def tokens_per_step_ratio(self) -> float | None:
        """How many more tokens a speculative step yields than a baseline step (the acceptance factor)."""
        b, s = self.baseline.tokens_per_step, self.speculative.tokens_per_step
        return s / b if b and s else None

    @property
    def step_cost_ratio(self) -> float | None:
        """How much longer a speculative step takes than a baseline step (the cost factor)."""
        b, s = self.baseline.step_seconds, self.speculative.step_seconds
        return s / b if b and s else None

    @property
    def speedup_per_acceptance_length(self) -> float | None:
        mal = self.counters.mean_acceptance_length
        return self.speedup / mal if self.speedup and mal else None

    def until(self, seconds: float) -> "Comparison":
        """The run as it stood `seconds` after each engine's own submission: both engines on one clock, as
        if each had run alone from time zero. Counters and the verdict come with the last frame only."""
        view = Comparison(self.decode, self.num_speculative_tokens)
        view.run_id, view.prompt_token_ids, view.schedule = self.run_id, self.prompt_token_ids, self.schedule
        view.traces = {role: trace.until(seconds) for role, trace in self.traces.items()}
        submitted = self.speculative.submitted_at
        if submitted is not None:
            view.counter_history = [(t, c) for t, c in self.counter_history if t <= submitted + seconds]
            view.counters = view.counter_history[-1][1] if view.counter_history else SpecDecodeCounters()
        if seconds >= self.replay_seconds:
            view.counters, view.finished, view.counters_source = self.counters, self.finished, self.counters_source
            view.traces = self.traces
        return view

    @property
    def replay_seconds(self) -> float:
        """How long a replay on one clock lasts: the slower engine's submission-to-last-token time."""
        return max((t.total_seconds or 0.0) for t in self.traces.values())
