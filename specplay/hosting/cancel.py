"""Stop buttons find their own session's run here (a session is the page's session id). No Gradio."""

from __future__ import annotations

import threading

from specplay.hosting.rate import unqueued_call


class CancelRegistry:
    def __init__(self):
        self._events: dict[str, threading.Event] = {}
        self._lock = threading.Lock()

    def new(self, session: str) -> threading.Event:
        with self._lock:
            self._events[session] = event = threading.Event()
            return event

    def cancel(self, session: str) -> bool:
        with self._lock:
            event = self._events.get(session)
        if event is None:
            return False
        event.set()
        return True

    def done(self, session: str, event: threading.Event) -> None:
        with self._lock:
            if self._events.get(session) is event:
                del self._events[session]


def answered_first(handler, registry: CancelRegistry, answer=()):
    """Mark `handler` (a Stop button's: it cancels its session's run in `registry`) for `StopFirst`, which
    cancels and answers `answer` (the handler's outputs) itself; the handler stays as Gradio's fallback."""
    handler.playground_cancels, handler.playground_answer = registry, list(answer)
    return handler


class StopFirst:
    """ASGI: a Stop button's call sets its session's cancel and is answered here, before Gradio: Gradio runs an
    unqueued handler in its thread pool, behind whatever holds it, and after an engine was killed and reloaded
    on the real CPU page Stop's request went unanswered 18.3-18.9 s (2026-12-05). `find(fn_index, api_name)`
    gives the marked handler of a direct call (`answered_first`) or None; `reply(answer)` Gradio's JSON answer
    of a direct call (hosting/gradio_internals.py)."""

    def __init__(self, app, find, reply, body_limit: int = 16 * 1024):
        self.app, self.find, self.reply, self.body_limit = app, find, reply, body_limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or not unqueued_call(scope):
            return await self.app(scope, receive, send)
        body, more = b"", True
        while more and len(body) <= self.body_limit:  # the rate guard ahead capped it; a small JSON object
            message = await receive()
            if message["type"] != "http.request":
                return
            body, more = body + message.get("body", b""), message.get("more_body", False)
        handler, session = self._stop(scope, body)
        if handler is not None:
            handler.playground_cancels.cancel(session)
            return await _answer(send, self.reply(handler.playground_answer))
        given = [False]

        async def replay():
            if not given[0]:
                given[0] = True
                return {"type": "http.request", "body": body, "more_body": more}
            return await receive()

        return await self.app(scope, replay, send)

    def _stop(self, scope, body: bytes):
        import json

        try:
            call = json.loads(body)
        except ValueError:
            return None, None
        if not isinstance(call, dict):
            return None, None
        name = scope.get("path", "").rstrip("/").rsplit("/", 1)[-1]
        index = call.get("fn_index")
        handler = self.find(index if isinstance(index, int) else None, name)
        session = call.get("session_hash")
        if handler is None or not isinstance(session, str) or not session:
            return None, None
        return handler, session


async def _answer(send, body: bytes) -> None:
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
