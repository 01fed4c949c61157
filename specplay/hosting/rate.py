"""The page's doors against anonymous clients (issue 44, 4 and 5): a per-address token bucket on every call
that isn't a page asset or a run's stream (429 with Retry-After past it), a small body cap on the unqueued
calls (413: none of the page's unqueued handlers takes more than a status key or a step index), and Gradio's
routes the page never uses closed (403). Unqueued calls run at once, outside the queue's limits, in Gradio's
thread pool: six connections posting to them slowed a visitor's run 1.5-2x on the real CPU engines and 7.7x
on a stand-in page (2026-12-05). Plain ASGI, no Gradio: the address is the guard's (`guard.counted_address`),
so a direct client of a page served to this machine only (the operator, a load test) is not limited."""

from __future__ import annotations

import math
import re
import sys
import threading
import time
from types import SimpleNamespace

from specplay.hosting.guard import _refuse, counted_address

RATE_PER_S, BURST = 20.0, 60  # a page load is ~10 calls, a visitor's tab ~2 a second: a crowd behind one NAT fits
UNQUEUED_BODY_BYTES = 16 * 1024  # an unqueued handler's inputs: a status key, a step index, a lesson answer
ADDRESSES_KEPT = 4096  # buckets held at once; a full bucket is forgotten first (it is the same as a new one)
SAY_EVERY_S = 60.0  # one log line per limited address a minute, not one per refusal
# Every spelling of a direct (unqueued) handler call: /run/predict, /run/predict/, /run/<name>, /api/<name>
UNQUEUED = re.compile(r"/(?:run|api)/[^/]+/?$|/component_server/?$")
CALL = re.compile(r"/call/")  # Gradio's /call/<name> (/call/v2/<name>) and /call/<name>/<event id>
CLOSED = re.compile(r"/process_recording/?$")  # an anonymous upload Gradio echoes back: the page records nothing
# Served to every page load or held open by one: not counted (the stream of a run, its heartbeat, assets)
FREE_GET = re.compile(r"/queue/data/?$|/heartbeat/|/assets/|/static/|/svelte/|/favicon\.ico$|/theme\.css$"
                      r"|/manifest\.json$|/file[=/]")


def unqueued_call(scope) -> bool:
    """Whether this HTTP scope calls a handler directly, however the route is spelt."""
    return scope.get("method") == "POST" and bool(UNQUEUED.search(scope.get("path", "")))


def makes_no_session(scope) -> bool:
    """Whether this HTTP scope may name a session without Gradio storing it: a direct call, or Gradio's
    /call/<name>, which looks the session up before it joins the queue (the queued event makes it, if queued)."""
    return unqueued_call(scope) or bool(CALL.search(scope.get("path", "")))


def scope_address(scope, local: bool) -> str | None:
    """The address an ASGI scope counts under (`guard.counted_address`: None for an exempt local client)."""
    client = scope.get("client") or (None,)
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or ()}
    return counted_address(SimpleNamespace(client=SimpleNamespace(host=client[0]), headers=headers), local)


class Buckets:
    """A token bucket per address: `rate` calls a second on average, `burst` at once."""

    def __init__(self, rate: float = RATE_PER_S, burst: int = BURST, kept: int = ADDRESSES_KEPT):
        self.rate, self.burst, self.kept = rate, burst, kept
        self._tokens: dict[str, tuple[float, float]] = {}  # address -> (tokens, when counted)
        self._lock = threading.Lock()

    def take(self, address: str, now: float | None = None) -> float:
        """0 when a call from `address` may go now (a token taken), else the seconds until one may."""
        now = time.monotonic() if now is None else now
        with self._lock:
            tokens, then = self._tokens.get(address, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - then) * self.rate)
            if tokens >= 1.0:
                self._tokens[address] = (tokens - 1.0, now)
                self._forget(now)
                return 0.0
            self._tokens[address] = (tokens, now)
            return (1.0 - tokens) / self.rate

    def _forget(self, now: float) -> None:
        if len(self._tokens) <= self.kept:
            return
        full_after = self.burst / self.rate
        for address, (_, then) in list(self._tokens.items()):
            if now - then >= full_after:
                del self._tokens[address]
        while len(self._tokens) > self.kept:  # all busy: the oldest counted goes
            del self._tokens[next(iter(self._tokens))]


class RateMiddleware:
    """ASGI: closed routes 403; past an address's bucket 429 with Retry-After; an unqueued call's body over
    `body_limit` 413 (by Content-Length; one without is read up to the limit and refused past it)."""

    def __init__(self, app, local: bool = True, buckets: Buckets | None = None,
                 body_limit: int = UNQUEUED_BODY_BYTES):
        self.app, self.local, self.buckets, self.body_limit = app, local, buckets or Buckets(), body_limit
        self._said: dict[str, float] = {}

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope.get("path", "")
        if CLOSED.search(path):
            return await _refuse(send, 403, "this page takes no recordings")
        counted = not (scope.get("method") in ("GET", "HEAD") and FREE_GET.search(path))
        address = scope_address(scope, self.local) if counted else None
        if address is not None:
            wait = self.buckets.take(address)
            if wait:
                self._say(address)
                return await _too_many(send, wait)
        if unqueued_call(scope):
            length = dict(scope.get("headers") or []).get(b"content-length")
            if length is not None and (not length.isdigit() or int(length) > self.body_limit):
                return await _refuse(send, 413, f"a direct call's body is over {self.body_limit} bytes")
            if length is None:
                return await self._capped(scope, receive, send)
        return await self.app(scope, receive, send)

    async def _capped(self, scope, receive, send):
        """A body without Content-Length (chunked): read whole here, up to the limit, then handed on."""
        chunks, seen = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return
            chunks.append(message.get("body", b""))
            seen += len(chunks[-1])
            if seen > self.body_limit:
                return await _refuse(send, 413, f"a direct call's body is over {self.body_limit} bytes")
            if not message.get("more_body"):
                break
        body, given = b"".join(chunks), [False]

        async def replay():
            if not given[0]:
                given[0] = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return await self.app(scope, replay, send)

    def _say(self, address: str) -> None:
        now = time.monotonic()
        if now - self._said.get(address, -math.inf) >= SAY_EVERY_S:
            if len(self._said) > ADDRESSES_KEPT:
                self._said.clear()
            self._said[address] = now
            print(f"rate limit: {address} is over {RATE_PER_S:g} calls a second; refused (429) for now",
                  file=sys.stderr, flush=True)


async def _too_many(send, wait: float) -> None:
    body = b'{"detail": "too many calls from your address: wait a moment"}'
    try:
        await send({"type": "http.response.start", "status": 429,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"retry-after", str(max(1, math.ceil(wait))).encode())]})
        await send({"type": "http.response.body", "body": body})
    except Exception:  # the client left: nothing more to say
        pass
