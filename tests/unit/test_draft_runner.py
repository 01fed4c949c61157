"""compare --draft-steps' draft engine (issue 36, 8): shut down whatever happens, its start failing or
stalling included, and bounded by a deadline (before, a draft that failed to start was left running and a
stalled replay had no end). An engine of the declared contract that fails the way a real one can."""

from __future__ import annotations

import asyncio

import pytest

from specplay.engine import draft_runner


class Draft:
    """start() fails, hangs or works; stream() gives each context's next k ids (context[-1] + 1, ...)."""

    def __init__(self, start: str):
        self.mode, self.shut = start, 0

    async def start(self):
        if self.mode == "fails":
            raise RuntimeError("the draft model failed to start")
        if self.mode == "hangs":
            await asyncio.sleep(3600)

    async def stream(self, request_id, ids, request):
        from types import SimpleNamespace

        for i in range(request.max_tokens):
            yield SimpleNamespace(token_ids=[ids[-1] + 1 + i])

    def shutdown(self):
        self.shut += 1


def test_a_working_draft_continues_each_context_and_is_shut_down():
    engine = Draft("works")
    out = draft_runner.greedy_continuations(None, [[1, 2], [5]], 3, make=lambda s: engine)
    assert out == [[3, 4, 5], [6, 7, 8]] and engine.shut == 1


@pytest.mark.parametrize("mode, error", [("fails", RuntimeError), ("hangs", asyncio.TimeoutError)])
def test_a_draft_that_fails_or_stalls_at_start_is_shut_down_and_the_wait_is_bounded(mode, error):
    engine = Draft(mode)
    with pytest.raises(error):
        draft_runner.greedy_continuations(None, [[1, 2]], 3, deadline_s=0.5, make=lambda s: engine)
    assert engine.shut == 1
