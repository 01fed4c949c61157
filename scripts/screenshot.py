"""A picture of the running page after one run, as the README shows it: headless chromium (Debian's, with
its chromedriver) opens the page, waits until Run is enabled, runs the prompt in the box (or --prompt), waits
for the verdict and saves the whole page.

    python scripts/screenshot.py [--url http://127.0.0.1:7860/] [--out docs/page.png] [--prompt TEXT]
                                 [--max-tokens N] [--theme light|dark] [--timeout 900]

Needs selenium and chromium + chromium-driver (`scripts/setup.sh --test` installs them). CHROMIUM, CHROMEDRIVER and
CHROMIUM_LD_LIBRARY_PATH point it at another copy (the GPU machine has none: benchmarks/gpu/chromium-bundle.sh).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

VERDICTS = ("Identical", "Diverged", "Stopped", "failed")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", default="http://127.0.0.1:7860/")
    p.add_argument("--out", default="docs/page.png")
    p.add_argument("--prompt", default=None, help="default: the prompt the page shows")
    p.add_argument("--max-tokens", type=int, default=None)
    p.add_argument("--theme", choices=["light", "dark"], default="light")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds for the engines to load and the run")
    p.add_argument("--width", type=int, default=1440)
    return p.parse_args(argv)


def browser(width: int):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="specplay-shot-")
    options = webdriver.ChromeOptions()
    options.binary_location = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync", "--disable-quic",
                 "--disable-background-networking", "--disable-component-update",
                 f"--user-data-dir={profile}", f"--window-size={width},1000"):
        options.add_argument(flag)
    env = dict(os.environ)
    if os.environ.get("CHROMIUM_LD_LIBRARY_PATH"):  # a bundled copy's libraries, for the driver and the browser only
        env["LD_LIBRARY_PATH"] = os.environ["CHROMIUM_LD_LIBRARY_PATH"]
    service = Service(os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver"), env=env)
    return webdriver.Chrome(service=service, options=options), profile


def run_once(driver, args) -> str:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(driver, args.timeout)
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#run") and d.find_element(By.CSS_SELECTOR, "#run").is_enabled())
    if args.prompt is not None:
        box = driver.find_element(By.CSS_SELECTOR, "#prompt textarea")
        box.clear()
        box.send_keys(args.prompt)
    if args.max_tokens:
        box = driver.find_element(By.CSS_SELECTOR, "#max-tokens input[type=number]")
        box.clear()
        box.send_keys(str(args.max_tokens), Keys.TAB)
    driver.find_element(By.CSS_SELECTOR, "#run").click()
    # a refused prompt shows in #page-error, never in the badge: stop there (the picture shows the message)
    def settled(d) -> bool:
        badge = d.find_element(By.CSS_SELECTOR, "#badge").text
        return any(v in badge for v in VERDICTS) and d.find_element(By.CSS_SELECTOR, "#run").is_enabled()

    wait.until(lambda d: page_error(d) or settled(d))
    time.sleep(2.0)  # the replay's last frame and the charts settle
    return page_error(driver) or driver.find_element(By.CSS_SELECTOR, "#badge").text


def page_error(driver) -> str:
    from selenium.webdriver.common.by import By

    found = driver.find_elements(By.CSS_SELECTOR, "#page-error .page-error")
    return f"page error: {found[0].text}" if found and found[0].text.strip() else ""


def open_when_up(driver, url: str, timeout: float) -> None:
    """The page may still be starting: try until it answers."""
    from selenium.common.exceptions import WebDriverException

    deadline = time.monotonic() + timeout
    while True:
        try:
            driver.get(url)
            return
        except WebDriverException:
            if time.monotonic() > deadline:
                raise
            time.sleep(2.0)


def main(argv=None) -> int:
    args = parse_args(argv)
    driver, profile = browser(args.width)
    try:
        url = args.url + ("&" if "?" in args.url else "?") + f"__theme={args.theme}"
        open_when_up(driver, url, args.timeout)
        verdict = run_once(driver, args)
        height = driver.execute_script("return document.documentElement.scrollHeight")
        driver.set_window_size(args.width, height + 40)
        driver.execute_script("window.scrollTo(0, 0)")
        time.sleep(0.5)
        driver.save_screenshot(args.out)
        print(f"{args.out}: {verdict.splitlines()[0] if verdict else '?'}")
        if verdict.startswith("page error"):
            return 1
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
