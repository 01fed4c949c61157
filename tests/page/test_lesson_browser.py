"""The default CPU lesson from its first step to its last in a real headless chromium against the shared app
server (real CPU engines): each step's question shows, Run this step runs it (switching preset where the
step needs another), its answer opens only once the run has finished; the stepper shows a step with a
rejected draft on the Compare tab; the last step sets its figures beside the shipped H100 recording's.
Screenshots (the light theme) go to tests/artifacts/. (Esc stopping a run: tests/unit/test_esc_browser.py,
on a FakePair.)
"""

from __future__ import annotations

import re
import time

import pytest

from specplay.lesson.load import default_lesson_path, load_lesson
from tests.page.test_browser import _explanation, browser  # noqa: F401 (a fixture)
from tests.ui_fixtures import ARTIFACTS, engine_core_pids

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

LESSON = load_lesson(default_lesson_path("cpu"))
STEP_TIMEOUT_S = 900  # a step that switches preset reloads the speculative engine: minutes on 2 busy cores


def _text(driver, css: str) -> str:
    return driver.find_element(By.CSS_SELECTOR, css).text


def _tab(driver, name: str) -> None:
    driver.find_element(By.XPATH, f"//button[@role='tab' and normalize-space(.)='{name}']").click()


def _element_shot(driver, css: str, name: str, xpath: str | None = None) -> None:
    """One part of the page, whole: the window grown to the document's height first."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1440, height + 200)
    element = driver.find_element(By.XPATH, xpath) if xpath else driver.find_element(By.CSS_SELECTOR, css)
    driver.execute_script("arguments[0].scrollIntoView({block: 'start'})", element)
    time.sleep(0.8)
    element.screenshot(str(ARTIFACTS / name))
    driver.set_window_size(1440, 1000)


LESSON_TAB = "//*[@id='lesson-head']/ancestor::div[contains(@class, 'tabitem')][1]"


@pytest.fixture(scope="module")
def lesson_page(browser, app):  # noqa: F811
    browser.set_window_size(1440, 1000)
    browser.get(app.url)
    WebDriverWait(browser, 60).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#run"))
    WebDriverWait(browser, 600).until(lambda d: d.find_element(By.CSS_SELECTOR, "#run").is_enabled())
    return browser


def _run_step(driver, index: int) -> str:
    """Run the step shown; its answer must stay closed until the run's result is on the tab."""
    step = LESSON.steps[index]
    card = _text(driver, "#lesson-step")
    assert f"STEP {index + 1} OF {len(LESSON.steps)}" in card.upper() and step.title in card
    assert step.question.split()[0] in card
    assert "opens once this step's run has finished" in _text(driver, "#lesson-answer")
    driver.find_element(By.CSS_SELECTOR, "#lesson-run").click()
    deadline = time.monotonic() + STEP_TIMEOUT_S
    while time.monotonic() < deadline:
        answer, result = _text(driver, "#lesson-answer"), _text(driver, "#lesson-result")
        if "Answer" in answer and "opens once" not in answer:
            # opened: the run's verdict and its factors are already there, never an answer without a run
            assert any(v in result for v in ("Identical", "Diverged")), result
            assert "SPEEDUP" in result.upper() and step.answer.split()[0] in answer
            return result
        assert "refused" not in driver.find_element(By.CSS_SELECTOR, "#lesson-progress").get_attribute("innerHTML"), \
            _text(driver, "#lesson-progress")
        time.sleep(0.25)
    raise AssertionError(f"step {index + 1}: no answer within {STEP_TIMEOUT_S} s: {_text(driver, '#lesson-progress')!r}")


# After the tests on smollm2-ngram (order 0) and the engine kill (order 1, test_app_lifecycle): the lesson starts
# on the app's preset and its two switches (to the self-draft, then the layer-skip draft) are the suite's only
# ones before the layer-skip tests (order 2), which run on the preset it leaves.
@pytest.mark.order(1)
def test_the_default_lesson_runs_start_to_finish_and_the_stepper_shows_a_rejected_draft(lesson_page, app):
    driver = lesson_page
    _tab(driver, "Lesson")
    WebDriverWait(driver, 10).until(lambda d: d.find_element(By.CSS_SELECTOR, "#lesson-step").is_displayed())
    for index, step in enumerate(LESSON.steps):
        switching = index and step.preset != LESSON.steps[index - 1].preset
        cores_before = engine_core_pids(app.proc)
        result = _run_step(driver, index)
        if switching:  # the same target: the baseline engine stayed, only the speculative one is new
            cores_after = engine_core_pids(app.proc)
            assert len(cores_after) == 2 and len(set(cores_after) & set(cores_before)) == 1, \
                (index, cores_before, cores_after)
        if step.temperature == 0:
            assert "Identical" in result, (index, result)
        if index == 0:  # light only: a whole-page shot costs seconds of both cores (the dark theme's assertions
            _element_shot(driver, "", "lesson_light.png", LESSON_TAB)  # are test_browser's, in both themes)
            _check_stepper(driver)
            _tab(driver, "Lesson")
        if step.preset == "smollm2-self-draft":
            _check_self_draft_stepper(driver)
            _tab(driver, "Lesson")
        if step.beside:  # after its live run (no engine start: the last step's preset), a recording beside it
            _check_beside(driver, step)
        if index < len(LESSON.steps) - 1:
            driver.find_element(By.CSS_SELECTOR, "#lesson-next").click()
            WebDriverWait(driver, 30).until(
                lambda d: LESSON.steps[index + 1].title in _text(d, "#lesson-step"))
    _check_losing_explanation(driver)  # the last steps' loss, explained on the Compare tab
    _tab(driver, "Lesson")
    # the app now runs the last step's preset, and going back shows an answered step's answer open
    driver.find_element(By.CSS_SELECTOR, "#lesson-prev").click()
    WebDriverWait(driver, 30).until(lambda d: LESSON.steps[-2].title in _text(d, "#lesson-step"))
    assert "Answer" in _text(driver, "#lesson-answer") and "opens once" not in _text(driver, "#lesson-answer")
    assert LESSON.steps[-1].preset in _text(driver, "#status")


