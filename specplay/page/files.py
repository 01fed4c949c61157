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
