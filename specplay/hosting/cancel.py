"""Stop buttons find their own session's run here (a session is the page's session id). No Gradio."""

from __future__ import annotations

import threading


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