def _check_stepper(driver) -> None:
    """After step 1 (n-gram on a rewrite), the Compare tab's stepper opens at a step with a rejected draft."""
    _tab(driver, "Compare")
    view = driver.find_element(By.CSS_SELECTOR, "#stepper-view")
    WebDriverWait(driver, 30).until(lambda d: "Step " in view.text)
    assert view.find_elements(By.CSS_SELECTOR, ".st-rejected") and view.find_elements(By.CSS_SELECTOR, ".st-target")
    assert "against the baseline" in view.text or "time unknown" in view.text
    _element_shot(driver, "#stepper", "stepper_light.png")
    shown, total = (int(n) for n in re.search(r"Step (\d+) of (\d+)", view.text).groups())
    arrow, expected = ("#st-prev", shown - 1) if shown == total else ("#st-next", shown + 1)
    driver.find_element(By.CSS_SELECTOR, arrow).click()
    WebDriverWait(driver, 60).until(  # the arrows move it
        lambda d: f"Step {expected} of {total}" in _text(d, "#stepper-view"))


def _check_losing_explanation(driver) -> None:
    """The layer-skip steps lose (each draft pass costs 0.8 of a target pass: 0.5-0.7x measured, step 6's
    answer), and the Compare tab's explanation of the last step's run says so: its step-time and speedup
    cards show the loss whichever sentence the run's noise allows. (Its own 96-token run on the app was a
    test of its own, test_browser's last: dropped for this run, which the lesson makes anyway.)"""
    _tab(driver, "Compare")
    sentence, factors = _explanation(driver)
    assert "bad" in factors[1].get_attribute("class") and "bad" in factors[2].get_attribute("class"), \
        [f.text for f in factors]
    if sentence.startswith("Within noise"):
        # beside a CPU hog (the suite's loaded run, 2026-12-03) 96 tokens measured 0.89x, interval 0.74-1.05x: the
        # page rightly won't call that a loss. It must still be a loss measured, with an interval that holds 1x.
        point = float(re.search(r"Within noise \(([\d.]+)×\)", sentence).group(1))
        assert point < 1.0 and "holds 1×" in sentence, sentence
    else:
        assert sentence.startswith(("Steps are too expensive", "Both factors lose")), sentence
        assert "draft is slow relative to the target" in sentence
    _element_shot(driver, "#explain", "explain_losing.png")


def _check_beside(driver, step) -> None:
    """The CPU lesson's last step: its live figures beside the H100 recording's, labelled as recorded."""
    from specplay.run.recording import read_recording
    from specplay.core.paths import RECORDINGS_DIR

    WebDriverWait(driver, 30).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#lesson-beside"))
    beside = _text(driver, "#lesson-beside")
    made = read_recording(RECORDINGS_DIR / step.beside).made
    assert f"this run, live: {step.preset}" in beside and f"recorded: {made.preset} on {made.device_name}" in beside
    assert f"{read_recording(RECORDINGS_DIR / step.beside).run.speedup:.2f}×" in beside
    assert "most of the difference is in the" in beside and "acceptance is synthetic" in beside, beside
    _element_shot(driver, "", "lesson_beside.png", LESSON_TAB)


def _check_self_draft_stepper(driver) -> None:
    """A draft model's drafts stay inside vLLM: every step shows its accepted count (here all k: the target
    drafts for itself), its drafts where it accepted all k, and the sentence why no more is known."""
    _tab(driver, "Compare")
    view = driver.find_element(By.CSS_SELECTOR, "#stepper-view")
    WebDriverWait(driver, 30).until(lambda d: "Step 1 of" in view.text)
    assert "drafts stay inside vLLM" in view.text, view.text
    # the target drafting for itself: every step vLLM's counters confirm accepted all 4 drafts
    assert "accepted 4 of 4" in view.text or "accepted unknown" in view.text, view.text


def test_every_run_event_that_fails_sets_the_buttons_back():
    """No engines, no browser: the page's wiring. Gradio's browser code runs no .then() after a failed event,
    so each event that holds the Run buttons (Run, Run 3×, a lesson step) needs a .failure() of its own that
    enables Run and disables Stop; without it the page stayed busy for good (the Esc test above)."""
    from specplay.page import ui
    from tests.public_page_fixtures import _manager

    manager = _manager()
    try:
        demo = ui.build_page(manager)
        fns = demo.fns.values()
        for api_name in ("run", "run_series", "lesson_step"):
            event = next(fn for fn in fns if fn.api_name == api_name)
            after = [fn for fn in fns if fn.trigger_after == event._id and fn.trigger_only_on_failure]
            assert len(after) == 1, api_name
            values = {getattr(block, "elem_id", None): value for block, value in after[0].fn().items()}
            assert values["run"]["interactive"] is True and values["run-series"]["interactive"] is True
            assert values["stop"]["interactive"] is False and values["replay"]["interactive"] is False
    finally:
        manager.shutdown()
