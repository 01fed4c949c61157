"""Recordings on the page (issue 42, 2): a page started with a folder of recordings (those the project
ships: three 8B-shaped runs made on an H100 and the GPU default on an H200, vLLM 0.34, and the CPU default's;
plus a truncated one) offers the good ones in a picker, the bad one
skipped with one log line; a recording picked through the Gradio API plays as the session's run: the panes
hold its token streams, its verdict and explanation show, and everything it draws says where it was
recorded and that its dummy weights' acceptance is synthetic. A real page on a FakePair (its own preset
is the CPU one: the recordings are of 8B-shaped presets no CPU could run)."""

from __future__ import annotations

import html
import re
import shutil

import pytest

from specplay.core.paths import RECORDINGS_DIR
from specplay.hosting.settings import PageSettings
from specplay.page.recordings_view import PLAY_OUTPUTS, load_shelf, recorded_live
from specplay.run.recording import read_recording
from tests.public_page_fixtures import fake_page, words_pair
from tests.ui_fixtures import ARTIFACTS

SHIPPED = sorted(p.stem for p in RECORDINGS_DIR.glob("*.json"))
DFLASH = "rec-dummy-llama8b-dflash"
CPU = "rec-cpu-smollm2-ngram"  # made by `specplay compare --record` on the CPU pair (docs/results/recordings)
GPU_DEFAULT = "rec-smollm2-ngram-gpu"  # the GPU default's, real weights, made on an H200 (docs/benchmarks.md)
LABEL = "recorded on 1× NVIDIA H100 80GB HBM3, vLLM 0.34.0, 2026-12-06"
# what Gradio's API returns of the play event: its outputs up to the page-only buttons and State
API_PLAY = PLAY_OUTPUTS[:PLAY_OUTPUTS.index("run_btn")]


