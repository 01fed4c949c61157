"""What a visitor can't learn and what the disk doesn't keep (issue 32, 8, the page's parts): an ad-hoc
pair's --model path stays off the page; the page's history and bench files are aged out at start and on a
timer, not only when a run finishes."""

from __future__ import annotations

import os
import shutil
import time

from tests.public_page_fixtures import _manager


def _old(path):
    path.write_text("x")
    os.utime(path, (time.time() - 7200,) * 2)
    return path


def test_an_ad_hoc_models_server_path_is_not_shown_to_visitors(tmp_path):
    from specplay.core.paths import BUNDLED_MODELS_DIR
    from specplay.page.ui import _preset_info, public_serve_line
    from specplay.presets.adhoc import adhoc_preset
    from specplay.presets.engines import serve_commands

    model = tmp_path / "operators-secret-folder" / "my-model"
    model.mkdir(parents=True)
    shutil.copy(BUNDLED_MODELS_DIR / "llama-3.1-8b-shaped" / "config.json", model)  # a folder vLLM could load
    preset = adhoc_preset(str(model), {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4,
                                       "prompt_lookup_min": 2}, load_format="dummy")
    assert str(model) in preset.description  # what the operator typed
    manager = _manager()
    try:
        shown = _preset_info(preset, manager)
        assert str(tmp_path) not in shown and "operators-secret-folder" not in shown, shown
        assert "with ngram" in shown and "**adhoc**" in shown  # the rest is still said
        for line in serve_commands(preset).values():
            assert str(tmp_path) not in public_serve_line(line)
    finally:
        manager.shutdown()


def test_page_files_are_aged_out_at_start_and_on_a_timer(tmp_path, monkeypatch):
    from specplay.page import ui
    from specplay.hosting import files

    monkeypatch.setattr(ui, "PAGE_DIR", tmp_path / "page")
    history = tmp_path / "page" / "history"
    history.mkdir(parents=True)
    stale = _old(history / "history-0123456789abcdef.csv")
    manager = _manager()
    try:
        ui.build_page(manager)
        assert not stale.exists()  # at start: no run needed
        monkeypatch.setattr(files, "CLEAN_EVERY_S", 0.05)
        files.keep_clean(history, 3600)  # wakes the sweeper onto the short interval
        later = _old(history / "history-fedcba9876543210.csv")  # left while the page is up and nobody runs
        fresh = history / "history-new.csv"
        fresh.write_text("y")
        seen = files.sweeps_done()
        assert files.wait_for_sweep(seen + 1)  # a whole sweep that began after the file was left
        assert not later.exists() and fresh.exists()
    finally:
        manager.shutdown()
