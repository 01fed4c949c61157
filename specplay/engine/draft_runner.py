"""A draft model on its own, after a run: its greedy continuation (k tokens) of each given context, which is
what vLLM's draft_model proposer drafted at each step at temperature 0. vLLM doesn't return the drafted
tokens, so this is how a draft model's steps get their drafts back (`run.steps.draft_proposals`); each
reconstructed step is then checked against the stream's own counts, as n-gram's are."""

from __future__ import annotations

import asyncio

from specplay.core.events import GenerationRequest
from specplay.engine.backends import make_engine


async def _continuations(engine, contexts: list[list[int]], k: int) -> list[list[int]]:
    request = GenerationRequest(max_tokens=k, temperature=0.0, ignore_eos=True)

    async def one(i: int, ids: list[int]) -> list[int]:
        out: list[int] = []
        async for chunk in engine.stream(f"draft-{i}", ids, request):
            out.extend(chunk.token_ids)
        return out[:k]

    # all at once: one batch a step for the engine, and the shared prompt prefix is cached
    return list(await asyncio.gather(*(one(i, list(c)) for i, c in enumerate(contexts))))


DEADLINE_S = 600.0  # the draft's start and replay together: past it, TimeoutError (the run itself is kept)


def greedy_continuations(settings, contexts: list[list[int]], k: int, deadline_s: float = DEADLINE_S,
                         make=make_engine) -> list[list[int]]:
    """Start an engine from `settings` (the draft model alone), continue each context greedily by k tokens,
    stop it. Blocks; raises the backend's EngineStartError if the draft doesn't start, TimeoutError past
    `deadline_s`. The engine is shut down whatever happens, a failed or stalled start included (its
    processes would otherwise outlive the command)."""
    engine = make(settings)

    async def main() -> list[list[int]]:
        try:
            await engine.start()
            return await _continuations(engine, contexts, k)
        finally:
            engine.shutdown()

    async def bounded() -> list[list[int]]:
        return await asyncio.wait_for(main(), deadline_s)

    return asyncio.run(bounded())
