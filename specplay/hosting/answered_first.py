"""Direct (unqueued) calls answered before Gradio. Gradio runs an unqueued handler in its thread pool, behind
whatever holds it, and makes each of its outputs anew: a skipped output is a new component instance, each
postprocess a hop to a thread. A handler marked here (`answers_first`) is asked first, with the call's parsed
body, and what it returns (one value per output, as Gradio sends them) is the answer; None hands the call to
Gradio as it came. Stop uses it (on the real CPU page, after an engine was killed and reloaded, Stop's
request went unanswered 18.3-18.9 s behind Gradio's pool, 2026-12-05), and so do the polls that mostly find
nothing new (the status poll, a follower's room poll: 32 followers doubled the presenter's run time on 2
cores, 2026-12-07). Plain ASGI, no Gradio: `find` and `reply` come from hosting/gradio_internals.py."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

from specplay.hosting.rate import unqueued_call

log = logging.getLogger(__name__)


def answers_first(handler, answer: Callable[[dict], list | None], reveals: bool = True):
    """Mark `handler` (an unqueued event's): `answer(call)`, with the call's JSON body (`data`, `session_hash`),
    gives its outputs, or None for Gradio to run `handler` as usual. `handler` stays Gradio's fallback.
    `reveals`: the answer shows the page's content (a poll's), so on a page behind a login it is left to
    Gradio, which checks the login; Stop's (it only cancels the caller's own session) reveals nothing."""
    handler.playground_first, handler.playground_first_reveals = answer, reveals
    return handler


def first_answer(handler, login: bool):
    """The answer function `answers_first` gave `handler`, or None (none given, or it reveals the page's
    content and the page has a `login`)."""
    answer = getattr(handler, "playground_first", None)
    return None if answer is None or (login and getattr(handler, "playground_first_reveals", True)) else answer


class AnsweredFirst:
    """ASGI: a direct call to a marked handler is answered here when its answer function gives one.
    `find(fn_index, api_name)`: the marked handler's answer function, or None; `reply(data)`: Gradio's JSON
    answer of a direct call with these outputs."""

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
        data = self._answer(scope, body)
        if data is not None:
            return await _answer(send, self.reply(data))
        given = [False]

        async def replay():
            if not given[0]:
                given[0] = True
                return {"type": "http.request", "body": body, "more_body": more}
            return await receive()

        return await self.app(scope, replay, send)

    def _answer(self, scope, body: bytes) -> list | None:
        try:
            call = json.loads(body)
        except ValueError:
            return None
        if not isinstance(call, dict) or not isinstance(call.get("session_hash"), str) or not call["session_hash"]:
            return None
        index = call.get("fn_index")
        name = scope.get("path", "").rstrip("/").rsplit("/", 1)[-1]
        answer = self.find(index if isinstance(index, int) else None, name)
        if answer is None:
            return None
        try:
            return answer(call)
        except Exception:  # a bug in an answer must not take the handler down with it: Gradio answers instead
            log.exception("answering a direct call before Gradio failed; Gradio answers it")
            return None


async def _answer(send, body: bytes) -> None:
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
