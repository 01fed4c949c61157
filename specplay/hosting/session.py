"""A visitor's session, named once: the id Stop buttons and per-session files are keyed by. No Gradio."""

from __future__ import annotations

import hashlib
import threading

ANONYMOUS = "anonymous"  # a call without a session (a direct API call, a test)


def session_id(request) -> str:
    """The page's session id of a Gradio request (None or one without a session: ANONYMOUS)."""
    return getattr(request, "session_hash", None) or ANONYMOUS


def session_stem(session: str) -> str:
    """A file-name stem for the session's files: a hash, so no file served names the session id itself."""
    return hashlib.sha256(session.encode()).hexdigest()[:16]


SESSIONS_PER_ADDRESS = 32  # sessions one address may hold in Gradio's store (128 by default): a few NATs' tabs
PASSING_KEPT = 4096  # sessions named only by direct calls, remembered so that Gradio stores none of them
TOO_MANY_SESSIONS = (f"{SESSIONS_PER_ADDRESS} sessions from your network address are open on this page already: "
                     "close a tab, or wait a few minutes, then run again.")


class SessionBook:
    """Who made which session of Gradio's store, and which sessions only direct calls have named. Gradio
    keeps `session_capacity` sessions and evicts the least recently used: invented sessions pushed real tabs
    out (their history, their replay). A session is made only by a queued event of a handler that is queued,
    and an address holds at most `per_address` of those; a handler that isn't queued, however it is called
    (through the queue too: /call/<name>), gets a blank state that is never stored (`passing`). No Gradio."""

    def __init__(self, per_address: int = SESSIONS_PER_ADDRESS, passing_kept: int = PASSING_KEPT):
        self.per_address, self.passing_kept = per_address, passing_kept
        self._owners: dict[str, str] = {}  # session -> the address that made it
        self._passing: dict[str, None] = {}  # insertion-ordered set
        self._lock = threading.Lock()

    def refusal(self, session: str | None, address: str | None, stored) -> str | None:
        """TOO_MANY_SESSIONS when a queued event would make `session` (not in `stored`, Gradio's store) for an
        address holding `per_address` stored sessions already; else None, the session noted as `address`'s."""
        if not session or session in stored:
            return None
        with self._lock:
            self._passing.pop(session, None)  # a queued event makes it for real
            if address is None:
                return None
            if len(self._owners) > 4 * max(len(stored), self.per_address):  # evicted ones forgotten
                self._owners = {s: a for s, a in self._owners.items() if s in stored}
            held = sum(1 for s, a in self._owners.items() if a == address and s in stored and s != session)
            if held >= self.per_address:
                return TOO_MANY_SESSIONS
            self._owners[session] = address
        return None

    def passing(self, session: str | None, stored) -> None:
        """`session` is named by a call of an unqueued handler: not stored unless a queued event makes it."""
        if not session or session in stored:
            return
        with self._lock:
            self._passing[session] = None
            while len(self._passing) > self.passing_kept:
                del self._passing[next(iter(self._passing))]

    def is_passing(self, session: str) -> bool:
        return session in self._passing
