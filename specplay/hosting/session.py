"""A visitor's session, named once: the id Stop buttons and per-session files are keyed by. No Gradio."""

from __future__ import annotations

import hashlib

ANONYMOUS = "anonymous"  # a call without a session (a direct API call, a test)


def session_id(request) -> str:
    """The page's session id of a Gradio request (None or one without a session: ANONYMOUS)."""
    return getattr(request, "session_hash", None) or ANONYMOUS


def session_stem(session: str) -> str:
    """A file-name stem for the session's files: a hash, so no file served names the session id itself."""
    return hashlib.sha256(session.encode()).hexdigest()[:16]
