"""Close a page served in a background thread (tests, benchmarks) without racing its event loop.

Gradio's `Blocks.close()` sets the app's `stop_event`, an `asyncio.Event`, from the calling thread. If the
server's loop is adding a waiter to it at that moment (every heartbeat connection waits on it), the close
fails with "deque mutated during iteration" (CI on 2026-12-02). The event is set on the loop that owns it
first; Gradio's own `set()` then finds it set and touches nothing."""

from __future__ import annotations

import asyncio


class LoopMarker:
    """ASGI: note the server's event loop on the page, at the first scope it sees (the lifespan's, or the
    first request's, before any of its waiters can exist)."""

    def __init__(self, app, page):
        self.app, self.page = app, page

    async def __call__(self, scope, receive, send):
        if getattr(self.page, "playground_loop", None) is None:
            self.page.playground_loop = asyncio.get_running_loop()
        return await self.app(scope, receive, send)


async def _set(event: asyncio.Event) -> None:
    event.set()


def close(page) -> None:
    """Stop the page's server and free its port; safe from any thread but the server's own."""
    loop = getattr(page, "playground_loop", None)
    event = getattr(getattr(page, "app", None), "stop_event", None)
    if loop is not None and event is not None and loop.is_running():
        try:
            asyncio.run_coroutine_threadsafe(_set(event), loop).result(timeout=5)
        except (TimeoutError, RuntimeError):  # the loop ended (nothing waits any more) or is stuck: Gradio's own set
            pass
    page.close()
