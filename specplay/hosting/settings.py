"""What the operator of a hosted page sets (app.py's flags or --config), and visitors can't reach: who may
switch presets, how long a run may take, how many events may wait, how much history a session keeps.
Also the scrubbing of messages shown to visitors. No Gradio here."""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass(frozen=True)
class PageSettings:
    allow_switching: bool = True  # off on a public page unless the operator turns it on
    max_run_seconds: float = 300.0  # a run is stopped after this long
    queue_size: int = 32  # queued runs and switches; Stop and the status poll bypass the queue
    history_rows: int = 100  # per session; the oldest rows go first
    allow_bench: bool = True  # the Bench tab: off on a public page unless the operator turns it on
    files_max_age_s: float = 3600.0  # history CSVs and bench results older than this are deleted
    # Sessions whose state Gradio keeps in memory (~1 MB each: its copy of the page's config, the history, the
    # last run), least recently used dropped first. Gradio's default, 10,000, lets a closed tab's state stay
    # until 10,000 more have opened; an open tab's status poll touches its session every second.
    session_capacity: int = 128
    # Proxies whose X-Forwarded-For is believed (addresses or networks): the visitor's address is then the
    # rightmost hop that isn't one of them. None: the peer is the address (docs/hosting.md).
    trusted_proxies: tuple[str, ...] = ()
    # The operator's folder of recorded runs the Compare tab offers (page/recordings_view.py); None: none
    recordings: str | None = None
    # The operator's presenter key (hosting/room.py): who has it drives, everyone else follows; None: no room
    presenter_key: str | None = field(default=None, repr=False)


# Absolute paths (two or more components) in an error message say where things live on the server; a
# relative one (`specplay/presets/...`, `<cache>/models/NAME`) says nothing about the server and stays.
_PATH = re.compile(r"(?<![\w.>\-+@~])(?:[A-Za-z]:)?(?:/[\w.\-+@~]+){2,}/?")


# Process ids (torch's out-of-memory text names every process on the GPU: "Process 12345 has 70.00 GiB
# memory in use") say what else runs on the host.
_PID = re.compile(r"\b(process|pid)(\s*[=:]?\s*)\d+\b", re.I)


MESSAGE_MAX_CHARS = 400  # a load failure in the status line: vLLM's can run to pages
# vLLM's pointers to a log or a trace visitors can't see, and the trace itself
_POINTER = re.compile(r"\s*See (?:the )?stack trace[^.]*\.?", re.I)


def scrub_paths(text: str) -> str:
    """`text` with each absolute server path made "…" (an ad-hoc --model /abs/path in the preset's
    description); line breaks kept."""
    return _PATH.sub("…", text)


def scrub(message: str, limit: int | None = None) -> str:
    """A message safe to show a visitor: no server paths, no stack trace or pointer to one, one paragraph;
    at most `limit` characters."""
    message = str(message).split("Traceback (most recent call last)")[0]
    message = _POINTER.sub("", message)
    message = " ".join(line.strip() for line in message.splitlines() if line.strip())
    message = scrub_paths(message)
    message = _PID.sub(r"\1\2…", message)
    return message if limit is None or len(message) <= limit else message[:limit - 1] + "…"
