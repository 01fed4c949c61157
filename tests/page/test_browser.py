"""The page in a real headless browser (Debian chromium + chromedriver, driven by selenium) against the
shared app server: loading state, a run at T=0, charts and tables drawn, and model output containing
markup shown as text with no script running. Screenshots go to tests/artifacts/ (gitignored).

Needs: apt-get install -y chromium chromium-driver; pip install selenium. scripts/test.sh installs both; without them these tests fail rather than skip.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time

import pytest

from loadtest.soak import press_stop
from tests.ui_fixtures import ARTIFACTS

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
# No skip: a green run must have driven a real browser (scripts/test.sh installs both).
assert os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER), \
    "the browser tests need Debian's chromium and chromium-driver: apt-get install chromium chromium-driver"
from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

XSS_PROMPT = ("Repeat the following text exactly, character for character, and nothing else:\n"
              "<script>window.__pwned=1</script> <img src=x onerror=\"window.__pwned=2\">")


@pytest.fixture(scope="module")  # one a module: it quits after this module's tests, so no chromium draws
def browser():                    # the page while test_app_lifecycle reloads an engine
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


def set_max_tokens(driver, n: int) -> None:
    """Type into the Max tokens slider's number box, as a visitor would."""
    box = driver.find_element(By.CSS_SELECTOR, "#max-tokens input[type=number]")
    box.clear()
    box.send_keys(str(n), Keys.TAB)
    WebDriverWait(driver, 10).until(
        lambda d: d.find_element(By.CSS_SELECTOR, "#max-tokens input[type=range]").get_attribute("value") == str(n))


VERDICTS = ("Identical", "Diverged", "Stopped", "failed")


def run_and_wait(driver, timeout=300) -> str:
    """Click Run once it is enabled; return the badge's text when both engines have finished and the replay
    on one clock (sequential schedule, the default) has played to its end."""
    wait = WebDriverWait(driver, 600)
    wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "#run").is_enabled())  # engines ready
    driver.find_element(By.CSS_SELECTOR, "#run").click()
    deadline = time.monotonic() + timeout
    replayed, verdict_since = False, None
    while time.monotonic() < deadline:
        badge = driver.find_element(By.CSS_SELECTOR, "#badge").text
        replayed = replayed or "Replaying" in badge
        if any(word in badge for word in VERDICTS) and driver.find_element(By.CSS_SELECTOR, "#run").is_enabled():
            verdict_since = verdict_since or time.monotonic()
            # done: after the replay, or when none began within 5 s (a run that can't be replayed)
            if replayed or time.monotonic() - verdict_since > 5:
                return badge
        else:
            verdict_since = None
        time.sleep(0.1)
    raise AssertionError(f"no verdict within {timeout} s: {badge!r}")


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


def test_examples_fill_the_prompt_and_memory_shows_kv_in_use_in_both_themes(page, app):
    """The workload examples fill the prompt; after a run the memory chart has each engine's KV cache in
    use (a second axis); the dark theme draws the page dark with readable text."""
    gallery = page.find_element(By.CSS_SELECTOR, "#examples-text")
    assert "qa:" in gallery.text and "summarize:" in gallery.text
    gallery.find_elements(By.CSS_SELECTOR, "button")[0].click()
    WebDriverWait(page, 10).until(lambda d: "Using only the context below" in
                                  d.find_element(By.CSS_SELECTOR, "#prompt textarea").get_attribute("value"))
    set_max_tokens(page, 24)
    assert "Identical" in run_and_wait(page)
    memory = page.find_element(By.CSS_SELECTOR, "#chart-memory")
    WebDriverWait(page, 30).until(lambda d: "KV cache in use" in memory.text)
    assert memory.find_elements(By.CSS_SELECTOR, ".yaxislayer-above .y2tick, .overaxes-above .y2tick, g.y2tick")
    colour = "return getComputedStyle(document.querySelector('#explain')).color"
    light_text = page.execute_script(colour)
    page.get(app.url + "?__theme=dark")
    WebDriverWait(page, 60).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#run"))
    dark_text = page.execute_script(colour)
    assert _luminance(light_text) < 0.5 < _luminance(dark_text), (light_text, dark_text)  # readable on each
    screenshot(page, "page_dark.png")
    page.get(app.url)
    WebDriverWait(page, 60).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#run"))


