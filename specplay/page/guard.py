"""What protects a public page from one visitor: at most one pending run per session and per client address
(a second is refused at once, with a message), a cap on request bodies (checked before anything parses
them), and no uploads (the page takes none). Gradio only through the objects it hands in: no import here."""

from __future__ import annotations

import asyncio
import json

BODY_LIMIT_BYTES = 1 << 20  # 1 MiB: a 20,000-character prompt in JSON is well under it
GRACE_CHECKS, GRACE_STEP_S = 5, 0.1  # a conflict is looked at again for half a second before refusing
LOOPBACK = ("127.0.0.1", "::1", "localhost")
ONE_PENDING = ("You already have a run waiting or running on this page: wait until it has finished "
               "(or press Stop), then run again.")


def client_address(request) -> str | None:
    """The visitor's address: X-Forwarded-For's first hop when a proxy put one there, else the peer's."""
    forwarded = request.headers.get("x-forwarded-for", "") if request is not None else ""
    first = forwarded.split(",")[0].strip()
    if first:
        return first
    client = getattr(request, "client", None)
    return getattr(client, "host", None)


def _keys(event) -> tuple[str | None, str | None]:
    """(session, address) of a queued event; the address is None for a direct loopback client (the operator,
    a load test on this machine), which only the per-session limit applies to."""
    request = event.request
    address = client_address(request)
    direct = request is None or not request.headers.get("x-forwarded-for")
    if direct and address in LOOPBACK:
        address = None
    return event.session_hash, address


def pending_events(queue, groups: tuple[str, ...]) -> list:
    """The events of `groups` (concurrency ids) waiting in or being run by Gradio's queue."""
    waiting = [e for cid, q in queue.event_queue_per_concurrency_id.items() if cid in groups for e in q.queue]
    running = [e for job in queue.active_jobs if job for e in job if e.concurrency_id in groups and not e.closed]
    return waiting + running


def limit_pending(queue, groups: tuple[str, ...] = ("engines", "bench"), message: str = ONE_PENDING) -> None:
    """Wrap Gradio's `Queue.push`: an event of `groups` is refused while the same session or client address
    already has one pending (the queue's own checks come after, unchanged)."""
    push = queue.push

    async def guarded_push(body, request, username):
        fn = queue.blocks.fns.get(body.fn_index) if body.fn_index is not None else None
        if fn is not None and fn.concurrency_id in groups:
            keys = (body.session_hash, _keys(_Probe(request))[1])
            # a run that has just sent its last output may not have left the queue's books yet: a moment's grace
            for _ in range(GRACE_CHECKS):
                if not _conflict(queue, groups, keys):
                    break
                await asyncio.sleep(GRACE_STEP_S)
            else:
                return False, message, "error"  # 400 with the message: the page shows it as it is
        return await push(body, request, username)

    queue.push = guarded_push


def _conflict(queue, groups, keys) -> bool:
    session, address = keys
    for event in pending_events(queue, groups):
        other_session, other_address = _keys(event)
        if (session and other_session == session) or (address and other_address == address):
            return True
    return False


class _Probe:
    """A request not yet made an event, seen as one by `_keys`."""

    def __init__(self, request):
        self.request, self.session_hash = request, None


class GuardMiddleware:
    """ASGI: refuse uploads (403) and bodies over `limit` bytes (413), by Content-Length or while streaming."""

    def __init__(self, app, limit: int = BODY_LIMIT_BYTES):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope.get("path", "").rstrip("/")
        if path.endswith("/upload") or path == "upload":
            return await _refuse(send, 403, "uploads are turned off on this page")
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            return await _refuse(send, 413, f"request body over {self.limit} bytes")
        seen, refused = 0, False

        async def capped_receive():
            nonlocal seen, refused
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit and not refused:  # a body without Content-Length, counted as it comes
                    refused = True
                    await _refuse(send, 413, f"request body over {self.limit} bytes")
                    return {"type": "http.disconnect"}  # the app stops reading; its own answer is dropped
            return message

        async def guarded_send(message):
            if not refused:
                await send(message)

        await self.app(scope, capped_receive, guarded_send)


async def _refuse(send, code: int, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode()
    try:
        await send({"type": "http.response.start", "status": code,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
    except Exception:  # a response had begun already: nothing more can be said
        pass
