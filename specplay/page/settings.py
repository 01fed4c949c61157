"""What the operator of a hosted page sets (app.py's flags or --config), and visitors can't reach: who may
switch presets, how long a run may take, how many events may wait, how much history a session keeps.
Also the scrubbing of messages shown to visitors. No Gradio here."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class PageSettings:
    allow_switching: bool = True  # off on a public page unless the operator turns it on
    max_run_seconds: float = 300.0  # a run is stopped after this long
    queue_size: int = 32  # queued runs and switches; Stop and the status poll bypass the queue
    history_rows: int = 100  # per session; the oldest rows go first


# Absolute paths (two or more components) in an error message say where things live on the server.
_PATH = re.compile(r"(?:[A-Za-z]:)?(?:/[\w.\-+@~]+){2,}/?")


def scrub(message: str) -> str:
    """A message safe to show a visitor: no server paths."""
    return _PATH.sub("…", message)
