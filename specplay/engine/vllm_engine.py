"""The in-process backend (engine.base.Backend): one vLLM AsyncLLM engine in this process: start, stream
per-step chunks, per-engine spec-decode counters, and each request's own counters where the installed vLLM
reports them.

The only module that runs vLLM; engine.probes also imports it, to ask what the installed vLLM accepts.
Everything above the engine layer sees the plain data in `core.events` and `engine.base`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from contextlib import contextmanager
from typing import AsyncIterator

from specplay.core.events import EngineSettings, GenerationRequest, SpecDecodeCounters
from specplay.core.hardware import pin_process
from specplay.engine import processes
from specplay.engine.kv_cache import kv_cache_bytes
from specplay.engine.base import (  # noqa: F401 (PromptError: the tests' old import path)
    Chunk, EngineInfo, EngineStartError, PromptError, checked_prompt_ids, template_ids,
)
from specplay.engine.probes import (
    PER_REQUEST_METRICS_ARG, per_request_metrics_level, supports_per_request_metrics, vllm_facts,
)


class _CountersLogger:
    """A StatLoggerBase of this engine's own: vLLM calls record() every step with the scheduler's
    SpecDecodingStats. (The shared Prometheus registry is wiped by the second engine in a process.)"""

    def __init__(self, vllm_config=None, engine_index: int = 0):
        self.num_drafts = self.num_draft_tokens = self.num_accepted_tokens = 0
        self.kv_cache_usage: float | None = None  # the scheduler's latest: share of KV cache blocks in use
        spec = getattr(vllm_config, "speculative_config", None)
        # one slot per draft position, sized once from k as vLLM sizes its own SpecDecodingStats
        self.accepted_per_position = [0] * (spec.num_speculative_tokens if spec is not None else 0)
        self.drafted_per_position = [0] * len(self.accepted_per_position)
        self.drafted_known = True  # until a vLLM's stats lack num_draft_tokens_per_pos (before 0.32)

    def record(self, scheduler_stats, iteration_stats, mm_cache_stats=None, engine_idx: int = 0, **_):
        usage = getattr(scheduler_stats, "kv_cache_usage", None)
        if usage is not None:  # vllm:kv_cache_usage_perc, as this engine's scheduler last reported it
            self.kv_cache_usage = float(usage)
        stats = getattr(scheduler_stats, "spec_decoding_stats", None)
        if stats is None:
            return
        self.num_drafts += stats.num_drafts
        self.num_draft_tokens += stats.num_draft_tokens
        self.num_accepted_tokens += stats.num_accepted_tokens
        for i, n in enumerate(stats.num_accepted_tokens_per_pos):
            self.accepted_per_position[i] += n
        drafted = getattr(stats, "num_draft_tokens_per_pos", None)
        self.drafted_known = self.drafted_known and drafted is not None
        for i, n in enumerate(drafted or ()):
            self.drafted_per_position[i] += n

    def log_engine_initialized(self):
        pass

    def log(self):
        pass

    def record_sleep_state(self, *args, **kwargs):
        pass

    def snapshot(self) -> SpecDecodeCounters:
        return SpecDecodeCounters(self.num_drafts, self.num_draft_tokens, self.num_accepted_tokens,
                                  tuple(self.accepted_per_position),
                                  tuple(self.drafted_per_position) if self.drafted_known else None)


def _model_runner(config, facts=None) -> str | None:
    """"v2" (Model Runner V2) or "v1", as this vLLM decided for the engine; "v2" where V2 is the only runner
    (0.34: its config has no `use_v2_model_runner` since V1 was removed); None where the installed vLLM
    doesn't say (no such config field, e.g. 0.26). `facts`: the installed vLLM's (engine.probes)."""
    try:
        v2 = getattr(config, "use_v2_model_runner", None)
    except Exception:  # a property that checks features may raise on configs it doesn't expect
        return None
    if v2 is None and config is not None:
        if facts is None:
            facts = vllm_facts()
        return "v2" if facts is not None and facts.has_v2_runner and not facts.has_v1_runner else None
    return None if v2 is None else ("v2" if v2 else "v1")


def request_counters(completion) -> SpecDecodeCounters | None:
    """The request's own spec-decode counters from a finished CompletionOutput, or None where vLLM didn't
    attach them (vLLM < 0.29, metrics off, an aborted request, a baseline engine, an unexpected shape)."""
    metrics = getattr(completion, "spec_decode_metrics", None)
    histogram = getattr(metrics, "histogram", None)
    drafted = getattr(metrics, "num_draft_tokens", None)
    if histogram is None or drafted is None:
        return None
    try:
        return SpecDecodeCounters.from_histogram(histogram, drafted, getattr(metrics, "per_step_drafted", None))
    except (TypeError, ValueError):
        return None


# How long vLLM lets an engine-core process (and it, its worker) end after SIGTERM before killing it:
# this variable where the settings set it, else vLLM's default for a shutdown without a timeout.
GRACE_ENV = "VLLM_WORKER_SHUTDOWN_TIMEOUT_SECONDS"
VLLM_DEFAULT_GRACE_S = 5.0

# Top candidates per generated token (SamplingParams.logprobs): at the first divergence they tell a near-tie
# (bf16 rounding, a sampled token) from a bug.
TOP_LOGPROBS = 5


def top_logprobs(positions, limit: int = TOP_LOGPROBS) -> tuple | None:
    """vLLM's per-token logprobs ({token id: Logprob}, a list or FlatLogprobs) as ((text, logprob), ...) per
    token, most likely first; a token without decoded text shows as <id>. None when there are none."""
    if positions is None:
        return None
    out = []
    try:
        for position in positions:
            ranked = sorted((position or {}).items(), key=lambda item: -item[1].logprob)[:limit]
            out.append(tuple((lp.decoded_token if lp.decoded_token is not None else f"<{tid}>", float(lp.logprob))
                             for tid, lp in ranked))
    except (AttributeError, TypeError):  # an unexpected shape: no candidates rather than a failed run
        return None
    return tuple(out)


def chunk_of(out) -> Chunk:
    """A vLLM RequestOutput (DELTA) as a Chunk: its first completion's new tokens and text, their top
    logprobs, and on the last chunk the request's counters, if the output carries them (vLLM 0.26's don't)."""
    completion = out.outputs[0]
    return Chunk(list(completion.token_ids), completion.text or "", bool(out.finished), completion.finish_reason,
                 request_counters(completion) if out.finished else None,
                 top_logprobs(getattr(completion, "logprobs", None)))


