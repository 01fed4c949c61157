"""Esc stops a run (issue 31, 5), in headless chromium on a real page over a FakePair streaming a long run:
Esc clicks the Stop button that shows, only it, and the page comes back to idle with the run stopped. Judged
by the order of events (Stop enabled, then Esc, then one click on #stop, then Run enabled and Stop disabled),
not by a deadline on the run."""

from __future__ import annotations

import pytest

from tests.public_page_fixtures import fake_page, words_pair
from tests.unit.test_deep_link import _chromium

# A slow stream (2 tokens every 0.25 s, 250 s a side): the run still streams when Esc arrives on a loaded
# machine, and its panes stay small. A fast long run ended before the busy browser showed Stop enabled
# (probe, 2026-12-03: 164 s from Run to Stop shown, the run already over), and Esc then rightly clicked nothing.
N = 2000


@pytest.fixture
def page(tmp_path, monkeypatch):
    yield from fake_page(tmp_path, monkeypatch, lambda preset: words_pair(preset, N, 0.25))


@pytest.mark.page
def test_esc_clicks_stop_while_a_run_streams_and_the_page_comes_back(page, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    driver = _chromium(tmp_path / "browser")
    try:
        driver.get(page.url)
        wait = WebDriverWait(driver, 120)
        wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "#run").is_enabled())
        driver.find_element(By.CSS_SELECTOR, "#run").click()
        wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "#stop").is_enabled())
        wait.until(lambda d: " w5" in d.find_element(By.CSS_SELECTOR, "#pane-baseline").text)  # streaming
        assert driver.find_element(By.CSS_SELECTOR, "#stop").is_enabled()
        driver.execute_script("window.__clicks = []; document.addEventListener('click', "
                              "e => window.__clicks.push(e.target.id || e.target.tagName), true)")
        driver.find_element(By.TAG_NAME, "body").send_keys(Keys.ESCAPE)
        wait.until(lambda d: d.execute_script("return window.__clicks.length"))
        assert driver.execute_script("return window.__clicks") == ["stop"]  # Stop, and only Stop
        wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "#run").is_enabled()
                   and not d.find_element(By.CSS_SELECTOR, "#stop").is_enabled())
        badge = driver.find_element(By.CSS_SELECTOR, "#badge").text
        assert "Stopped" in badge and "2000" not in badge, badge  # stopped mid-run: partial outputs
        assert driver.execute_script("return window.__clicks") == ["stop"]  # nothing else clicked meanwhile
    finally:
        driver.quit()
