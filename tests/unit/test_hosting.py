"""What a visitor can and can't do on a hosted page (no engines)."""

from __future__ import annotations

import time

import pytest


from specplay.page import views
from specplay.presets.catalog import get_preset
from tests.ui_fixtures import FakePair, synthetic_events



# -- hosting: what a visitor can and can't do ----------------------------------------------------------------
def _ready_manager(*names):
    from specplay.hosting.manager import PairManager

    presets = {n: get_preset(n) for n in names}
    events = synthetic_events([1, 2, 3], [[1], [2, 3]])
    manager = PairManager(presets, names[0], pair_factory=lambda p, hw, log=print: FakePair(lambda r: events, p))
    manager.load(names[0])
    deadline = time.monotonic() + 10
    while manager.status().state != "ready" and time.monotonic() < deadline:
        time.sleep(0.05)
    return manager


def test_visitors_switch_presets_only_where_the_operator_allows_it():
    from specplay.hosting.settings import PageSettings
    from specplay.page.ui import switch_refusal

    manager = _ready_manager("smollm2-ngram", "smollm2-self-draft")
    try:
        locked = PageSettings(allow_switching=False)
        assert "turned off" in switch_refusal(manager, locked, "smollm2-self-draft")
        assert manager.status().preset == "smollm2-ngram" and manager.status().state == "ready"
        open_ = PageSettings()
        assert switch_refusal(manager, open_, "smollm2-ngram") is None  # already loaded: no reload
        assert manager.status().state == "ready"
        assert "not offered" in switch_refusal(manager, open_, "../etc/passwd")
    finally:
        manager.shutdown()


def test_stop_and_status_bypass_the_queue():
    from specplay.page import ui

    manager = _ready_manager("smollm2-ngram")
    try:
        demo = ui.build_page(manager)
        by_name = {fn.api_name: fn for fn in demo.fns.values() if fn.api_name}
        assert by_name["stop"].fn.__qualname__.startswith("_wire_stop")  # the comparison's Stop owns "stop"
        assert by_name["stop"].queue is False and by_name["status"].queue is False  # a full queue can't block them
        assert by_name["run"].queue is not False and by_name["switch_preset"].queue is not False
        polls = [fn for fn in demo.fns.values() if getattr(fn.fn, "__name__", "") == "poll"]
        assert polls and all(fn.queue is False for fn in polls)
    finally:
        manager.shutdown()


def test_history_is_capped_named_safely_and_formula_free(tmp_path):
    from specplay.hosting.cancel import CancelRegistry
    from specplay.page.compare_run import RunPlace, run_comparison
    from specplay.hosting.settings import PageSettings

    manager = _ready_manager("smollm2-ngram")
    try:
        history, settings = [], PageSettings(history_rows=2)
        for prompt in ("one", "=HYPERLINK(\"http://x\")", "three"):
            place = RunPlace(manager, CancelRegistry(), str(tmp_path), settings)
            last = list(run_comparison(place, prompt, 3, 0.0, "sequential", history, "SESSION-ID-123"))[-1]
            history = last["history"]
        assert [row["run"] for row in history] == [2, 3]  # the oldest row went; numbering goes on
        assert history[0]["prompt"] == "'=HYPERLINK(\"http://x\")"  # a spreadsheet shows it as text
        files = list(tmp_path.iterdir())
        assert len(files) == 1 and "SESSION" not in files[0].name  # one file a session, not named by its id
        assert last["history_file"] == str(files[0])
    finally:
        manager.shutdown()


def test_gradio_keeps_one_copy_of_a_sessions_files_not_one_a_run(tmp_path):
    """Gradio copies each version of a served file into its cache (a folder per content hash) and keeps it
    an hour; the soak (scripts/soak.py) found the page's disk growing by both files' size every run."""
    from gradio.processing_utils import save_file_to_cache

    from specplay.hosting.cancel import CancelRegistry
    from specplay.page.compare_run import RunPlace, run_comparison, served as serve
    from specplay.hosting.settings import PageSettings

    history_dir, served = tmp_path / "history", tmp_path / "gradio"
    history_dir.mkdir()
    manager = _ready_manager("smollm2-ngram")
    try:
        place = RunPlace(manager, CancelRegistry(), str(history_dir), PageSettings(), str(served))
        history = []
        for prompt in ("one", "two", "three"):
            frames = run_comparison(place, prompt, 3, 0.0, "sequential", history, "SESSION")
            last = list(serve(frames, place, "SESSION"))[-1]  # as the page serves them: names and exports
            history = last["history"]
            for path in (last["history_file"], last["result_file"]):  # what Gradio does with them
                save_file_to_cache(path, str(served))
        copies = sorted(p.name for p in served.rglob("*") if p.is_file())
        assert len(copies) == 2 and copies[0].startswith("history-") and copies[1].startswith("run-"), copies
        assert len(list(served.iterdir())) == 2  # the earlier versions' folders went too
    finally:
        manager.shutdown()


@pytest.mark.parametrize("prompt", ["²", "①", "1" * 5000, "12, 3x", "-5"])
def test_malformed_token_ids_get_a_message(prompt):
    from specplay.page.inputs import InputError, build_request

    with pytest.raises(InputError, match="not a token id"):
        build_request(get_preset("dummy-llama8b-eagle-k3"), prompt, 8, 0)


def test_messages_for_visitors_carry_no_server_paths():
    from specplay.hosting.settings import scrub

    message = "OSError: [Errno 2] No such file: '/work/main/.cache/models/x/config.json' (see /tmp/a/b.log)"
    assert "/work" not in scrub(message) and "/tmp/a" not in scrub(message) and "OSError" in scrub(message)
    assert "/work/main" not in views.error_html(message) and "/work/main" not in views.status_html(
        "error", "p", message, 0, None, "CPU")


def test_the_page_launches_when_gradios_localhost_self_check_times_out(tmp_path, monkeypatch):
    """Gradio's launch HEADs its own URL with a 3 s timeout, and a timeout raised "When localhost is not
    accessible, a shareable link must be created" on a loaded machine (a clean-clone run, 2026-12-07): the
    page skips that check (the server has answered Gradio's startup request already) and serves."""
    import httpx
    from gradio import networking

    from tests.public_page_fixtures import fake_page, words_pair

    monkeypatch.setattr(networking, "url_ok", lambda url: False)  # what a timed-out check returns
    page = fake_page(tmp_path, monkeypatch, lambda preset: words_pair(preset, 4, 0.01))
    served = next(page)
    try:
        reply = httpx.get(served.url + "/", timeout=30)
        assert reply.status_code == 200 and "gradio" in reply.text.lower()
    finally:
        page.close()
