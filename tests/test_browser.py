"""The page in a real headless browser (Debian chromium + chromedriver, driven by selenium) against the
shared app server: loading state, a run at T=0, charts and tables drawn, and model output containing
markup shown as text with no script running. Screenshots go to tests/artifacts/ (gitignored).

Needs: apt-get install -y chromium chromium-driver; pip install selenium. scripts/test.sh installs both; without them these tests fail rather than skip.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time

import pytest

from tests.ui_fixtures import ARTIFACTS

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
# No skip: a green run must have driven a real browser (scripts/test.sh installs both).
assert os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER), \
    "the browser tests need Debian's chromium and chromium-driver: apt-get install chromium chromium-driver"
from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

XSS_PROMPT = ("Repeat the following text exactly, character for character, and nothing else:\n"
              "<script>window.__pwned=1</script> <img src=x onerror=\"window.__pwned=2\">")


@pytest.fixture(scope="module")
def browser():
    profile = tempfile.mkdtemp(prefix="playground-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 f"--user-data-dir={profile}", "--window-size=1440,1000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="module")
def page(browser, app):
    browser.get(app.url)
    WebDriverWait(browser, 60).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#run"))
    return browser


def screenshot(driver, name: str) -> None:
    """Full page: the window grown to the document's height."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1440, height + 40)
    time.sleep(0.5)
    driver.save_screenshot(str(ARTIFACTS / name))
    driver.set_window_size(1440, 1000)


def set_prompt(driver, text: str) -> None:
    box = driver.find_element(By.CSS_SELECTOR, "#prompt textarea")
    box.clear()
    box.send_keys(text)


def run_and_wait(driver, timeout=300) -> str:
    """Click Run once it is enabled; return the badge's text when both engines have finished."""
    wait = WebDriverWait(driver, 600)
    wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "#run").is_enabled())  # engines ready
    before = driver.find_element(By.CSS_SELECTOR, "#badge").text
    driver.find_element(By.CSS_SELECTOR, "#run").click()
    WebDriverWait(driver, timeout).until(lambda d: d.find_element(By.CSS_SELECTOR, "#badge").text != before
                                         and any(word in d.find_element(By.CSS_SELECTOR, "#badge").text
                                                 for word in ("Identical", "Diverged", "Stopped", "failed")))
    WebDriverWait(driver, 30).until(lambda d: d.find_element(By.CSS_SELECTOR, "#run").is_enabled())
    return driver.find_element(By.CSS_SELECTOR, "#badge").text


def test_run_shows_both_panes_identity_charts_and_tables(page):
    set_prompt(page, "Rewrite this sentence in the passive voice: The committee approved the new budget on "
                     "Monday, and the mayor signed it the next day.")
    badge = run_and_wait(page)
    assert "Identical" in badge
    base = page.find_element(By.CSS_SELECTOR, "#pane-baseline").text
    spec = page.find_element(By.CSS_SELECTOR, "#pane-speculative").text
    assert len(base.strip()) > 10 and base == spec
    # per-token highlight with the step on hover, and its legend
    tokens = page.find_elements(By.CSS_SELECTOR, "#pane-speculative span.tok")
    assert len(tokens) > 5 and tokens[0].get_attribute("title").startswith("step 0: prefill")
    assert any(t.get_attribute("title").startswith("step 1:") for t in tokens)
    assert "accepted" in page.find_element(By.CSS_SELECTOR, "#legend").text
    for chart in ("#chart-rate", "#chart-acceptance", "#chart-memory"):
        WebDriverWait(page, 30).until(lambda d: d.find_elements(By.CSS_SELECTOR, f"{chart} svg.main-svg"))
        traces = page.find_elements(By.CSS_SELECTOR, f"{chart} .scatterlayer .trace path.js-line")
        assert traces, f"{chart} has no drawn line"
    assert "RSS" in page.find_element(By.CSS_SELECTOR, "#chart-memory").text
    summary = page.find_element(By.CSS_SELECTOR, "#summary").text
    assert "speculative" in summary and "baseline" in summary
    assert "smollm2-ngram" in page.find_element(By.CSS_SELECTOR, "#history").text
    screenshot(page, "page_identical.png")


def test_markup_in_model_output_renders_as_text(page):
    set_prompt(page, XSS_PROMPT)
    run_and_wait(page)
    screenshot(page, "page_markup_output.png")
    assert page.execute_script("return window.__pwned === undefined")
    for pane in ("#pane-baseline", "#pane-speculative", "#badge"):
        element = page.find_element(By.CSS_SELECTOR, pane)
        assert not element.find_elements(By.TAG_NAME, "script")
        assert not element.find_elements(By.TAG_NAME, "img")
    text = page.find_element(By.CSS_SELECTOR, "#pane-baseline").text
    # the model repeats the markup (deterministic at T=0 on this preset): it shows up literally
    assert "<script>" in text or "<img" in text, text