@pytest.fixture
def folder(tmp_path):
    folder = tmp_path / "recordings"
    folder.mkdir()
    for path in RECORDINGS_DIR.glob("*.json"):
        shutil.copy(path, folder)
    whole = (RECORDINGS_DIR / f"{DFLASH}.json").read_text()
    (folder / "rec-truncated.json").write_text(whole[:len(whole) // 2])  # a copy cut off mid-write
    return folder


@pytest.fixture
def page(folder, tmp_path, monkeypatch, capsys):
    yield from fake_page(tmp_path, monkeypatch, lambda preset: words_pair(preset, 20, 0.01),
                         PageSettings(recordings=str(folder)))


def _tokens(pane: str) -> list[str]:
    return [html.unescape(t).strip() for t in re.findall(r'<span class="tok[^"]*"[^>]*>([^<]*)</span>', pane)]


def _text(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", fragment))


def test_the_shipped_recordings_are_five_and_a_truncated_file_is_skipped_with_one_line(folder):
    assert SHIPPED == [CPU, "rec-dummy-llama8b-dflash", "rec-dummy-llama8b-draft1b-k3", "rec-dummy-llama8b-eagle3-k5",
                       GPU_DEFAULT]
    lines = []
    shelf = load_shelf(folder, lines.append)
    assert sorted(shelf) == SHIPPED
    assert len(lines) == 1 and "rec-truncated.json" in lines[0] and "\n" not in lines[0], lines
    for name, shelved in shelf.items():
        if name == CPU:  # real weights: real acceptance, said as made on the CPU with vLLM's CPU build
            assert "recorded on CPU, 2 core(s), vLLM 0.32.0" in shelved.label and "synthetic" not in shelved.label
            continue
        if name == GPU_DEFAULT:  # real weights on a GPU: real acceptance
            assert "recorded on 1× NVIDIA H200, vLLM 0.34.0, 2026-12-07" in shelved.label, shelved.label
            assert "synthetic" not in shelved.label
            continue
        assert LABEL in shelved.label and "synthetic" in shelved.label
        assert "synthetic acceptance" in shelved.choice


@pytest.mark.parametrize("name", SHIPPED)
def test_a_recording_rebuilt_reads_back_its_own_figures_and_feeds_the_stepper_and_what_if(name):
    from specplay.page.finished_run import FinishedRun
    from specplay.page.stepper import stepper_values
    from specplay.page.whatif_view import IDLE, whatif_values

    shelved = load_shelf(RECORDINGS_DIR, print)[name]
    run = shelved.recording.run
    live = recorded_live(shelved)
    c = live.comparison
    assert c.speedup == pytest.approx(run.speedup, rel=1e-9)
    assert c.tokens_per_step_ratio == pytest.approx(run.tokens_per_step_ratio, rel=1e-9)
    assert c.step_cost_ratio == pytest.approx(run.step_cost_ratio, rel=1e-9)
    assert c.speculative.steps == run.speculative.steps and c.first_divergence == run.first_divergence
    last = c.counter_history[-1][1]  # the acceptance chart's running line ends at the run's counters
    assert (last.num_drafts, last.num_accepted_tokens) == (run.speculative.num_drafts, run.speculative.num_accepted)
    assert live.replayable and 0 < c.replay_seconds < 5
    finished = FinishedRun(live, live.result(), "s")
    assert re.search(r"Step \d+ of \d+", stepper_values(finished)["st_view"])
    assert whatif_values(finished)["wi_view"] != IDLE
    said = re.search(r"recorded on [^(]+", shelved.label).group(0).strip()  # "recorded on <device>, vLLM …, date"
    assert said in _text(live.frame(at=0.5)["badge"])  # a replay's frame says it too


def test_a_recording_picked_through_the_api_plays_as_the_sessions_run(page, folder, capsys):
    from gradio_client import Client

    import httpx

    said = [line for line in capsys.readouterr().err.splitlines() if "--recordings" in line]
    assert len(said) == 1 and "rec-truncated.json" in said[0], said  # one line, naming the bad file
    config = httpx.get(f"{page.url}/config", timeout=30).json()["components"]
    picker = next(c for c in config if c["props"].get("elem_id") == "recording")
    assert sorted(value for _, value in picker["props"]["choices"]) == SHIPPED  # the truncated one not offered

    out = Client(page.url, verbose=False).predict(DFLASH, api_name="/play_recording")
    assert len(out) == len(API_PLAY)
    out = dict(zip(API_PLAY, out))
    run = read_recording(folder / f"{DFLASH}.json").run
    assert _tokens(out["pane_b"]) == [str(t) for t in run.baseline.token_ids]
    assert _tokens(out["pane_s"]) == [str(t) for t in run.speculative.token_ids]
    badge, explain = _text(out["badge"]), _text(out["explain"])
    assert f"Diverged at token {run.first_divergence + 1}" in badge  # synthetic acceptance: differs by design
    assert run.explanation in explain and "2.90×" in explain
    for shown in (badge, explain):
        assert LABEL in shown and "not a live run" in shown and "acceptance is synthetic" in shown
    assert LABEL in out["summary_md"]  # the table, and its Markdown for an issue, say it too
    assert out["result"]["speedup"] == pytest.approx(run.speedup, abs=1e-3)
    assert not out["error"]


def test_a_name_the_picker_did_not_offer_is_refused(page):
    from gradio_client import Client

    with pytest.raises(Exception):  # Gradio's dropdown refuses a value it didn't offer
        Client(page.url, verbose=False).predict("../../etc/passwd", api_name="/play_recording")


def test_the_page_offers_the_shipped_folder_by_default_and_none_when_told():
    from specplay.hosting.options import parse_args, resolve_options, settings_from_options

    assert settings_from_options(resolve_options(parse_args([]))).recordings == str(RECORDINGS_DIR)
    assert settings_from_options(resolve_options(parse_args(["--recordings", ""]))).recordings is None
    assert settings_from_options(resolve_options(parse_args(["--recordings", "/x"]))).recordings == "/x"


@pytest.mark.page
def test_a_recording_picked_in_a_browser_shows_its_panes_verdict_stepper_and_label(page, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from tests.unit.test_deep_link import _chromium

    driver = _chromium(tmp_path / "browser")
    try:
        driver.get(page.url)
        wait = WebDriverWait(driver, 90)
        wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "#run").is_enabled())
        driver.find_element(By.CSS_SELECTOR, "#recording input").click()
        option = wait.until(lambda d: next((o for o in d.find_elements(By.CSS_SELECTOR, "#recording [role=option]")
                                            if "dummy-llama8b-dflash" in o.text), None))
        option.click()
        text = lambda css: driver.find_element(By.CSS_SELECTOR, css).text  # noqa: E731
        wait.until(lambda d: "Diverged" in text("#badge") and re.search(r"Step \d+ of \d+", text("#stepper-view")))
        assert LABEL in text("#badge") and LABEL in text("#explain") and "synthetic" in text("#badge")
        run = load_shelf(RECORDINGS_DIR, print)[DFLASH].recording.run
        assert " ".join(map(str, run.baseline.token_ids[:5])) in text("#pane-baseline")
        assert "2.90×" in text("#explain")
        # one pick, one play: a second event for it would be refused, in an error toast
        assert "already have a run" not in driver.find_element(By.TAG_NAME, "body").text
        driver.execute_script("document.querySelector('#badge').scrollIntoView()")
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(ARTIFACTS / "recording_played.png"))
        # the shipped CPU recording (`specplay compare --record` on the CPU pair): its words, Identical, its label
        cpu = load_shelf(RECORDINGS_DIR, print)[CPU]
        driver.find_element(By.CSS_SELECTOR, "#recording input").click()
        wait.until(lambda d: next((o for o in d.find_elements(By.CSS_SELECTOR, "#recording [role=option]")
                                   if o.text.startswith("smollm2-ngram ·")), None)).click()  # not -gpu's
        wait.until(lambda d: "Identical" in text("#badge") and "recorded on CPU" in text("#badge"))
        wait.until(lambda d: re.search(r"Step \d+ of \d+", text("#stepper-view")))
        words = cpu.recording.run.baseline.text.split()[:4]
        assert " ".join(words) in " ".join(text("#pane-baseline").split()), text("#pane-baseline")
        assert "recorded on CPU" in text("#explain") and "synthetic" not in text("#badge")
        driver.save_screenshot(str(ARTIFACTS / "recording_played_cpu.png"))
    finally:
        driver.quit()


def test_a_cpu_recording_of_a_text_preset_shows_its_text_and_no_synthetic_note(tmp_path):
    """A recording of a real-weights preset (the CPU pair's) is decoded by its target's own tokenizer: the
    panes show its words, not token ids, and its label names the CPU and says nothing of synthetic acceptance."""
    import dataclasses
    from datetime import datetime, timezone

    from specplay.bench.context import target_tokenizer
    from specplay.core.events import RunStarted
    from specplay.presets.catalog import get_preset
    from specplay.run.recording import Provenance, recording_of, write_recording
    from specplay.run.result import RunResult
    from tests.ui_fixtures import comparison_of, synthetic_events

    preset = get_preset("smollm2-ngram")
    ids = target_tokenizer(preset).encode(" The quick brown fox jumps over the lazy dog", add_special_tokens=False)
    events = synthetic_events(ids, [ids[:1], ids[1:3], ids[3:4], ids[4:]], k=preset.num_speculative_tokens)
    events = [dataclasses.replace(e, schedule="sequential") if isinstance(e, RunStarted) else e for e in events]
    made = Provenance(device="cpu", device_name="CPU, 2 core(s)", vllm_version="0.34.0", backend="in-process",
                      preset=preset.name, engine_args={}, speculative_config={}, dummy_weights=False,
                      made_at=datetime(2026, 12, 6, 21, 0, tzinfo=timezone.utc), product_version="test")
    run = RunResult.of(comparison_of(events, k=preset.num_speculative_tokens), preset)
    write_recording(recording_of(run, made), tmp_path / "cpu.json")
    shelved = load_shelf(tmp_path, print)["cpu"]
    assert "recorded on CPU, 2 core(s), vLLM 0.34.0, 2026-12-06" in shelved.label
    assert "synthetic" not in shelved.label + shelved.choice
    final = recorded_live(shelved).final()
    for pane in ("pane_b", "pane_s"):
        assert "".join(_tokens(final[pane])) == "Thequickbrownfoxjumpsoverthelazydog"  # words, each token's own
    assert "recorded on CPU" in _text(final["badge"])
