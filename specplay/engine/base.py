"""The backend contract: what the pair (and through it the run, bench and page layers) asks of one engine,
whichever way it runs (an in-process vLLM engine, a `vllm serve` server over HTTP, a test's echo). In the
style of vLLM's own `EngineClient` (vllm/engine/protocol.py), as a `typing.Protocol`: a backend implements it
by shape, imports nothing but this module for the shared types, and is one entry in `engine.backends`.

Also the backend-neutral data every backend speaks: `Chunk` (one streamed step), `EngineInfo` (how the
engine was resolved), `EngineStartError` / `PromptError`, and `checked_prompt_ids` (the prompt rules both
engines share). No vLLM import here.
"""

from __future__ import annotations

from typing import AsyncIterator, Callable, NamedTuple, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, model_serializer

from specplay.core.events import GenerationRequest, SpecDecodeCounters


class EngineStartError(RuntimeError):
    """The backend could not build or start this engine; the message says which engine and why."""


class PromptError(ValueError):
    """The prompt can't be run as given (empty, too long for max_model_len); safe to show to users."""


class Chunk(NamedTuple):
    """One engine step of one request as streamed (vLLM's RequestOutputKind.DELTA). `counters`: on the
    request's last chunk, its own spec-decode counters where the backend reports them, else None.
    `logprobs`: per new token, its top candidates as ((token text, logprob), ...), most likely first; None
    where the backend doesn't report them."""

    token_ids: list[int]
    text: str
    finished: bool
    finish_reason: str | None
    counters: SpecDecodeCounters | None = None
    logprobs: tuple | None = None


# The in-process backend's name in EngineInfo.backend: its JSON has no "backend" or "model" key (as before
# the contract); every other backend names itself there.
IN_PROCESS = "vllm"


class EngineInfo(BaseModel):
    """How the engine resolved its configuration, as far as its backend can tell (None: it can't). The run's
    `engines` carry one per role; its dump is their JSON (`model_validate` reads it back): {} for an engine not
    started, and no `backend` / `model` keys for the in-process backend (its JSON as before the contract)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    async_scheduling: bool | None = None
    model_runner: str | None = None  # "v1" | "v2" as vLLM decided at start
    dtype: str | None = None
    method: str | None = None
    num_speculative_tokens: int | None = None
    per_request_metrics: bool | None = None  # vLLM reports acceptance per request (speculative engines)
    backend: str = IN_PROCESS
    model: str | None = None  # the id a server serves
    kv_cache_bytes: int | None = None  # what vLLM reserved for the KV cache (its blocks × block bytes)

    @property
    def started(self) -> bool:
        return self != EngineInfo()

    @model_serializer(mode="wrap")
    def _json(self, handler):
        if not self.started:
            return {}
        out = handler(self)
        if self.backend == IN_PROCESS:
            out.pop("backend", None), out.pop("model", None)
        return out


def engines_json(engines) -> dict:
    """Per role, the engines' EngineInfo as JSON: what a run's and every benchmark's report writes."""
    return {role: info.model_dump(mode="json") for role, info in engines.items()}


EMPTY_PROMPT = "The prompt is empty: type something for both engines to answer."


def template_ids(tokenizer, text: str) -> list[int]:
    """A text prompt's token ids as the engines get them: through the model's chat template when it has one
    (a user turn, then the assistant's start), else plainly encoded."""
    if not getattr(tokenizer, "chat_template", None):
        return tokenizer.encode(text)
    ids = tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True)
    return ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "input_ids") else ids


def checked_prompt_ids(request: GenerationRequest, template_ids: Callable[[str], list[int]], max_model_len: int,
                       whose: str = "this preset's") -> list[int]:
    """The ids both engines get (in-process or servers): the request's own, or its text through
    `template_ids`; refused when empty or too long for `max_model_len` (0: not known)."""
    if request.prompt_token_ids is not None:
        ids = [int(t) for t in request.prompt_token_ids]
    elif not request.prompt.strip():
        raise PromptError(EMPTY_PROMPT)
    else:
        ids = [int(t) for t in template_ids(request.prompt)]
    if not ids:
        raise PromptError(EMPTY_PROMPT)
    if max_model_len and len(ids) + request.max_tokens > max_model_len:
        raise PromptError(f"The prompt is {len(ids)} tokens; with max tokens {request.max_tokens} that exceeds "
                          f"{whose} max_model_len of {max_model_len}. Shorten the prompt or lower max tokens.")
    return ids


@runtime_checkable
class Backend(Protocol):
    """One engine of the pair. Async methods run on the pair's event loop; the rest from any thread.
    Made by `engine.backends.make_engine(settings)` from its settings (a frozen dataclass with a `role`)."""

    settings: object  # what it was made from: the pair compares them to know what is loaded
    role: str
    pids: list[int]  # its processes on this machine (memory telemetry); [] where none are known
    load_seconds: float | None  # how long start() took
    max_model_len: int  # 0: not known
    per_request_metrics: bool  # it reports each request's own spec-decode counters on its last chunk
    token_ids_only: bool  # no tokenizer: prompts are token ids, decode() gives ""
    devices: tuple[int, ...]  # the GPUs its processes see (CUDA_VISIBLE_DEVICES); (): not known, or all
    stop_grace_s: float  # how long shutdown() may take its processes to end

    async def start(self) -> None:
        """Load or connect; raise EngineStartError naming the engine."""

    def stream(self, request_id: str, prompt_token_ids: list[int],
               request: GenerationRequest) -> AsyncIterator[Chunk]:
        """One Chunk per engine step; the last one finished, with the request's counters where reported."""

    async def abort(self, request_id: str) -> None:
        """Stop a request in flight; a no-op for one that ended or never started."""

    def counters(self) -> SpecDecodeCounters:
        """The engine's spec-decode counters since it started (vLLM's vllm:spec_decode_num_* counters)."""

    def live_counters(self) -> SpecDecodeCounters:
        """The same, read on the pair's loop once a chunk: at once (a slow read answers with its last)."""

    def kv_cache_usage(self) -> float | None:
        """vllm:kv_cache_usage_perc (0-1) at the last step; None where not reported."""

    def info(self) -> EngineInfo:
        """How the engine resolved its configuration (EngineInfo() before start)."""

    def prompt_token_ids(self, request: GenerationRequest) -> list[int]:
        """The exact ids both engines get (checked_prompt_ids); raise PromptError."""

    def decode(self, token_ids) -> str:
        """Token ids as text ("" without a tokenizer)."""

    def is_alive(self) -> bool:
        """Whether it can still serve (as last seen: no blocking call)."""

    def check_alive(self) -> bool:
        """Ask now (the page's watcher, every few seconds while idle); may block briefly."""

    def shutdown(self) -> None:
        """Stop and release what it started; bounded by stop_grace_s (plus reaping)."""
