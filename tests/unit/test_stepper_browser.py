"""The stepper's arrows in headless chromium (a real page on a FakePair): a press moves it and it stays
there. Before: Gradio's browser code fired the result JSON's change after every update the stepper's and the
what-if's handlers sent back (about 10 a second, each posting the whole result), each one reset the stepper
to the run's first rejected draft, and an arrow press was undone at once (the lesson browser test's failure,
2026-12-03)."""

from __future__ import annotations

import re
import time

import pytest

from tests.public_page_fixtures import fake_page, words_pair
from tests.unit.test_deep_link import _chromium

N = 40


@pytest.fixture
def page(tmp_path, monkeypatch):
    yield from fake_page(tmp_path, monkeypatch, lambda preset: words_pair(preset, N, 0.02))


@pytest.mark.page
def test_an_arrow_press_moves_the_stepper_and_it_stays_moved(page, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver = _chromium(tmp_path / "browser")
    try:
        driver.get(page.url)
        wait = WebDriverWait(driver, 60)
        wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "#run").is_enabled())
        driver.find_element(By.CSS_SELECTOR, "#run").click()
        view = lambda d: d.find_element(By.CSS_SELECTOR, "#stepper-view").text  # noqa: E731
        wait.until(lambda d: re.search(r"Step \d+ of \d+", view(d)))
        wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "#run").is_enabled())  # the run and its replay ended
        shown, total = (int(n) for n in re.search(r"Step (\d+) of (\d+)", view(driver)).groups())
        assert shown < total
        driver.execute_script("document.querySelector('#st-next').click()")
        wait.until(lambda d: f"Step {shown + 1} of {total}" in view(d))
        time.sleep(3)  # what reset it came within a tenth of a second, again and again
        assert f"Step {shown + 1} of {total}" in view(driver), view(driver)
    finally:
        driver.quit()
