"""A picture of the running page after one run, as the README shows it: headless chromium (Debian's, with
its chromedriver) opens the page, waits until Run is enabled, runs the prompt in the box (or --prompt), waits
for the verdict and saves the whole page.

    python scripts/screenshot.py [--url http://127.0.0.1:7860/] [--out docs/page.png] [--prompt TEXT]
                                 [--max-tokens N] [--theme light|dark] [--timeout 900]
                                 [--stepper-gif docs/stepper.gif --frames 6]

--stepper-gif also walks the stepper after the run: from two steps before the first rejected draft, one
picture a step, played as a GIF (the README's).

Needs selenium and chromium + chromium-driver (`scripts/setup.sh --test` installs them). CHROMIUM, CHROMEDRIVER and
CHROMIUM_LD_LIBRARY_PATH point it at another copy (the GPU machine has none: benchmarks/gpu/chromium-bundle.sh).
"""

from __future__ import annotations

import argparse
import io
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
    p.add_argument("--stepper-gif", default=None, help="also a GIF of the stepper, one frame a step, here")
    p.add_argument("--frames", type=int, default=6, help="steps in the GIF")
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


def stepper_gif(driver, out: str, frames: int, width: int) -> str:
    """The stepper from two steps before where it opened (the run's first rejected draft), `frames` steps on,
    one picture each (the window tall enough for the whole element), saved as a GIF that loops."""
    from PIL import Image
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    def shown() -> int:
        text = driver.find_element(By.CSS_SELECTOR, "#stepper-view").text
        return int(text.split("Step ", 1)[1].split(" ", 1)[0]) if "Step " in text else 0

    def press(css: str, expected: int) -> None:
        driver.find_element(By.CSS_SELECTOR, css).click()
        WebDriverWait(driver, 60).until(lambda d: shown() == expected)

    WebDriverWait(driver, 60).until(lambda d: shown() > 0)
    driver.set_window_size(width, driver.execute_script("return document.documentElement.scrollHeight") + 200)
    for _ in range(min(2, shown() - 1)):
        press("#st-prev", shown() - 1)
    pictures = []
    for i in range(frames):
        element = driver.find_element(By.CSS_SELECTOR, "#stepper")
        driver.execute_script("arguments[0].scrollIntoView({block: 'start'})", element)
        time.sleep(0.5)
        pictures.append(Image.open(io.BytesIO(element.screenshot_as_png)).convert("RGB"))
        if i < frames - 1:
            press("#st-next", shown() + 1)
    size = (min(p.width for p in pictures), min(p.height for p in pictures))
    pictures = [p.crop((0, 0, *size)).quantize(colors=128) for p in pictures]
    pictures[0].save(out, save_all=True, append_images=pictures[1:], duration=1600, loop=0, optimize=True)
    return f"{out}: {len(pictures)} steps"


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
        if args.stepper_gif:
            print(stepper_gif(driver, args.stepper_gif, args.frames, args.width))
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
