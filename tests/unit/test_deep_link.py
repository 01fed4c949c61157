"""A link to one run (issue 31, 5): "Link to this run" saves the finished run as the page shows it under a
random Gradio deep-link name; the link loaded in a new session shows that run, and nothing private of the
session that made it (its history, its file links, its session hash). A real Gradio page on a FakePair."""

from __future__ import annotations

import json

import httpx
import pytest

from specplay.core.events import BASELINE, SPECULATIVE
from tests.public_page_fixtures import by_elem_id, fake_page, queued_call
from tests.ui_fixtures import FakePair, synthetic_events

WORDS = {1: " zebra", 2: " quartz", 3: " marmalade"}
NO_RUN_TEXT = "Run first: the link shares a finished run as the page shows it."


def _pair(preset):
    events = synthetic_events([1, 2, 3], [[1], [2, 3]])
    pair = FakePair(lambda r: events, preset)
    for role in (BASELINE, SPECULATIVE):
        pair.engines[role].vocab = WORDS
    return pair


@pytest.fixture
def page(tmp_path, monkeypatch):
    yield from fake_page(tmp_path, monkeypatch, _pair)


def call(page, api_name: str, data: list, session: str) -> dict:
    """One queued event of `session`, read to its end: its outputs by elem_id."""
    fn = page.fns[api_name]
    return by_elem_id(page.demo, fn, queued_call(page.url, fn, data, session))


def shown(page, link: str) -> tuple[dict, dict]:
    """What a new visitor's page gets for `link` (the config Gradio's client fetches for ?deep_link=):
    the components' values by elem_id, and the config."""
    name = link.removeprefix("?deep_link=")
    config = httpx.get(f"{page.url}/config", params={"deep_link": name}, timeout=30).json()
    values = {c["props"].get("elem_id"): c["props"].get("value") for c in config["components"]}
    return values, config


def test_a_link_to_a_run_shows_that_run_to_a_new_session_and_nothing_private(page):
    from specplay.hosting.session import session_stem

    ran = call(page, "run", ["hello", 3, 0.0, "concurrent", None], "alice-session-hash")
    assert "quartz" in ran["speculative-pane"] and ran["history-csv"]
    link = call(page, "share_run", [None], "alice-session-hash")["run-link"]
    assert link.startswith("?deep_link="), link
    name = link.removeprefix("?deep_link=")
    for secret in ("alice-session-hash", session_stem("alice-session-hash"), ran["history-csv"]["url"],
                   ran["result-json"]["url"]):
        assert secret.rsplit("/", 1)[-1].split(".")[0].removeprefix("history-") not in name

    values, config = shown(page, link)
    assert config["deep_link_state"] == "valid"
    assert "quartz" in values["speculative-pane"] and "zebra" in values["baseline-pane"]  # that run's output
    assert "Speedup" in values["explain"] or "speedup" in values["explain"]
    assert values["result"]["run_id"] == ran["result"]["run_id"]
    assert values["summary"]["data"] == ran["summary"]["data"] and values["summary"]["data"]  # its table
    text = json.dumps(config)
    assert values["history-csv"] is None and values["result-json"] is None  # the session's file links
    assert "alice-session-hash" not in text and session_stem("alice-session-hash") not in text
    assert ran["history-csv"]["url"].rsplit("/", 1)[1] not in text
    assert ran["result-json"]["url"].rsplit("/", 1)[1] not in text

    again = call(page, "share_run", [None], "alice-session-hash")["run-link"]
    assert again == link  # the same run: the same link, not a new copy each click


def test_a_session_without_a_run_gets_no_link_and_a_made_up_link_shows_nothing(page):
    from specplay.page.share import NO_RUN

    call(page, "run", ["hello", 3, 0.0, "concurrent", None], "alice")
    assert call(page, "share_run", [None], "bob")["run-link"] == NO_RUN  # bob can't link alice's run
    values, config = shown(page, "?deep_link=madeUpName123")
    assert config["deep_link_state"] == "invalid" and "quartz" not in json.dumps(config)


def _post_forged_everywhere(page, session: str, forged) -> None:
    """`forged` as every input of every unqueued handler, in `session` (what a client can make Gradio store)."""
    import httpx

    for index, fn in page.demo.fns.items():
        if fn.queue is False and fn.fn is not None:
            httpx.post(f"{page.url}/gradio_api/run/predict", timeout=30, json={
                "data": [forged] * len(fn.inputs), "fn_index": index, "session_hash": session})


