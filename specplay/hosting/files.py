"""Where the page writes files (under the cache's `page/` folder, one folder each, reused by every start) and
their cleaning: a file or folder older than the operator's max age goes. No Gradio."""

from __future__ import annotations

import hmac
import os
import secrets
import shutil
import threading
import time
from pathlib import Path

from specplay.core.paths import PAGE_DIR


def page_folder(name: str, root: Path | None = None) -> Path:
    """`<cache>/page/<name>`, created if missing: the same folder on every start (not a new one each)."""
    folder = Path(root or PAGE_DIR) / name
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def clean_old(folder, max_age_s: float, now: float | None = None) -> int:
    """Delete the entries of `folder` not modified for `max_age_s` seconds; returns how many went."""
    now = time.time() if now is None else now
    gone = 0
    for entry in Path(folder).iterdir() if Path(folder).is_dir() else ():
        try:
            if now - entry.stat().st_mtime < max_age_s:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink()
            gone += 1
        except OSError:
            pass  # gone already (another session cleaned it), or not ours to delete
    return gone


_SECRET = secrets.token_bytes(32)  # this process's: a session's file name can't be worked out from anything shown


def session_token(session: str) -> str:
    """A session's name for its files: an HMAC of the session with this process's secret, not its stem
    (which is its prefix-cache salt, shown in its run JSON as `request.cache_salt`)."""
    return hmac.new(_SECRET, session.encode(), "sha256").hexdigest()[:32]


def hide_session_files(values: dict, session: str, served_dir=None) -> dict:
    """A run's outputs with its history CSV moved to a name keyed by this process's secret: written under
    the session's stem, which the run's JSON shows as `request.cache_salt`, anyone who saw that JSON could
    fetch the session's file. The run JSON (`finished_run.exports`) is named by the same token."""
    path = values.get("history_file")
    if not path:
        return values
    token = session_token(session)
    target = Path(path).with_name(f"history-{token}.csv")
    drop_served_copies(served_dir, (target.name, f"run-{token}.json"))  # the last run's, linked no more
    os.replace(path, target)
    return {**values, "history_file": str(target)}


CLEAN_EVERY_S = 600.0  # the page's folders are swept this often, as well as at start and after each run
_watched: dict[str, float] = {}  # folder -> max age (s): one sweeper thread for every page of the process
_sweeps = threading.Condition()
_state = {"count": 0, "thread": None}


def keep_clean(folder, max_age_s: float) -> None:
    """Age `folder`'s entries out now and every CLEAN_EVERY_S from now on, not only when a run finishes (a
    page nobody runs on kept last week's history files)."""
    clean_old(folder, max_age_s)
    with _sweeps:
        _watched[str(folder)] = max_age_s
        if _state["thread"] is None:
            _state["thread"] = threading.Thread(target=_sweep_forever, name="page-files-sweeper", daemon=True)
            _state["thread"].start()
        _sweeps.notify_all()  # a sweeper asleep on an older interval looks again


def sweeps_done() -> int:
    """How many timed sweeps have finished (a test waits for the next one)."""
    with _sweeps:
        return _state["count"]


def wait_for_sweep(after: int, timeout_s: float = 60.0) -> bool:
    with _sweeps:
        return _sweeps.wait_for(lambda: _state["count"] > after, timeout_s)


def _sweep_forever() -> None:
    while True:
        with _sweeps:
            _sweeps.wait(CLEAN_EVERY_S)
            watched = dict(_watched)
        for folder, max_age_s in watched.items():
            clean_old(folder, max_age_s)
        with _sweeps:
            _state["count"] += 1
            _sweeps.notify_all()


def drop_served_copies(served_dir, names) -> int:
    """Delete Gradio's copies of the files `names` (`<served_dir>/<content hash>/<name>`, one folder per
    version) and each folder left empty; returns how many copies went. A session's history CSV and run JSON
    are rewritten by every run and Gradio copies each version it serves: only the latest is linked on the
    page, yet every copy would stay for Gradio's hour (`delete_cache`), some KB a run."""
    gone = 0
    if not served_dir or not Path(served_dir).is_dir():
        return gone
    for name in names:
        for copy in Path(served_dir).glob(f"*/{name}"):
            try:
                copy.unlink()
                gone += 1
                copy.parent.rmdir()  # its own folder (named by its hash), unless another file shares it
            except OSError:
                pass  # gone already (Gradio's own cleaning), or the folder holds another file
    return gone
