"""The baseline and speculative engines, resident together, driven from ordinary (threaded) code.

Both engines live on one asyncio loop in a background thread. That loop only moves engine outputs into
a queue, so it keeps up with every step: vLLM merges DELTA chunks a slow consumer hasn't taken yet, and a
merged chunk would hide how many tokens a verification step accepted. Callers (CLI, page, benchmark)
iterate `stream()` at their own pace.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import queue
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterator

from specplay.engine.backends import make_engine
from specplay.engine.base import Backend, EngineInfo, EngineStartError, PromptError
from specplay.engine.batch import BatchRunner
from specplay.core.events import (
    BASELINE, DEFAULT_SCHEDULE, ENGINE_DELTA, PER_REQUEST, SPECULATIVE, EngineSettings, GenerationRequest, PairState,
    RunFinished, RunStarted, Schedule, SpecDecodeCounters, StepEvent,
)

# A short prompt that repeats itself, so warm-up exercises drafting too (the n-gram proposer compiles its
# matcher on first use, which would otherwise land in the first user's time to first token).
WARMUP_PROMPT = "Repeat after me: one two three four, one two three four, one two three four."

ProgressCallback = Callable[[str, float], None]  # (message, fraction done)
# The warm-up's deadline: 24 tokens take seconds (about 10 s on a busy 2-core CPU); an engine core that hangs
# while warming up fails the load with a message at this deadline, instead of leaving it "loading" for good.
WARMUP_TIMEOUT_S = 300.0
# Run ids ("run-N") in the order runs take the engines, over the process's life: the load test reads the
# page's FIFO order from them.
_RUN_NUMBERS = itertools.count()


class _EngineFailed(RuntimeError):
    """One engine's stream failed mid-run (its process died, most often): the message names the engine."""

    def __init__(self, role: str, exc: Exception):
        # vLLM points at a log the page's visitors can't see
        detail = str(exc).split(" See stack trace")[0].strip().rstrip(".")
        super().__init__(f"the {role} engine failed ({type(exc).__name__}: {detail})")


@dataclass
class PairStatus:
    """The pair's own live record, written as it loads (mutable). The page reads it into a frozen
    page.manager.ManagerStatus, which adds what only the page knows (the preset's name, time loading, a
    recovery under way): one vocabulary (PairState), two owners, so neither class carries the other's fields."""

    state: str = PairState.IDLE
    message: str = ""
    progress: float = 0.0
    load_seconds: dict | None = None