def test_a_link_is_minted_only_for_a_run_this_server_made(page):
    """Issue 36, 5: "Link to this run" linked whatever run JSON the browser had posted into its session (the
    stepper's handler took the run JSON as input, and Gradio stores every input): a client that never ran got
    a link showing a forged 9.99x. Now no handler reads the run JSON, a link needs the session's own finished
    run (a server-side State), and what a client can post is saved as the run made it."""
    forged = {"run_id": "forged-1", "speedup": 9.99, "identical": True, "explain": "9.99x faster"}
    result_readers = [fn.api_name or i for i, fn in page.demo.fns.items()
                      if any(getattr(b, "elem_id", None) == "result" for b in fn.inputs)]
    assert result_readers == []  # the run JSON on the page is display-only
    _post_forged_everywhere(page, "mallory", forged)
    assert call(page, "share_run", [forged], "mallory")["run-link"] == NO_RUN_TEXT

    ran = call(page, "run", ["hello", 3, 0.0, "concurrent", None], "mallory")
    _post_forged_everywhere(page, "mallory", "FORGED")
    link = call(page, "share_run", [forged], "mallory")["run-link"]
    values, _ = shown(page, link)
    assert values["prompt"] == "hello" and "FORGED" not in json.dumps(values)
    assert values["result"]["run_id"] == ran["result"]["run_id"] and "9.99" not in json.dumps(values["result"])


def test_a_session_keeps_a_few_links_and_cannot_evict_everyone_elses(page):
    """Issue 36, 5: forged run ids filled the one ring of 1,000 links (everyone's) and ~0.7 GB of disk. Now
    links are for runs made here, and a session holds at most LINKS_PER_SESSION: its oldest go first."""
    from specplay.page import share

    call(page, "run", ["hello", 3, 0.0, "concurrent", None], "alice")
    alices = call(page, "share_run", [None], "alice")["run-link"]
    links = []
    for _ in range(share.LINKS_PER_SESSION + 2):
        call(page, "run", ["hello", 3, 0.0, "concurrent", None], "mallory")
        links.append(call(page, "share_run", [None], "mallory")["run-link"])
    assert len(set(links)) == len(links)
    assert sum(1 for session, _ in share._links if session == "mallory") == share.LINKS_PER_SESSION
    assert shown(page, links[0])[1]["deep_link_state"] == "invalid"  # mallory's oldest went
    assert shown(page, links[-1])[1]["deep_link_state"] == "valid"
    assert shown(page, alices)[1]["deep_link_state"] == "valid"  # alice's stays


@pytest.mark.page  # a browser: the full suite's, not the quick tier's
def test_the_link_opened_in_another_browser_shows_the_run(page, tmp_path):
    """In headless chromium (Debian's chromium and chromedriver, as tests/page/test_browser.py): Run, then
    "Link to this run"; the link opened in a second browser (another session, another profile) shows the
    run's panes; the link box holds the page's own address with ?deep_link=NAME and nothing else."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    maker, visitor = _chromium(tmp_path / "maker"), _chromium(tmp_path / "visitor")
    try:
        maker.get(page.url)
        wait = WebDriverWait(maker, 60)
        wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "#run").is_enabled())
        maker.find_element(By.CSS_SELECTOR, "#run").click()
        wait.until(lambda d: "quartz" in d.find_element(By.CSS_SELECTOR, "#speculative-pane").text)
        wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "#share-run").is_enabled())
        maker.find_element(By.CSS_SELECTOR, "#share-run").click()
        box = "#run-link textarea, #run-link input"
        wait.until(lambda d: "deep_link=" in d.find_element(By.CSS_SELECTOR, box).get_attribute("value"))
        link = maker.find_element(By.CSS_SELECTOR, box).get_attribute("value")
        assert link.startswith(f"{page.url}/?deep_link=") and link.count("?") == 1, link

        visitor.get(link)
        WebDriverWait(visitor, 60).until(
            lambda d: "quartz" in d.find_element(By.CSS_SELECTOR, "#speculative-pane").text)
        assert "zebra" in visitor.find_element(By.CSS_SELECTOR, "#baseline-pane").text
        assert "speculative ÷ baseline" in visitor.find_element(By.CSS_SELECTOR, "#explain").text
    finally:
        maker.quit()
        visitor.quit()


def _chromium(profile):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync",
                 "--disable-background-networking", "--disable-component-update", f"--user-data-dir={profile}",
                 "--window-size=1440,1000"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
