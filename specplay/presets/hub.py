"""Can the Hugging Face hub be reached from here? Asked at most once per process, offline-safe and bounded:
HF_HUB_OFFLINE=1 says no without asking; PLAYGROUND_HUB_REACHABLE=1/0 answers in its place (tests, and
operators who know their network); else one TCP connection to the hub's host, given up after a short time
(in a thread, so a resolver that hangs can't hang the command)."""

from __future__ import annotations

import os
import threading

HUB_REACHABLE_ENV = "PLAYGROUND_HUB_REACHABLE"
PROBE_TIMEOUT_S = 1.5
_FALSE = ("0", "false", "no", "off")
_answer: bool | None = None
_lock = threading.Lock()


def hf_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "0").strip().lower() not in ("", *_FALSE)


def hub_address() -> tuple[str, int]:
    """The hub's host and port (HF_ENDPOINT, as huggingface_hub reads it: a mirror counts as the hub)."""
    from urllib.parse import urlparse

    try:
        from huggingface_hub import constants

        url = urlparse(constants.ENDPOINT)
        return url.hostname or "huggingface.co", url.port or (80 if url.scheme == "http" else 443)
    except Exception:  # no huggingface_hub, or an odd endpoint
        return "huggingface.co", 443


def _probe(address: tuple[str, int], timeout_s: float) -> bool:
    import socket

    found = []

    def connect():
        try:
            socket.create_connection(address, timeout=timeout_s).close()
            found.append(True)
        except OSError:
            pass

    worker = threading.Thread(target=connect, daemon=True, name="hub-probe")
    worker.start()
    worker.join(timeout_s + 0.5)  # getaddrinfo ignores the socket's timeout; the join doesn't
    return bool(found)


def hub_reachable() -> bool:
    """Whether models can be downloaded from the hub now (HF_HUB_OFFLINE and the override first)."""
    global _answer
    if hf_offline():
        return False
    override = os.environ.get(HUB_REACHABLE_ENV, "").strip().lower()
    if override:
        return override not in _FALSE
    with _lock:
        if _answer is None:
            _answer = _probe(hub_address(), PROBE_TIMEOUT_S)
        return _answer


def forget() -> None:
    """Ask again next time (tests; a network that came up)."""
    global _answer
    with _lock:
        _answer = None
