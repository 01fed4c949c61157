"""A finished run's Comparison rebuilt from its RunResult (a recording's `run`, issue 42, 2): both streams
with their chunks' arrival times and each engine's submission, the counters and how the run ended, so the
page replays it, draws its charts and reads its verdict as it does a run it streamed itself. What a
RunResult doesn't keep is rebuilt from what it does: each engine's submission from its first chunk's time
less its time to first token, and the acceptance chart's running counters from the verification steps
(`step_detail`; without them, the final counters at the last chunk). Pure logic: no vLLM, no UI."""

from __future__ import annotations

from bisect import bisect_right
from itertools import accumulate

from specplay.core.events import ENGINE_DELTA, PER_REQUEST, ROLES, RunFinished, SpecDecodeCounters
from specplay.run.comparison import Comparison
from specplay.run.result import EngineResult, RunResult


def comparison_of(run: RunResult, decode=None, prompt_token_ids=()) -> Comparison:
    """`run` as the Comparison that measured it: its figures (speedup, both factors, steps) read back equal."""
    c = Comparison(decode=decode, num_speculative_tokens=run.num_speculative_tokens)
    c.run_id, c.prompt_token_ids, c.schedule = run.run_id or "recording", tuple(prompt_token_ids or ()), run.schedule
    for role in ROLES:
        _fill(c.traces[role], run.side(role))
    counters = run.speculative.counters
    source = run.speculative.acceptance_source or ENGINE_DELTA
    ends = [t.step_times[-1] for t in c.traces.values() if t.step_times]
    c.finished = RunFinished(c.run_id, max(ends, default=0.0), counters, cancelled=run.cancelled, error=run.error,
                             counters_source=source)
    c.counters, c.counters_source = counters, source
    if source == PER_REQUEST:
        c.speculative.set_verified_steps(counters.num_drafts, counters.num_accepted_tokens)
    c.counter_history = counter_history(run)
    return c


def _fill(trace, side: EngineResult) -> None:
    trace.token_ids, trace.text = list(side.token_ids), side.text
    trace.step_sizes, trace.step_times = list(side.step_sizes), list(side.step_times)
    trace.top_logprobs = [None] * len(trace.token_ids)
    if trace.step_times:
        trace.submitted_at = trace.step_times[0] - (side.ttft_s or 0.0)
    trace.finished, trace.finish_reason = True, side.finish_reason


def counter_history(run: RunResult) -> list[tuple[float, SpecDecodeCounters]]:
    """(arrival, counters so far) at each verification step, as a live run's chunks carried them: each step
    at the arrival of the chunk holding its first token. Without step detail: the final counters, once."""
    side, k = run.speculative, run.num_speculative_tokens or 0
    times = list(side.step_times)
    if not times:
        return []
    steps = side.step_detail
    if not steps or any(s.accepted is None for s in steps):
        return [(times[-1], side.counters)]
    ends = list(accumulate(side.step_sizes))  # tokens received by the end of each chunk
    history, drafts, drafted, accepted = [], 0, 0, 0
    per_accepted, per_drafted = [0] * k, [0] * k
    for step in steps:
        reach = step.drafted if step.drafted is not None else k
        # a step that drafted nothing (n-gram found no match) is no draft in vLLM's num_drafts
        drafts, drafted, accepted = drafts + bool(reach), drafted + reach, accepted + step.accepted
        for p in range(min(k, step.accepted)):
            per_accepted[p] += 1
        for p in range(min(k, reach)):
            per_drafted[p] += 1
        when = times[min(bisect_right(ends, step.start), len(times) - 1)]
        history.append((when, SpecDecodeCounters(drafts, drafted, accepted, tuple(per_accepted),
                                                 tuple(per_drafted) if side.drafted_per_position else None)))
    return history