class EnginePair(BatchRunner):
    # In-process engines share this process: after a failure the survivor's request stops with the run (the
    # page then replaces the dead engine only).
    abort_partner_on_failure = True
    # A stream that hasn't ended this long after it began is given up (an engine core hung, e.g. SIGSTOP):
    # both requests aborted, RunFinished names the engine that stopped answering. None: no deadline.
    answer_timeout_s: float | None = None
    warmup_timeout_s: float = WARMUP_TIMEOUT_S

    def __init__(self, baseline: EngineSettings, speculative: EngineSettings, warmup: bool = True,
                 tag=None):
        # What the caller loaded into the pair (the layers above put the preset here); never read here.
        self.tag = tag
        self.engines: dict[str, Backend] = {BASELINE: make_engine(baseline), SPECULATIVE: make_engine(speculative)}
        self.status = PairStatus()
        self._warmup = warmup
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="engine-pair-loop", daemon=True)
        self._thread.start()
        self._run_lock = threading.Lock()  # one comparison at a time: clean timings, clean counters
        self._ids = _RUN_NUMBERS  # shared by every pair in the process: a reloaded pair doesn't start over
        self._cancelled: set[str] = set()

    # -- life cycle -------------------------------------------------------------------------------
    def start(self, progress: ProgressCallback | None = None) -> None:
        """Start baseline, then speculative (a GPU's memory profiling needs them one after the other),
        then warm both. Blocks; raises EngineStartError with the failing engine named."""

        def report(message: str, fraction: float) -> None:
            self.status.message, self.status.progress = message, fraction
            if progress:
                progress(message, fraction)

        self.status.state = PairState.LOADING
        load_seconds = {}
        try:
            for i, role in enumerate((BASELINE, SPECULATIVE)):
                report(f"loading the {role} engine", i / 2)
                self._call(self.engines[role].start())
                load_seconds[role] = round(self.engines[role].load_seconds, 1)
            if self._warmup:
                report("warming up both engines", 0.95)
                self._warm_up()
        except Exception as exc:
            self.status.state, self.status.message = PairState.ERROR, str(exc)
            raise
        self.status.load_seconds = load_seconds
        self.status.state = PairState.READY
        report("ready", 1.0)

    def swap_speculative(self, settings: EngineSettings, tag=None,
                         progress: ProgressCallback | None = None) -> None:
        """Replace only the speculative engine (same baseline): switching between presets that share a
        target reloads one engine, not two."""
        self.replace_engines({SPECULATIVE: settings}, tag, progress)

    def replace_engines(self, settings: dict[str, EngineSettings], tag=None,
                        progress: ProgressCallback | None = None) -> None:
        """Start new engines for these roles (each old one shut down first: one GPU's memory), the others
        staying loaded: a switch replaces the speculative engine, a repair the engine that died."""
        with self._run_lock:
            self.status.state = PairState.LOADING
            try:
                for role, role_settings in settings.items():
                    if progress:
                        progress(f"loading the {role} engine", 0.5)
                    self._call(self._shutdown_one(role))
                    self.engines[role] = make_engine(role_settings)
                    self._call(self.engines[role].start())
            except Exception as exc:
                self.status.state, self.status.message = PairState.ERROR, str(exc)
                raise
            self.tag = tag or self.tag
            self.status.load_seconds = {**(self.status.load_seconds or {}),
                                        **{role: round(self.engines[role].load_seconds, 1) for role in settings}}
        if self._warmup:
            try:
                self._warm_up()
            except Exception as exc:
                self.status.state, self.status.message = PairState.ERROR, str(exc)
                raise
        self.status.state, self.status.message, self.status.progress = PairState.READY, "ready", 1.0

    async def _shutdown_one(self, role: str) -> None:
        self.engines[role].shutdown()
        await asyncio.sleep(0.1)

    def _warm_up(self) -> None:
        if self.engines[BASELINE].token_ids_only:
            request = GenerationRequest(prompt_token_ids=tuple(range(1000, 1032)) * 2, max_tokens=16,
                                        ignore_eos=True)
        else:
            request = GenerationRequest(prompt=WARMUP_PROMPT, max_tokens=24, ignore_eos=True)
        timeout = self.warmup_timeout_s
        for event in self._bounded_stream(request, Schedule.SEQUENTIAL, None, timeout):
            if isinstance(event, RunFinished) and event.error:  # a dead or hung engine must not pass for ready
                raise EngineStartError(f"warm-up failed: {event.error}"
                                       + (f" (no answer within {timeout:g} s)" if "stopped answering" in event.error
                                          else ""))

    def shutdown(self) -> None:
        """Stop both engine-core processes and the loop thread; nothing is left behind. Bounded (see
        _stop_wait_s): a stop must not hang on an engine; the app ends what outlives it (page/process)."""
        if self._loop.is_running():
            wait_s = self._stop_wait_s()
            try:
                self._call(self._shutdown_engines(), timeout=wait_s)
            except Exception:
                pass
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=2)
        self.status.state = PairState.STOPPED

    def _stop_wait_s(self) -> float:
        """The longest engine's grace (vLLM's for its core: 5 s by default), then the reaping after it
        (Engine.shutdown, up to 2 s), and a margin for a starved machine."""
        return max((e.stop_grace_s for e in self.engines.values()), default=0.0) + 3.0

    async def _shutdown_engines(self) -> None:
        # Both at once, each from a thread (vLLM's shutdown cancels its output task thread-safely): an engine
        # core may use its whole grace period to end, and the two needn't wait for each other. The loop is
        # blocked meanwhile on purpose, as a plain shutdown() call would block it: the output tasks must be
        # cancelled before they run again, not see their engine die and log it as a failure.
        def stop(role: str) -> None:
            try:
                self.engines[role].shutdown()
            except Exception:
                pass
        with concurrent.futures.ThreadPoolExecutor(len(self.engines) or 1) as pool:
            list(pool.map(stop, list(self.engines)))
        await asyncio.sleep(0.1)

    def _call(self, coroutine, timeout: float | None = None):
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)

    # -- running ------------------------------------------------------------------------------------
    @property
    def ready(self) -> bool:
        return self.status.state == PairState.READY

    def prompt_token_ids(self, request: GenerationRequest) -> list[int]:
        """Validate and tokenize once; both engines get exactly these ids. Raises PromptError."""
        if not 1 <= request.max_tokens:
            raise PromptError("max tokens must be at least 1.")
        if request.temperature < 0:
            raise PromptError("temperature must be 0 or more.")
        return self.engines[BASELINE].prompt_token_ids(request)

    def stream(self, request: GenerationRequest, schedule: str = DEFAULT_SCHEDULE,
               cancel: threading.Event | None = None) -> Iterator[RunStarted | StepEvent | RunFinished]:
        """Run `request` through both engines; yield RunStarted, then each StepEvent as it arrives
        (engines interleaved), then RunFinished. Setting `cancel` aborts both requests.
        Raises PromptError before anything runs if the prompt is unusable."""
        return self._bounded_stream(request, schedule, cancel, self.answer_timeout_s)

    def _bounded_stream(self, request, schedule, cancel, timeout: float | None):
        """stream() with `timeout` as the deadline (None: none): a run's, or the warm-up's."""
        if schedule not in tuple(Schedule):
            raise ValueError(f"schedule must be one of {', '.join(map(repr, map(str, Schedule)))}, not {schedule!r}")
        ids = self.prompt_token_ids(request)
        if not self._run_lock.acquire(timeout=-1 if timeout is None else timeout):
            raise EngineStartError("the engines are still busy with an earlier request")
        try:
            yield from self._stream_events(ids, request, schedule, cancel, timeout)
        finally:
            self._run_lock.release()

    def _stream_events(self, ids, request, schedule, cancel, timeout):
        run_id = f"run-{next(self._ids)}"
        events: queue.Queue = queue.Queue()
        yield RunStarted(run_id, tuple(ids), schedule)
        future = asyncio.run_coroutine_threadsafe(self._run(run_id, ids, request, schedule, events), self._loop)
        deadline = None if timeout is None else time.monotonic() + timeout
        aborted, finished = False, set()
        while True:
            if cancel is not None and cancel.is_set() and not aborted:
                aborted = True
                asyncio.run_coroutine_threadsafe(self._abort(run_id), self._loop)
            try:
                item = events.get(timeout=0.1)
            except queue.Empty:
                if deadline is not None and time.monotonic() > deadline:
                    yield self._give_up(run_id, future, finished, aborted)
                    return
                continue
            if isinstance(item, StepEvent) and item.finished:
                finished.add(item.engine)
            yield item
            if isinstance(item, RunFinished):
                break
        future.result()

    def _give_up(self, run_id: str, future, finished: set, aborted: bool) -> RunFinished:
        """The run's end when an engine stopped answering: abort both requests, stop waiting for them."""
        silent = next((role for role in (BASELINE, SPECULATIVE) if role not in finished), SPECULATIVE)
        asyncio.run_coroutine_threadsafe(self._abort(run_id), self._loop)
        future.cancel()
        return RunFinished(run_id, time.monotonic(), SpecDecodeCounters(), cancelled=aborted,
                           error=f"the {silent} engine stopped answering")

    def run(self, request: GenerationRequest, schedule: str = DEFAULT_SCHEDULE) -> list:
        """All events of one run, for callers that don't stream."""
        return list(self.stream(request, schedule))

    async def _abort(self, run_id: str, mark_cancelled: bool = True) -> None:
        if mark_cancelled:  # first: what starts or streams from now on sees it (_stream_one)
            self._cancelled.add(run_id)
        for role in (BASELINE, SPECULATIVE):
            try:
                await self.engines[role].abort(f"{run_id}-{role}")
            except Exception:  # a dead engine has nothing left to abort
                pass

    async def _run(self, run_id: str, ids: list[int], request: GenerationRequest, schedule: str,
                   events: queue.Queue) -> None:
        spec = self.engines[SPECULATIVE]
        counters_before = spec.counters()
        error = exact = None
        try:
            if schedule == Schedule.CONCURRENT:
                tasks = {role: asyncio.ensure_future(self._stream_one(role, run_id, ids, request, events,
                                                                      counters_before))
                         for role in (BASELINE, SPECULATIVE)}
                done, pending = await asyncio.wait(tasks.values(), return_when=asyncio.FIRST_EXCEPTION)
                if pending and self.abort_partner_on_failure:  # one engine failed: stop the other now, or
                    await self._abort(run_id, mark_cancelled=False)      # it generates on and skews the next run
                    await asyncio.wait(pending, timeout=10)
                    for task in pending:
                        task.cancel()
                elif pending:  # a server failed: its partner, a process of its own, finishes its answer
                    await asyncio.wait(pending)
                for task in tasks.values():  # both failed: the second's error read too (asyncio logs unread ones)
                    if task.done() and not task.cancelled():
                        task.exception()
                for task in done:
                    task.result()  # re-raise the failure
                exact = tasks[SPECULATIVE].result()
            else:
                for role in (BASELINE, SPECULATIVE):
                    exact = await self._stream_one(role, run_id, ids, request, events, counters_before)
        except _EngineFailed as exc:  # an engine died mid-run: report it, leave the pair to the caller
            error = str(exc)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
        # The request's own counters where vLLM reported them: exact even if the engine served other
        # requests meanwhile. Else (vLLM < 0.29, an aborted request) the engine's counters since the start.
        counters, source = ((exact, PER_REQUEST) if exact is not None
                            else (spec.counters().minus(counters_before), ENGINE_DELTA))
        cancelled = run_id in self._cancelled
        self._cancelled.discard(run_id)
        events.put(RunFinished(run_id, time.monotonic(), counters, cancelled=cancelled, error=error,
                               counters_source=source))

    async def _stream_one(self, role: str, run_id: str, ids: list[int], request: GenerationRequest,
                          events: queue.Queue, counters_before: SpecDecodeCounters) -> SpecDecodeCounters | None:
        """Stream one engine's request into `events`; return the request's own counters if vLLM reported
        them (speculative engine, vLLM >= 0.29, request finished), else None."""
        engine = self.engines[role]
        if run_id in self._cancelled:  # stopped before this engine's turn (sequential): it doesn't start
            return None
        submitted = time.monotonic()
        step = 0
        exact = None
        try:
            async for chunk in engine.stream(f"{run_id}-{role}", ids, request):
                now = time.monotonic()
                counters = None
                if role == SPECULATIVE:
                    exact = chunk.counters
                    counters = exact if exact is not None else engine.live_counters().minus(counters_before)
                events.put(StepEvent(engine=role, step=step, token_ids=tuple(chunk.token_ids), text=chunk.text,
                                     time=now, submitted_at=submitted, finished=chunk.finished,
                                     finish_reason=chunk.finish_reason, counters=counters, logprobs=chunk.logprobs))
                step += 1
                if run_id in self._cancelled and not chunk.finished:  # the abort came before vLLM knew the
                    await engine.abort(f"{run_id}-{role}")                # request (a no-op then): again
        except Exception as exc:
            raise _EngineFailed(role, exc) from exc
        return exact if role == SPECULATIVE else None

    def engine_info(self) -> dict[str, EngineInfo]:
        """Per engine, how vLLM resolved its configuration (async scheduling, dtype, method, k)."""
        return {role: engine.info() for role, engine in self.engines.items()}

    def process_ids(self) -> dict[str, list[int]]:
        """Engine-core process ids per engine, for telemetry (VRAM via NVML, RSS via psutil)."""
        return {role: list(engine.pids) for role, engine in self.engines.items()}
