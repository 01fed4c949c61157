"""One engine's batch, the bench lab's unit: requests on ONE engine (the other idles), at most `concurrency`
in flight, or arriving at given times (open loop); each request's trace and the batch's counters."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass

from specplay.core.events import (
    BASELINE, CHUNKS, ENGINE_DELTA, PER_REQUEST, TOKENS, GenerationRequest, SpecDecodeCounters, StepEvent,
)
from specplay.core.trace import EngineTrace


@dataclass
class BatchResult:
    """One engine's batch (`EnginePair.run_batch`): each request's trace in submission order, the spec-decode
    counters over the batch (zero on the baseline), and the batch's wall time, from the first submission to
    the last token. Counters: the sum of every request's own (PER_REQUEST) where vLLM reported each one,
    else the engine's counters after minus before (ENGINE_DELTA): see `counters_source`."""

    role: str
    traces: list  # EngineTrace per request
    counters: SpecDecodeCounters
    wall_seconds: float
    concurrency: int
    cancelled: bool = False
    counters_source: str = ENGINE_DELTA


class BatchRunner:
    """EnginePair's batches (it provides engines, prompt_token_ids, _call, _run_lock and _ids)."""

    def run_batch(self, role: str, requests: list[GenerationRequest], concurrency: int,
                  cancel: threading.Event | None = None, arrival_times: list[float] | None = None) -> BatchResult:
        """Run `requests` on ONE engine (the other idles), at most `concurrency` in flight: a benchmark's
        batch, so each engine is measured alone. `arrival_times` (seconds after the batch's start, one per
        request): an open-loop batch, each request submitted no earlier than its arrival (`vllm bench serve
        --request-rate`); None: each as soon as a slot is free. Blocks; holds the one-run-at-a-time lock.
        Setting `cancel` aborts what is in flight and submits nothing more. Raises PromptError before
        anything runs."""
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, not {concurrency}")
        if arrival_times is not None and len(arrival_times) != len(requests):
            raise ValueError(f"arrival_times: {len(arrival_times)} for {len(requests)} requests")
        ids = [self.prompt_token_ids(request) for request in requests]
        with self._run_lock:
            return self._call(self._batch(f"batch-{next(self._ids)}", role, ids, requests, concurrency, cancel,
                                          arrival_times))

    async def _batch(self, batch_id: str, role: str, ids: list[list[int]], requests: list[GenerationRequest],
                     concurrency: int, cancel: threading.Event | None,
                     arrival_times: list[float] | None = None) -> BatchResult:
        engine = self.engines[role]
        before = engine.counters()
        # exact step counts, as in a comparison: the baseline's from its tokens, a request's from its counters
        traces = [EngineTrace(role, count_steps_from=TOKENS if role == BASELINE else CHUNKS, prompt_tokens=len(p))
                  for p in ids]
        exact: list[SpecDecodeCounters | None] = [None] * len(requests)  # each request's own, if reported
        slots = asyncio.Semaphore(concurrency)  # FIFO: requests enter in order as earlier ones finish

        async def one(i: int) -> None:
            if arrival_times is not None:  # open loop: wait for this request's arrival
                await asyncio.sleep(max(0.0, started + arrival_times[i] - time.monotonic()))
            async with slots:
                if cancel is not None and cancel.is_set():
                    return
                request_id, submitted = f"{batch_id}-{role}-{i}", time.monotonic()
                traces[i].submitted_at = submitted
                # timestamps taken here, on the loop, as each chunk arrives: no queue between
                async for chunk in engine.stream(request_id, ids[i], requests[i]):
                    traces[i].add(StepEvent(engine=role, step=len(traces[i].step_sizes),
                                            token_ids=tuple(chunk.token_ids), text=chunk.text,
                                            time=time.monotonic(), submitted_at=submitted,
                                            finished=chunk.finished, finish_reason=chunk.finish_reason))
                    exact[i] = chunk.counters
                    if cancel is not None and cancel.is_set() and not chunk.finished:
                        await engine.abort(request_id)
                        break
                if exact[i] is not None:
                    traces[i].set_verified_steps(exact[i].num_drafts, exact[i].num_accepted_tokens)

        started = time.monotonic()
        await _until_done_or_cancelled(asyncio.gather(*(one(i) for i in range(len(requests)))), cancel)
        last = max((t.step_times[-1] for t in traces if t.step_times), default=started)
        counters, source = batch_counters(exact, engine.counters().minus(before))
        return BatchResult(role, traces, counters, last - started, concurrency,
                           cancelled=cancel is not None and cancel.is_set(), counters_source=source)


# After a cancel, how long a batch's requests get to end by their aborts before the batch stops waiting on them:
# an engine that stopped answering (a hung core) sends no more chunks, so a chunk-by-chunk check never comes.
BATCH_ABORT_GRACE_S = 10.0


async def _until_done_or_cancelled(work, cancel: threading.Event | None) -> None:
    """Await `work`; once `cancel` is set, give it BATCH_ABORT_GRACE_S more, then cancel it."""
    task = asyncio.ensure_future(work)
    while not task.done():
        await asyncio.wait([task], timeout=0.25)
        if cancel is not None and cancel.is_set() and not task.done():
            await asyncio.wait([task], timeout=BATCH_ABORT_GRACE_S)
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            return
    task.result()


def batch_counters(per_request: list, delta: SpecDecodeCounters) -> tuple[SpecDecodeCounters, str]:
    """A batch's counters and their source: the sum of every request's own counters when each request has
    them (exact under any other traffic on the engine), else the engine-wide `delta` (vLLM < 0.29, a baseline
    engine, an aborted or unsubmitted request)."""
    if per_request and all(c is not None for c in per_request):
        total = SpecDecodeCounters()
        for c in per_request:
            total = total.plus(c)
        return total, PER_REQUEST
    return delta, ENGINE_DELTA