@contextmanager
def _environment(overrides: dict):
    """Set variables while an engine starts: its engine-core process is spawned with this environment."""
    saved = {k: os.environ.get(k) for k in overrides}
    os.environ.update({k: str(v) for k, v in overrides.items()})
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class Engine:
    """A started AsyncLLM plus its counters. All async methods run on the event loop that started it."""

    def __init__(self, settings: EngineSettings):
        self.settings = settings
        self.role = settings.role
        self._llm = None
        self._counters: _CountersLogger | None = None
        self._tokenizer = None
        self.pids: list[int] = []  # engine-core process(es): what telemetry measures
        self._processes: list = []  # the same, as psutil processes: what shutdown ends and reaps
        self._ipc_dir: str | None = None  # this engine's own folder for vLLM's sockets (processes.py)
        self.load_seconds: float | None = None
        self.max_model_len: int = int(settings.engine_args.get("max_model_len") or 0)
        # whether vLLM reports this engine's acceptance per request (set at start; speculative engines only)
        self.per_request_metrics: bool = False
        # "v1" | "v2" as vLLM decided at start, inside the engine's environment (None: this vLLM doesn't say)
        self.model_runner: str | None = None
        self.kv_cache_bytes: int | None = None  # what vLLM reserved for its KV cache (set at start)

    async def start(self) -> None:
        from vllm import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM
        from vllm.v1.metrics.loggers import StatLoggerBase

        counters_cls = type("PlaygroundCountersLogger", (_CountersLogger, StatLoggerBase), {})
        loggers: list[_CountersLogger] = []

        def factory(vllm_config, engine_index=0):
            logger = counters_cls(vllm_config, engine_index)
            loggers.append(logger)
            return logger

        engine_args = dict(self.settings.engine_args)
        # vLLM refuses per-request metrics without a speculative_config: the speculative engine only
        if engine_args.get("speculative_config") and supports_per_request_metrics(AsyncEngineArgs):
            engine_args.setdefault(PER_REQUEST_METRICS_ARG, per_request_metrics_level(AsyncEngineArgs))
        self.per_request_metrics = engine_args.get(PER_REQUEST_METRICS_ARG, "none") != "none"
        t0 = time.monotonic()
        before = processes.children()
        self._ipc_dir = processes.ipc_folder()
        if self.settings.host_cores:  # this process and the engine-core process it spawns keep off the
            pin_process(self.settings.host_cores)  # workers' core (core_layout says why)
        try:
            with _environment({**self.settings.env, processes.IPC_ENV: self._ipc_dir}):
                args = AsyncEngineArgs(**engine_args)
                self._llm = AsyncLLM.from_engine_args(args, stat_loggers=[factory])
                # vLLM reads VLLM_USE_V2_MODEL_RUNNER lazily: once the environment is restored the config's
                # property may answer otherwise, so keep what it says now.
                self.model_runner = _model_runner(getattr(self._llm, "vllm_config", None))
        except Exception as exc:
            raise EngineStartError(f"{self.role} engine failed to start: {type(exc).__name__}: {exc}") from exc
        finally:  # a failed start's processes too: shutdown reaps them
            self._processes = processes.new_children(before)
        self.pids = sorted(p.pid for p in self._processes)
        self._counters = loggers[0] if loggers else _CountersLogger()
        if not self.settings.engine_args.get("skip_tokenizer_init"):
            tok = self._llm.get_tokenizer()
            self._tokenizer = await tok if asyncio.iscoroutine(tok) else tok
        self.max_model_len = self._llm.model_config.max_model_len
        self.kv_cache_bytes = kv_cache_bytes(getattr(self._llm, "vllm_config", None))
        self.load_seconds = time.monotonic() - t0

    def info(self) -> EngineInfo:
        """How vLLM resolved this engine's configuration (read from its config, not from a table of
        versions): whether it got async scheduling, its dtype, its speculative method and k, and whether
        vLLM reports its acceptance per request (else a run's acceptance is the stat logger's delta)."""
        config = getattr(self._llm, "vllm_config", None)
        if config is None:
            return EngineInfo()
        spec = config.speculative_config
        return EngineInfo(
            async_scheduling=bool(getattr(config.scheduler_config, "async_scheduling", False)),
            model_runner=self.model_runner,
            dtype=str(config.model_config.dtype).removeprefix("torch."),
            method=getattr(spec, "method", None) if spec is not None else None,
            num_speculative_tokens=spec.num_speculative_tokens if spec is not None else None,
            per_request_metrics=self.per_request_metrics if spec is not None else None,
            kv_cache_bytes=self.kv_cache_bytes,
        )

    def counters(self) -> SpecDecodeCounters:
        return self._counters.snapshot() if self._counters else SpecDecodeCounters()

    live_counters = counters  # in memory: as quick on the pair's loop as anywhere

    def kv_cache_usage(self) -> float | None:
        """The share (0-1) of this engine's KV cache in use at its scheduler's last step (what vLLM exports
        as vllm:kv_cache_usage_perc); None before the first step."""
        return self._counters.kv_cache_usage if self._counters else None

    def prompt_token_ids(self, request: GenerationRequest) -> list[int]:
        """The exact token ids both engines get: the chat template applied once, here."""
        return checked_prompt_ids(request, self._template_ids, self.max_model_len)

    def _template_ids(self, text: str) -> list[int]:
        tok = self._tokenizer
        if tok is None:
            raise PromptError("This preset has no tokenizer (dummy weights): give the prompt as token ids.")
        return template_ids(tok, text)

    def decode(self, token_ids) -> str:
        return self._tokenizer.decode(list(token_ids)) if self._tokenizer is not None else ""

    async def stream(self, request_id: str, prompt_token_ids: list[int],
                     request: GenerationRequest) -> AsyncIterator[Chunk]:
        """Yield a Chunk (new token ids, new text, finished, finish_reason, the request's counters on its
        last chunk where vLLM reports them) once per engine step."""
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        params = SamplingParams(
            max_tokens=request.max_tokens,
            temperature=request.temperature,
            seed=request.seed if request.temperature > 0 else None,
            ignore_eos=request.ignore_eos,
            output_kind=RequestOutputKind.DELTA,
            detokenize=self._tokenizer is not None,
            logprobs=TOP_LOGPROBS,
        )
        prompt = {"prompt_token_ids": list(prompt_token_ids)}
        if request.cache_salt:  # another salt's cached prefix isn't reused: no timing one visitor by another
            prompt["cache_salt"] = request.cache_salt
        async for out in self._llm.generate(prompt, params, request_id):
            yield chunk_of(out)

    async def abort(self, request_id: str) -> None:
        if self._llm is not None:
            await self._llm.abort(request_id)

    def is_alive(self) -> bool:
        return self._llm is not None and not getattr(self._llm, "errored", False)

    check_alive = is_alive  # vLLM's own flag: nothing to ask

    @property
    def token_ids_only(self) -> bool:
        return bool(self.settings.engine_args.get("skip_tokenizer_init"))

    @property
    def devices(self) -> tuple[int, ...]:
        visible = self.settings.env.get("CUDA_VISIBLE_DEVICES") or ""
        return tuple(int(d) for d in str(visible).split(",") if d.strip().isdigit())

    @property
    def stop_grace_s(self) -> float:
        """The grace vLLM gives the engine-core process to exit before killing it: the settings' own where they
        set one (the CPU engines), else vLLM's default."""
        return float(self.settings.env.get(GRACE_ENV) or VLLM_DEFAULT_GRACE_S)

    def shutdown(self) -> None:
        """Stop the engine through vLLM, then end and reap what it leaves (processes.py says what)."""
        tree = processes.engine_tree(self._processes)  # now, while a core's children can still be listed
        try:
            if self._llm is not None:
                grace = self.settings.env.get(GRACE_ENV)  # unset: vLLM's own default, as vLLM decides it
                self._llm.shutdown(**({"timeout": float(grace)} if grace else {}))
        finally:
            self._llm = None
            processes.end_and_reap(tree)
            processes.remove_folder(self._ipc_dir)
            self._ipc_dir, self._processes = None, []
