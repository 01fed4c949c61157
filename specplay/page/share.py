"""A link to one finished run (issue 31, 5), through Gradio's deep links: `/?deep_link=NAME` loads the page
with the components saved under NAME. The page saves them itself rather than through gr.DeepLinkButton,
whose route snapshots every component of a session as it stands, among them the session's history table
(every prompt it ran) and its private file links (the history CSV and run JSON, which its later runs
overwrite under the same names, files.hide_session_files). Here those, and every gr.State, are saved as the
page first shows them; the name is random (not the session, not a file's name), one per run a session
shares, and names older than the page's file age or past LINKS_KEPT are deleted. No Gradio import: `app` is
Gradio's server app, as the handler's request has it."""

from __future__ import annotations

import copy
import secrets
import shutil
import threading
import time
from collections import OrderedDict
from pathlib import Path

LINKS_KEPT = 1000  # links on disk (each a copy of the page's components, tens of kB)
NO_RUN = "Run first: the link shares a finished run as the page shows it."

_links: OrderedDict = OrderedDict()  # (session, run id) -> (name, created at)
_lock = threading.Lock()


def finished_run_id(components: dict[int, dict], result_id: int) -> str | None:
    """The run id the session's run JSON shows, if that run has finished (a streaming one has no link)."""
    value = _plain(((components.get(result_id) or {}).get("props") or {}).get("value"))
    if isinstance(value, dict) and value.get("run_id") and not value.get("streaming"):
        return str(value["run_id"])
    return None


def session_components(state) -> dict[int, dict]:
    """Layout id -> the component's config as this session shows it. A component a handler updated with
    gr.update is a new object in Gradio's session, with an id of its own, and Gradio writes its later values
    under that id: the layout's id is given the copy's config (Gradio's own deep link shows the stale one)."""
    out = {}
    for key, config in state.config_values.items():
        current = state.blocks_config.blocks.get(key)
        latest = state.config_values.get(getattr(current, "_id", key)) or config
        out[key] = {**latest, "id": key} if latest else latest
    return out


def shared_components(components: dict[int, dict], defaults: list[dict], private: set[str]) -> list[dict]:
    """The session's components (`session_components`) with the private ones (by elem_id), and every State,
    as the page first shows them; only those the page's layout shows (not the copies themselves)."""
    default = {c["id"]: c for c in defaults}
    out = []
    for key, config in components.items():
        if not config or key not in default:
            continue
        hidden = (config.get("props") or {}).get("elem_id") in private or config.get("type") == "state"
        out.append(copy.deepcopy(default[key] if hidden else config))
    return out


def run_link(app, session: str, private: set[str], result_id: int, max_age_s: float) -> str | None:
    """The deep-link name of `session`'s finished run as its page shows it now (the same name again for the
    same run); None when the session has no finished run."""
    import orjson

    holder = app.state_holder
    if session not in holder:
        return None
    components = session_components(holder[session])
    run_id = finished_run_id(components, result_id)
    if run_id is None:
        return None
    folder = Path(app.uploaded_file_dir) / "deep_links"
    with _lock:
        _forget_old(folder, max_age_s)
        known = _links.get((session, run_id))
        if known is not None:
            return known[0]
        name = secrets.token_urlsafe(16)  # 22 of [A-Za-z0-9_-]: Gradio's DEEP_LINK_PATTERN
        saved = shared_components(components, app.get_blocks().config["components"], private)
        (folder / name).mkdir(parents=True, exist_ok=True)
        (folder / name / "state.json").write_bytes(
            orjson.dumps(saved, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_PASSTHROUGH_DATETIME, default=_plain))
        _links[(session, run_id)] = (name, time.monotonic())
        return name


def _plain(value):
    """A component's value as JSON has it (gr.JSON keeps a pydantic model: its dump, as the page shows it)."""
    return value.model_dump() if hasattr(value, "model_dump") else value if value is None or isinstance(
        value, (dict, list, str, int, float, bool)) else str(value)


def _forget_old(folder: Path, max_age_s: float) -> None:
    now = time.monotonic()
    while _links and (len(_links) >= LINKS_KEPT or now - next(iter(_links.values()))[1] > max_age_s):
        _, (name, _) = _links.popitem(last=False)
        shutil.rmtree(folder / name, ignore_errors=True)
