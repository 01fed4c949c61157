"""What protects a public page from one visitor: in every queue group at most one pending event per session,
and a few per client address over all groups (a second is refused at once, with a message); a session that
doesn't read its stream stopped before Gradio keeps megabytes for it; a cap on request bodies (checked
before anything parses them); no uploads (the page takes none) and no fetching of URLs through file=.

The client address is the peer's, as uvicorn gives it: it believes X-Forwarded-For only from the proxies the
operator names (`forwarded_env`), and then takes the rightmost hop that isn't one of them."""

from __future__ import annotations

import asyncio
import contextvars
import ipaddress
import json
import re

BODY_LIMIT_BYTES = 1 << 20  # 1 MiB: a 20,000-character prompt in JSON is well under it
GRACE_CHECKS, GRACE_STEP_S = 5, 0.1  # a conflict is looked at again for half a second before refusing
ADDRESS_PENDING = 3  # per client address, over every group: a few visitors behind one NAT are all served
# Frames waiting for a session at once: past this, it isn't reading. Under the 2 MB; at 1 MiB the
# suite's gradio_client, reading on 2 loaded cores, was stopped mid-run (2026-12-03).
UNREAD_LIMIT_BYTES = 1_900_000
LOOPBACK = ("127.0.0.1", "::1", "localhost")
ONE_PENDING = ("You already have a run waiting or running on this page: wait until it has finished "
               "(or press Stop), then run again.")
ADDRESS_FULL = (f"{ADDRESS_PENDING} runs from your network address are waiting or running already: wait until "
                "one has finished, then run again.")
NOT_READ = "Stopped: this session did not read the run's output (its page was closed or stalled)."


def trusted_proxies(values) -> tuple[str, ...]:
    """The operator's proxies (addresses or networks, as a list or "a,b"): checked; "*" is refused, as it makes
    X-Forwarded-For's leftmost hop, which any client writes, the address."""
    if isinstance(values, str):
        values = values.split(",")
    checked = []
    for value in (str(v).strip() for v in values or ()):
        if not value:
            continue
        try:
            checked.append(str(ipaddress.ip_network(value, strict=False)))
        except ValueError:
            raise ValueError(f"--trusted-proxies: {value!r} is not an IP address or network "
                             "(\"*\" is refused: any client could then choose its address)") from None
    return tuple(checked)


def forwarded_env(trusted: tuple[str, ...]) -> str:
    """FORWARDED_ALLOW_IPS for uvicorn, which rewrites the peer from X-Forwarded-For for these proxies only
    (the rightmost hop that isn't one of them); "" trusts nobody: the peer is the address."""
    return ",".join(trusted)


def client_address(request) -> str | None:
    """The visitor's address: the peer, or for a trusted proxy the hop uvicorn found (`forwarded_env`)."""
    return getattr(getattr(request, "client", None), "host", None)


def address_key(address: str | None) -> str | None:
    """What an address counts as: an IPv4 address as itself (also written as ::ffff:a.b.c.d), an IPv6 one as
    its /64 (one host's or one customer's network: a single client gets billions of addresses in it)."""
    if address is None:
        return None
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return address  # not an address (a test client's name): itself
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


def _address(request, local: bool) -> str | None:
    """The address a request counts under; None for a direct client on this machine of a page served to this
    machine only (the operator, a load test): only the per-session limit applies to it. A request that came
    through a proxy (it says X-Forwarded-For) is never exempt."""
    address = client_address(request)
    headers = getattr(request, "headers", None) or {}
    if local and address in LOOPBACK and not headers.get("x-forwarded-for") and not headers.get("forwarded"):
        return None
    return address_key(address)


def queued_groups(blocks) -> set[str]:
    """The concurrency groups a visitor can join (every queued event's): the limits cover all of them."""
    return {fn.concurrency_id for fn in blocks.fns.values() if fn.queue is not False}


def pending_events(queue) -> list:
    """The events waiting in or being run by Gradio's queue, every group."""
    waiting = [e for q in queue.event_queue_per_concurrency_id.values() for e in q.queue]
    running = [e for job in queue.active_jobs if job for e in job if e.alive and not e.closed]
    return waiting + running


def limit_pending(queue, local: bool = True) -> None:
    """Wrap Gradio's `Queue.push`: an event is refused while its session has one pending in the same group, or
    its address ADDRESS_PENDING in any (`local`: the page listens on this machine only, see `_address`).
    The queue's own checks come after, unchanged."""
    push = queue.push

    async def guarded_push(body, request, username):
        fn = queue.blocks.fns.get(body.fn_index) if body.fn_index is not None else None
        if fn is not None:
            address = _address(request, local)
            # a run that has just sent its last output may not have left the queue's books yet: a moment's grace
            for _ in range(GRACE_CHECKS):
                refusal = _refusal(queue, fn.concurrency_id, body.session_hash, address, local)
                if refusal is None:
                    break
                await asyncio.sleep(GRACE_STEP_S)
            else:
                return False, refusal, "error"  # 400 with the message: the page shows it as it is
        return await push(body, request, username)

    queue.push = guarded_push


def _refusal(queue, group: str, session: str | None, address: str | None, local: bool) -> str | None:
    from_address = 0
    for event in pending_events(queue):
        if session and event.session_hash == session and event.concurrency_id == group:
            return ONE_PENDING
        if address is not None and _address(event.request, local) == address:
            from_address += 1
    return ADDRESS_FULL if from_address >= ADDRESS_PENDING else None


