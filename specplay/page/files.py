"""Where the page writes files (under the cache's `page/` folder, one folder each, reused by every start) and
their cleaning: a file or folder older than the operator's max age goes. No Gradio."""

from __future__ import annotations

import shutil
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