def _luminance(css_colour: str) -> float:
    """0 (black) to 1 (white) for an `rgb(...)`/`rgba(...)` value; transparent counts as the page's white."""
    parts = [float(x) for x in css_colour[css_colour.index("(") + 1:-1].split(",")]
    if len(parts) == 4 and parts[3] == 0:
        return 1.0
    r, g, b = parts[:3]
    return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255


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


def test_a_visitor_waiting_sees_their_place_in_the_queue(page, app):
    """Another session's run holds the engines: the page shows this visitor's place in the queue on the
    badge (visible text, not just in the DOM), and its run starts and ends once the other one stops."""
    import re

    from specplay.page.inputs import EXAMPLES
    from specplay.page.live_run import API_OUTPUTS

    WebDriverWait(page, 600).until(lambda d: d.find_element(By.CSS_SELECTOR, "#run").is_enabled())  # ready
    set_prompt(page, EXAMPLES["rewrite"])  # typed before the engines get busy: 2 busy cores type slowly
    set_max_tokens(page, 8)
    other = app.client()
    for _ in range(2):  # again if the other run ended before the click reached the page (a frozen machine)
        WebDriverWait(page, 300).until(lambda d: d.find_element(By.CSS_SELECTOR, "#run").is_enabled())
        job = other.submit(EXAMPLES["creative"], 900, 0.0, "sequential", api_name="/run")
        deadline = time.monotonic() + 120
        while not job.outputs() and not job.done():  # until the other run streams: it holds the engines
            assert time.monotonic() < deadline, job.status()
            time.sleep(0.2)
        page.find_element(By.CSS_SELECTOR, "#run").click()
        seen = []

        def queued_or_over(d):
            if re.search(r"queue: 1/\d", d.find_element(By.CSS_SELECTOR, "#badge").text):
                seen.append(True)
            return seen or job.done()
        try:
            WebDriverWait(page, 120).until(queued_or_over)
        finally:
            press_stop(other)  # its reply may be lost if the run ended first (soak.press_stop says why): then again
        stopped = "Stopped" in dict(zip(API_OUTPUTS, job.result(timeout=300)))["badge"]  # the other's run
        WebDriverWait(page, 300).until(lambda d: "Identical" in d.find_element(By.CSS_SELECTOR, "#badge").text)
        if seen and stopped:
            break
    else:
        pytest.fail("in 2 tries the other visitor's run ended before this visitor's place in the queue showed")
    assert "queue" not in page.find_element(By.CSS_SELECTOR, "#badge").text


def _explanation(page) -> tuple[str, list]:
    WebDriverWait(page, 30).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#explain .why-sentence"))
    return (page.find_element(By.CSS_SELECTOR, "#explain .why-sentence").text,
            page.find_elements(By.CSS_SELECTOR, "#explain .factor"))


def test_explanation_after_a_rewrite_run_follows_its_measured_factors(page):
    from specplay.page.inputs import EXAMPLES

    # n-gram on the rewrite example: the answer copies the prompt, so many drafts are accepted. Whether that wins
    # depends on the machine (1.7-1.9x on a quiet 2-core box; 0.73x on CI's, 2026-12-06: 3.50x the tokens per
    # step, 4.79x the step time), so the test holds the sentence to the factors measured, not to a verdict.
    set_prompt(page, EXAMPLES["rewrite"])
    assert "Identical" in run_and_wait(page)
    sentence, factors = _explanation(page)
    labels = [f.find_element(By.CSS_SELECTOR, ".f-label").text.lower() for f in factors]
    assert labels == ["tokens per step", "step time", "speedup"]
    assert "good" in factors[0].get_attribute("class")  # the copied answer's drafts are accepted
    won = "good" in factors[2].get_attribute("class")  # the speedup card: good at 1x or above, else bad
    if sentence.startswith("Within noise"):  # an interval that holds 1x, on either side of it
        assert "holds 1×" in sentence, sentence
    else:
        assert sentence.startswith("Speculation pays" if won else "Steps are too expensive"), sentence
    assert "speculative: async scheduling off" in page.find_element(By.CSS_SELECTOR, "#explain .async").text
    assert "Where smollm2-ngram pays on a CPU" in page.find_element(By.CSS_SELECTOR, "#explain").text
    screenshot(page, "explain_winning.png")
