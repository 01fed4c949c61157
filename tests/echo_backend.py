"""A third backend, for the contract's test: it echoes the prompt back, token for token, in steps of
`tokens_per_step` tokens after the prefill's one (a speculative side: k drafts accepted, one bonus token).
Everything the pair, the run layer and telemetry need comes from engine.base; nothing in specplay/ knows it.
Registered with one line: `register_backend(EchoSettings, EchoEngine)`."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from specplay.core.events import GenerationRequest, SpecDecodeCounters
from specplay.engine.base import Chunk, EngineInfo, EngineStartError, checked_prompt_ids


@dataclass(frozen=True)
class EchoSettings:
    role: str
    tokens_per_step: int = 1  # > 1: a speculative engine, k = tokens_per_step - 1, every draft accepted
    max_model_len: int = 256
    fail_start: bool = False


class EchoEngine:
    stop_grace_s = 0.0
    devices: tuple[int, ...] = ()
    token_ids_only = False

    def __init__(self, settings: EchoSettings):
        self.settings, self.role = settings, settings.role
        self.pids: list[int] = []
        self.load_seconds: float | None = None
        self.max_model_len = settings.max_model_len
        self.per_request_metrics = settings.tokens_per_step > 1
        self._counters = SpecDecodeCounters()
        self._aborted: set[str] = set()
        self._alive = False

    @property
    def k(self) -> int:
        return self.settings.tokens_per_step - 1

    async def start(self) -> None:
        if self.settings.fail_start:
            raise EngineStartError(f"{self.role} echo engine refused to start")
        self._alive, self.load_seconds = True, 0.0

    def info(self) -> EngineInfo:
        if not self._alive:
            return EngineInfo()
        return EngineInfo(backend="echo", model="echo", method="echo" if self.k else None,
                          num_speculative_tokens=self.k or None, per_request_metrics=self.per_request_metrics)

    def prompt_token_ids(self, request: GenerationRequest) -> list[int]:
        return checked_prompt_ids(request, lambda text: [ord(c) for c in text], self.max_model_len, "the echo's")

    def decode(self, token_ids) -> str:
        return "".join(chr(t) for t in token_ids)

    async def stream(self, request_id: str, prompt_token_ids: list[int], request: GenerationRequest):
        out = [prompt_token_ids[i % len(prompt_token_ids)] for i in range(request.max_tokens)]
        # as vLLM: the prefill's one token, then a step of up to k + 1 (k drafts accepted, one bonus)
        bounds = [0, *range(1, len(out), self.settings.tokens_per_step), len(out)]
        accepted = []  # per verification step: drafts accepted (its tokens less one)
        for start, end in zip(bounds, bounds[1:]):
            await asyncio.sleep(0)
            if request_id in self._aborted:
                return
            ids = out[start:end]
            if start:
                accepted.append(len(ids) - 1)
            last = end == len(out)
            counters = None
            if last and self.k:  # each step drafted k; the request's own counters on its last chunk
                counters = SpecDecodeCounters(len(accepted), len(accepted) * self.k, sum(accepted),
                                              tuple(sum(a > i for a in accepted) for i in range(self.k)))
                self._counters = self._counters.plus(counters)
            yield Chunk(ids, self.decode(ids), last, "length" if last else None, counters)

    async def abort(self, request_id: str) -> None:
        self._aborted.add(request_id)

    def counters(self) -> SpecDecodeCounters:
        return self._counters

    live_counters = counters

    def kv_cache_usage(self) -> float | None:
        return 0.0 if self._alive else None

    def is_alive(self) -> bool:
        return self._alive

    check_alive = is_alive

    def shutdown(self) -> None:
        self._alive = False
