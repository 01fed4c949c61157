"""What protects a public page from one visitor: in every queue group at most one pending event per session,
and a few per client address over all groups (a second is refused at once, with a message); a session that
doesn't read its stream stopped before Gradio keeps megabytes for it; a cap on request bodies (checked
before anything parses them); no uploads (the page takes none) and no fetching of URLs through file=.

The client address is the peer's, as uvicorn gives it: it believes X-Forwarded-For only from the proxies the
operator names (`forwarded_env`), and then takes the rightmost hop that isn't one of them."""

from __future__ import annotations

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


def counted_address(request, local: bool) -> str | None:
    """The address a request counts under; None for a direct client on this machine of a page served to this
    machine only (the operator, a load test): only the per-session limit applies to it. A request that came
    through a proxy (it says X-Forwarded-For) is never exempt."""
    address = client_address(request)
    headers = getattr(request, "headers", None) or {}
    if local and address in LOOPBACK and not headers.get("x-forwarded-for") and not headers.get("forwarded"):
        return None
    return address_key(address)


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
