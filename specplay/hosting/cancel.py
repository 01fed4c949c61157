"""Stop buttons find their own session's run here (a session is the page's session id), and are answered before
Gradio. No Gradio."""

from __future__ import annotations

import threading

from specplay.hosting.answered_first import answers_first


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


def stops_first(handler, registry: CancelRegistry, answer=()):
    """Mark `handler` (a Stop button's: it cancels its session's run in `registry`) to be answered before
    Gradio (hosting/answered_first.py): the session's cancel is set and `answer` (the handler's outputs) sent
    at once; the handler stays as Gradio's fallback."""
    answer = list(answer)

    def stop_first(call: dict) -> list:
        registry.cancel(call["session_hash"])
        return answer

    return answers_first(handler, stop_first, reveals=False)
