"""A room that watches one run (issue 42, 5): with the operator's presenter key set (--presenter-key or
PLAYGROUND_PRESENTER_KEY), the visitor whose page address carries it (`?presenter=KEY`, compared in constant
time) drives the page; every other visitor follows, read-only. The queue takes no event from a follower
(gradio_internals.presenter_only): a follower holds no engines, no queue slot and no stored session. What the
presenter's page shows (its run's frames, its lesson step) is kept here, one value per output name, each
with the version it last changed at; a follower's page polls `since(its last key)` and gets only what changed,
a late joiner everything as it stands now. Memory is one page's worth of values, whatever the run's length
or the followers' number. No Gradio: the request is anything with `query_params` (Gradio's, Starlette's)."""

from __future__ import annotations

import hmac
import secrets
import threading

PRESENTER_PARAM = "presenter"  # the page address's query parameter that carries the key
KEY_MIN_CHARS = 12  # a key short enough to guess isn't one (the rate limit bounds guesses, not this)
FOLLOWER_REFUSAL = ("This page follows the presenter's run: only the presenter can start runs here (the "
                    "operator's choice). What the presenter runs shows on this page as it streams.")


def presenter_key_problem(key: str) -> str | None:
    """Why `key` can't be a presenter key, or None: long enough, and what a page address carries unencoded."""
    if len(key) < KEY_MIN_CHARS:
        return f"must be at least {KEY_MIN_CHARS} characters"
    if not all(c.isascii() and (c.isalnum() or c in "-._~") for c in key):
        return "may hold only letters, digits and - . _ ~ (it goes in the page's address)"
    return None


def supplied_key(request) -> str | None:
    """The presenter key a request's page address carries, if any."""
    params = getattr(request, "query_params", None)
    try:
        value = params.get(PRESENTER_PARAM) if params is not None else None
    except Exception:  # a request without parameters the usual way
        return None
    return value if isinstance(value, str) else None


class Room:
    """The presenter rule and the presenter's page as followers see it. `key` None: no room (everyone runs)."""

    def __init__(self, key: str | None = None):
        self._key = key.encode() if key else None
        self._epoch = secrets.token_hex(4)  # a key from before a restart means nothing now: everything is sent
        self._version = 0
        self._values: dict[str, object] = {}
        self._changed: dict[str, int] = {}
        self._lock = threading.Lock()

    @property
    def on(self) -> bool:
        return self._key is not None

    def presents(self, request) -> bool:
        """Whether `request` comes from the presenter's page (always False without a room)."""
        given = supplied_key(request)
        return self._key is not None and given is not None and hmac.compare_digest(given.encode(), self._key)

    def follows(self, request) -> bool:
        """Whether `request` comes from a follower: a room is open and it doesn't carry the key."""
        return self.on and not self.presents(request)

    def publish(self, values: dict) -> None:
        """The presenter's page changed: these outputs (name -> value) as it now shows them."""
        if not values or not self.on:
            return
        with self._lock:
            self._version += 1
            for name, value in values.items():
                self._values[name] = value
                self._changed[name] = self._version

    def since(self, seen) -> tuple[str, dict]:
        """(the key to send next time, the outputs changed since key `seen`): all of them for a key of another
        epoch or none (a new follower, a restart), none changed for the current key."""
        epoch, _, number = str(seen or "").partition(":")
        try:
            after = int(number) if epoch == self._epoch and len(number) <= 18 else -1
        except ValueError:
            after = -1
        with self._lock:
            if after > self._version:
                after = -1
            changed = {name: self._values[name] for name, at in self._changed.items() if at > after}
            return f"{self._epoch}:{self._version}", changed

    def current(self, names) -> dict:
        """The presenter's values of these outputs, as they stand (those never published left out)."""
        with self._lock:
            return {name: self._values[name] for name in names if name in self._values}
