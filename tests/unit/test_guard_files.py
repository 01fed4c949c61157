"""What the page serves under /gradio_api/file= (issue 32, 6 and 8): its own history and run files, and no
URL (Gradio fetches any public URL for whoever asks and streams it back). A real Gradio page on a FakePair."""

from __future__ import annotations

import json
from types import SimpleNamespace

import httpx
import pytest

from tests.public_page_fixtures import _manager, by_elem_id, queued_call
from tests.ui_fixtures import FakePair, synthetic_events


@pytest.fixture
def page(tmp_path, monkeypatch):
    from specplay.page import ui
    from specplay.hosting import closing
    from tests.ui_fixtures import free_port

    monkeypatch.setattr(ui, "PAGE_DIR", tmp_path / "page")
    events = synthetic_events([1, 2, 3], [[1], [2, 3]])
    manager = _manager(lambda p, hw, log=print: FakePair(lambda r: events, p))
    demo = ui.build_page(manager)
    ui.launch(demo, "127.0.0.1", free_port(), block=False)
    try:
        yield SimpleNamespace(demo=demo, url=demo.local_url.rstrip("/"), folder=tmp_path / "page",
                              run=next(i for i, fn in demo.fns.items() if fn.api_name == "run"))
    finally:
        closing.close(demo)
        manager.shutdown()


def run_once(page, session) -> dict:
    """One run of `session`, read to its end: its outputs by elem_id."""
    message = queued_call(page.url, page.run, ["hello", 3, 0.0, "sequential", None], session)
    return by_elem_id(page.demo, page.run, message)


def test_file_links_that_are_urls_are_refused_and_the_pages_own_files_served(page):
    out = run_once(page, "s1")
    for name in ("history-csv", "result-json"):
        served = httpx.get(out[name]["url"], timeout=30)
        assert served.status_code == 200 and served.content, (name, served.status_code)
    # one page for every spelling (a page each cost the quick tier 2-3 s)
    for url in ("https://1.1.1.1/", "http://example.com/a.csv", "HTTPS://1.1.1.1/x", "//example.com/x"):
        refused = httpx.get(f"{page.url}/gradio_api/file={url}", timeout=30)
        assert refused.status_code == 403 and "not URLs" in refused.json()["detail"], (url, refused.status_code,
                                                                                       refused.text)
    # Gradio's deprecated alias /gradio_api/file/X reaches the same fetch (issue 36, 4)
    for url in ("https://1.1.1.1/", "http://example.com/a.csv", "//example.com/x"):
        refused = httpx.get(f"{page.url}/gradio_api/file/{url}", timeout=30)
        assert refused.status_code == 403 and "not URLs" in refused.json()["detail"], (url, refused.status_code)
    # and Gradio's run history (its page and its bucket routes) is off (issue 36, 7)
    assert httpx.get(f"{page.url}/gradio_api/runs", timeout=30).status_code == 404
    assert httpx.post(f"{page.url}/gradio_api/run-history/connect", json={}, timeout=30).status_code in (404, 405)


def test_a_sessions_files_are_served_under_a_name_nothing_shown_gives_away(page):
    """The files were named after the session's stem, which is also its prefix-cache salt (the run JSON
    showed it as request.cache_salt): whoever saw it could fetch that session's latest history."""
    from specplay.hosting.session import session_stem

    out = run_once(page, "s1")
    stem = session_stem("s1")
    csv, run_json = out["history-csv"]["url"], out["result-json"]["url"]
    assert stem not in csv and stem not in run_json and stem not in json.dumps(out["result"]), (csv, run_json)
    assert httpx.get(csv, timeout=30).status_code == 200 and httpx.get(run_json, timeout=30).status_code == 200
    folder = page.folder / "history"  # where the page keeps them, servable (Gradio's allowed_paths)
    assert sorted(p.name for p in folder.iterdir()) == sorted(u.rsplit("/", 1)[1] for u in (csv, run_json))
    for guessed in (f"history-{stem}.csv", f"run-{stem}.json"):
        assert httpx.get(f"{page.url}/gradio_api/file={folder}/{guessed}", timeout=30).status_code != 200
    again = run_once(page, "s1")  # the same session's next run: the same (private) name, overwritten
    assert again["history-csv"]["url"].rsplit("/", 1)[1] == csv.rsplit("/", 1)[1]


def test_gradios_deep_link_route_is_closed_so_a_session_hash_snapshots_nothing(page):
    """Gradio's /gradio_api/deep_link?session_hash=H saved session H's components (its private file links too)
    for whoever asked; the page's own run links (page.share) make links only for the asking session's run."""
    run_once(page, "victim")
    snap = httpx.get(f"{page.url}/gradio_api/deep_link", params={"session_hash": "victim"}, timeout=30)
    assert snap.status_code == 403 and "run links" in snap.json()["detail"], (snap.status_code, snap.text)
