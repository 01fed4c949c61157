"""The engine pair's waits bounded (a hung engine core ends its run at a deadline, naming it), and the
per-session prefix-cache salt passed to vLLM. No engines: fake ones."""

from __future__ import annotations

import asyncio
import time

import pytest

from specplay.core.events import BASELINE, SPECULATIVE, RunFinished


def _wait(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.02)
    return predicate()


class _HungEngine:
    """An engine whose core stopped (SIGSTOP): it takes the request and never answers."""

    def __init__(self, settings):
        self.settings, self.pids, self.aborted = settings, [], []

    def prompt_token_ids(self, request):
        return list(request.prompt_token_ids)

    def counters(self):
        from specplay.core.events import SpecDecodeCounters

        return SpecDecodeCounters()

    async def stream(self, request_id, ids, request):
        await asyncio.sleep(3600)
        yield None

    async def abort(self, request_id):
        self.aborted.append(request_id)

    stop_grace_s = 0.0

    def shutdown(self):
        pass


@pytest.mark.parametrize("schedule", ["sequential", "concurrent"])
def test_a_stream_on_a_hung_engine_ends_at_its_deadline_naming_the_engine(monkeypatch, schedule):
    from specplay.core.events import EngineSettings, GenerationRequest
    from specplay.engine import pair as pair_module

    monkeypatch.setattr(pair_module, "make_engine", _HungEngine)
    pair = pair_module.EnginePair(EngineSettings(BASELINE, {}), EngineSettings(SPECULATIVE, {}), warmup=False)
    try:
        pair.answer_timeout_s = 0.5
        started = time.monotonic()
        events = list(pair.stream(GenerationRequest(prompt_token_ids=(1, 2, 3), max_tokens=4), schedule=schedule))
        assert time.monotonic() - started < 5
        assert isinstance(events[-1], RunFinished)
        assert events[-1].error == "the baseline engine stopped answering"
        assert _wait(lambda: pair.engines[BASELINE].aborted, 2)
    finally:
        pair.shutdown()


def test_the_vllm_engine_passes_the_salt_with_the_prompt():
    pytest.importorskip("vllm")
    from specplay.core.events import GenerationRequest
    from specplay.engine.vllm_engine import Engine as VllmEngine

    prompts = []

    class LLM:
        async def generate(self, prompt, params, request_id):
            prompts.append(prompt)
            return
            yield

    engine = VllmEngine.__new__(VllmEngine)
    engine._llm, engine._tokenizer = LLM(), None

    async def drain(request):
        return [c async for c in engine.stream("r", [5, 6], request)]
    asyncio.run(drain(GenerationRequest(prompt_token_ids=(5, 6), cache_salt="abc")))
    asyncio.run(drain(GenerationRequest(prompt_token_ids=(5, 6))))
    assert prompts == [{"prompt_token_ids": [5, 6], "cache_salt": "abc"}, {"prompt_token_ids": [5, 6]}]


def test_a_batch_on_a_hung_engine_ends_after_its_cancel_and_grace(monkeypatch):
    """The bench's batch: a cancel (the page's time limit) ends it even when no chunk ever comes."""
    import threading

    from specplay.core.events import EngineSettings, GenerationRequest
    from specplay.engine import pair as pair_module

    monkeypatch.setattr(pair_module, "make_engine", _HungEngine)
    from specplay.engine import batch as batch_module

    monkeypatch.setattr(batch_module, "BATCH_ABORT_GRACE_S", 0.5)
    pair = pair_module.EnginePair(EngineSettings(BASELINE, {}), EngineSettings(SPECULATIVE, {}), warmup=False)
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    try:
        started = time.monotonic()
        batch = pair.run_batch(SPECULATIVE, [GenerationRequest(prompt_token_ids=(1, 2), max_tokens=4)] * 2, 2,
                               cancel=cancel)
        assert time.monotonic() - started < 5 and batch.cancelled
        assert all(not trace.token_ids for trace in batch.traces)
    finally:
        pair.shutdown()