def bound_unread(queue, limit: int = UNREAD_LIMIT_BYTES) -> None:
    """Wrap Gradio's `Queue.send_message`: Gradio keeps every frame of a session until it reads /queue/data.
    Once the frames waiting for a session pass `limit`, it isn't reading: its events are stopped (as if it had
    left: a run releases the engines), its unread frames dropped, and a late reader told why. What waits, not
    what was sent since the queue last emptied: a reader on a loaded machine that stays a few frames behind
    (seen: a 900-token run's Stop) reads on, and was stopped by the old count mid-run."""
    send = queue.send_message

    def bounded_send(event, message):
        send(event, message)
        messages = queue.pending_messages_per_session.get(event.session_hash)
        if messages is None or not event.alive:
            return
        if _waiting_bytes(messages) > limit:
            _stop_unread(queue, event, messages)

    queue.send_message = bounded_send


def _waiting_bytes(messages) -> int:
    """The bytes of the frames in Gradio's queue of the session (an asyncio.Queue: its `_queue` deque), each
    frame sized once (kept on the queue, which goes when the session does)."""
    known = getattr(messages, "playground_sizes", {})
    sizes = {}
    for message in messages._queue:
        kept = known.get(id(message))
        sizes[id(message)] = kept if kept and kept[0] is message else (message, _size(message))
    messages.playground_sizes = sizes
    return sum(size for _, size in sizes.values())


def _size(message) -> int:
    try:
        return len(message.model_dump_json())
    except Exception:  # a value pydantic can't write (Gradio's own send uses orjson's default=str)
        return len(repr(message))


def _stop_unread(queue, event, messages) -> None:
    from gradio.server_messages import ProcessCompletedMessage

    failed = {"output": {"error": NOT_READ}, "success": False}
    ends = []
    while not messages.empty():  # the frames go; an earlier event's end stays, small, so a reader's stream closes
        old = messages.get_nowait()
        if getattr(old, "msg", None) == "process_completed":
            ends.append(old.model_copy(update=failed))
    for message in ends + [ProcessCompletedMessage(event_id=event._id, **failed)]:
        messages.put_nowait(message)
    messages.playground_sizes = {}
    for job in queue.active_jobs:
        for other in job or ():
            if other.session_hash == event.session_hash:
                other.alive = False  # Gradio's own mark for a client gone: the run's generator is closed
class NoSessionFromUnqueued:
    """ASGI: Gradio makes (or revives) a session's state, a copy of the page's config, for every call that
    names a session, in a least-recently-used store of `session_capacity`: with more tabs open than that,
    each 1 Hz status poll evicted another tab's session (its history, its replay), and a client calling the
    stepper's or lesson's unqueued handlers under invented session names (~127 a second) evicted every real
    tab's. So an unqueued call (/run/predict) never makes a session: for a session Gradio doesn't keep, it
    gets one blank state, shared and never stored (a blank of its own cost 7.5 ms a call), so no unqueued
    handler may write a gr.State (checked at the first scope). Sessions are made by queued events only, which
    the queue's limits bound."""

    unqueued = contextvars.ContextVar("playground_unqueued", default=False)  # this request is a /run/predict

    def __init__(self, app, page):
        self.app, self.page, self.ready = app, page, False

    async def __call__(self, scope, receive, send):
        if not self.ready:
            _blank_for_unknown_sessions(self.page, self.unqueued)
            self.ready = True
        if scope["type"] == "http" and scope.get("path", "").endswith("/run/predict"):
            self.unqueued.set(True)
        return await self.app(scope, receive, send)


def _blank_for_unknown_sessions(page, unqueued) -> None:
    from gradio.state_holder import SessionState, StateHolder

    for fn in page.fns.values():
        if fn.queue is False and any(type(b).__name__ == "State" for b in fn.outputs):
            raise ValueError(f"an unqueued handler can't write a session's state: {fn.api_name or fn.name}")

    class Holder(StateHolder):
        blank = None

        def __getitem__(self, session_id):
            if unqueued.get() and session_id not in self.session_data:
                if Holder.blank is None:
                    Holder.blank = SessionState(self.blocks)
                return Holder.blank
            return super().__getitem__(session_id)

    page.state_holder.__class__ = Holder


_SCHEME = re.compile(r"[a-z][a-z0-9+.\-]*:", re.I)  # what starts a URL (http:, https:, ...)
# Gradio serves files at /file=X and at its deprecated alias /gradio_api/file/X (one handler: both fetch URLs)
_FILE_ROUTE = re.compile(r"/file(?:=|/)(.*)$")


def _served_file(path: str) -> str:
    found = _FILE_ROUTE.search(path)
    return found.group(1) if found else ""


class GuardMiddleware:
    """ASGI: refuse uploads (403), `file=` links that are URLs (403: Gradio would fetch any public URL for
    anyone and stream it back), and bodies over `limit` bytes (413), by Content-Length or while streaming."""

    def __init__(self, app, limit: int = BODY_LIMIT_BYTES):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope.get("path", "").rstrip("/")
        if path.endswith("/upload") or path == "upload":
            return await _refuse(send, 403, "uploads are turned off on this page")
        if path.endswith("/gradio_api/deep_link"):  # Gradio's: anyone with a session's hash snapshots it, private
            return await _refuse(send, 403, "use the page's own run links")  # links too; page.share makes links
        served = _served_file(path)
        if served and (_SCHEME.match(served) or served.startswith("//")):
            return await _refuse(send, 403, "this page serves its own files only, not URLs")
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
