"""A link to one finished run (issue 31, 5), through Gradio's deep links: `/?deep_link=NAME` loads the page
with the components saved under NAME. The page saves them itself rather than through gr.DeepLinkButton,
whose route snapshots every component of a session as it stands, among them the session's history table
(every prompt it ran) and its private file links (the history CSV and run JSON, which its later runs
overwrite under the same names, files.hide_session_files). Here those, and every gr.State, are saved as the
page first shows them; the name is random (not the session, not a file's name), one per run a session
shares, and names older than the page's file age or past LINKS_KEPT are deleted. No Gradio import: `app` is
Gradio's server app, as the handler's request has it.

A link is minted only for the session's own finished run as this server made it (the page's "run" State,
which the browser can neither read nor write), never for a run JSON the browser holds. What the browser can
write into Gradio's copy of the session (every handler input: Gradio stores what is posted) is saved as the
page first shows it, the run's own prompt and request put back; so a link shows only what the run showed.
A session keeps at most LINKS_PER_SESSION links, an address LINKS_PER_ADDRESS (one client with six sessions
turned the whole ring over in ~9 minutes, issue 44): their older ones go first, not everyone's."""

from __future__ import annotations

import copy
import secrets
import shutil
import threading
import time
from collections import OrderedDict
from pathlib import Path

LINKS_KEPT = 1000  # links on disk (each a copy of the page's components, tens of kB)
LINKS_PER_SESSION = 3  # a session's own links: a visitor making many runs replaces its own links only
LINKS_PER_ADDRESS = 30  # an address's (hosting.guard.address_key): a few NATs' visitors, a small part of the ring
NO_RUN = "Run first: the link shares a finished run as the page shows it."

_links: OrderedDict = OrderedDict()  # (session, run id) -> (name, created at, the address that made it)
_lock = threading.Lock()


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


def handler_inputs(blocks) -> set[int]:
    """The components some handler takes as input: Gradio writes whatever a client posts for them into the
    session's copy of the page, so a link never shows them as the session has them."""
    return {block._id for fn in blocks.fns.values() for block in fn.inputs}


def shared_components(components: dict[int, dict], defaults: list[dict], private: set[str],
                      posted: set[int] = frozenset(), values: dict[int, object] | None = None) -> list[dict]:
    """The session's components (`session_components`) with the private ones (by elem_id), every State and
    every one a client can post (`posted`), as the page first shows them, except `values` (layout id ->
    value: the run's own inputs); only those the page's layout shows (not the copies themselves)."""
    default = {c["id"]: c for c in defaults}
    values = values or {}
    out = []
    for key, config in components.items():
        if not config or key not in default:
            continue
        hidden = ((config.get("props") or {}).get("elem_id") in private or config.get("type") == "state"
                  or key in posted)
        saved = copy.deepcopy(default[key] if hidden else config)
        if key in values and "props" in saved:
            saved["props"]["value"] = values[key]
        out.append(saved)
    return out


def run_link(app, session: str, run_id: str | None, private: set[str], max_age_s: float,
             values: dict[int, object] | None = None, owner: str | None = None) -> str | None:
    """The deep-link name of `session`'s finished run `run_id` (the server's own: the caller reads it from the
    session's run State) as its page shows it now, with `values` (the run's own inputs) in the posted
    components; the same name again for the same run. None without a finished run. `owner`: the address
    asking (its oldest link goes past LINKS_PER_ADDRESS)."""
    import orjson

    holder = app.state_holder
    if run_id is None or session not in holder:
        return None
    components = session_components(holder[session])
    folder = Path(app.uploaded_file_dir) / "deep_links"
    with _lock:
        _forget_old(folder, max_age_s)
        known = _links.get((session, run_id))
        if known is not None:
            return known[0]
        _forget_mine(folder, lambda key, link: key[0] == session, LINKS_PER_SESSION)
        if owner is not None:
            _forget_mine(folder, lambda key, link: link[2] == owner, LINKS_PER_ADDRESS)
        name = secrets.token_urlsafe(16)  # 22 of [A-Za-z0-9_-]: Gradio's DEEP_LINK_PATTERN
        blocks = app.get_blocks()
        saved = shared_components(components, blocks.config["components"], private, handler_inputs(blocks), values)
        (folder / name).mkdir(parents=True, exist_ok=True)
        (folder / name / "state.json").write_bytes(
            orjson.dumps(saved, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_PASSTHROUGH_DATETIME, default=_plain))
        _links[(session, run_id)] = (name, time.monotonic(), owner)
        return name


def _plain(value):
    """A component's value as JSON has it (gr.JSON keeps a pydantic model: its dump, as the page shows it)."""
    return value.model_dump() if hasattr(value, "model_dump") else value if value is None or isinstance(
        value, (dict, list, str, int, float, bool)) else str(value)


def _forget_old(folder: Path, max_age_s: float) -> None:
    now = time.monotonic()
    while _links and (len(_links) >= LINKS_KEPT or now - next(iter(_links.values()))[1] > max_age_s):
        _, (name, *_) = _links.popitem(last=False)
        shutil.rmtree(folder / name, ignore_errors=True)


def _forget_mine(folder: Path, mine, kept: int) -> None:
    """The oldest links for which `mine(key, link)` holds while there are `kept` (the one about to be made is
    the next): a session's, an address's."""
    keys = [key for key, link in _links.items() if mine(key, link)]
    for key in keys[:max(0, len(keys) - kept + 1)]:
        name, *_ = _links.pop(key)
        shutil.rmtree(folder / name, ignore_errors=True)
