"""The page's bench tab without engines: declined while a comparison holds the engines, and a whole bench on a
recording pair to its end, the engines released."""

from __future__ import annotations

from specplay.core.hardware import Hardware
from specplay.presets.catalog import get_preset
from tests.bench_fixtures import RecordingPair


def test_page_has_a_bench_tab_that_declines_while_a_comparison_holds_the_engines(tmp_path):
    import time

    from specplay.page import ui

    from specplay.page import bench_tab as ui_bench
    from specplay.hosting.cancel import CancelRegistry
    from specplay.hosting.manager import PairManager
    from tests.ui_fixtures import FakePair

    preset = get_preset("smollm2-ngram")
    manager = PairManager({preset.name: preset}, preset.name,
                          pair_factory=lambda p, hw, log=print: FakePair(lambda r: [], p))
    demo = ui.build_page(manager)
    labels = {getattr(block, "label", None) for block in demo.blocks.values()}
    assert {"Compare", "Bench", "Workloads", "k (num_speculative_tokens)", "One row per setting"} <= labels

    def bench(*picks):
        return list(ui_bench.run_bench(manager, CancelRegistry(), str(tmp_path), "s", *picks))

    picks = (["rewrite"], 2, [4], [0.0], [1], [], 64)
    assert "not ready" in bench(*picks)[0]["bench_error"]
    manager.load(preset.name)
    deadline = time.monotonic() + 300  # a loaded machine: wait for the load to finish, not for a set time
    while manager.pair is None and time.monotonic() < deadline:
        time.sleep(0.05)
    with manager.run_lock:
        [out] = bench(*picks)
    assert "comparison is running" in out["bench_error"]
    assert "shipped workloads" in bench(["/etc/passwd"], 2, [4], [0.0], [1], [], 64)[0]["bench_error"]
    assert "synthetic" in bench(["rewrite"], 2, [4], [0.0], [1], [0.7], 64)[0]["bench_error"]
    manager.shutdown()


def test_the_page_bench_runs_to_its_end_and_releases_the_engines(tmp_path):
    import threading
    from types import SimpleNamespace

    from specplay.page import bench_tab
    from specplay.hosting.cancel import CancelRegistry
    from specplay.hosting.session import session_stem

    preset = get_preset("smollm2-ngram")  # k=4, n-gram: no draft pass
    pair = RecordingPair(preset)
    reloads = []
    manager = SimpleNamespace(pair=pair, preset=preset, hardware=Hardware(0, None, (0, 1)), run_lock=threading.Lock(),
                              reload_if_dead=lambda: reloads.append(1))
    outs = list(bench_tab.run_bench(manager, CancelRegistry(), str(tmp_path), "SESSION", ["rewrite"], 1, [2, 4],
                                    [0.0], [1], [], 8))
    final = outs[-1]
    assert final["bench_error"] == "" and not manager.run_lock.locked() and not reloads
    assert pair.swaps == [2, 4] and len(final["bench_table"]) == 2  # k=4 (loaded) first, then 2, then back
    assert {"pred. (times)", "tok/step ×"} <= set(final["bench_table"].columns)
    # named by a keyed hash of the session, not by its stem (its prefix-cache salt) nor the session itself
    assert session_stem("SESSION") not in final["bench_file"] and "SESSION" not in final["bench_file"]
    assert "Measured pass times: verifying the drafts costs" in final["bench_advice"]
    # exports: the JSON, the charts as PNG where a browser draws them, the table as Markdown
    assert final["bench_json"].endswith("bench.json") and final["bench_md"].startswith("| workload | T | c | k |")
    assert final["bench_md"].count("\n") == 3  # header, rule, two rows
    from specplay.bench.outputs import find_chromium

    if find_chromium():
        assert final["bench_pngs"] and all(p.endswith(".png") for p in final["bench_pngs"])



def test_a_sessions_bench_files_are_served_under_a_name_nothing_shown_gives_away(tmp_path, monkeypatch):
    """Issue 32, 8: a session's bench files were written under its stem, which is also its prefix-cache salt
    (a run's JSON shows it as request.cache_salt), in a folder the page serves (Gradio's allowed_paths):
    whoever saw the salt could fetch that session's bench. A real page serves the files; the bench itself
    runs on a recording pair."""
    import threading
    from types import SimpleNamespace

    import httpx

    from specplay.page import bench_tab, ui
    from specplay.hosting import closing
    from specplay.hosting.cancel import CancelRegistry
    from specplay.hosting.manager import PairManager
    from specplay.hosting.session import session_stem
    from tests.ui_fixtures import FakePair, free_port

    monkeypatch.setattr(ui, "PAGE_DIR", tmp_path / "page")
    preset = get_preset("smollm2-ngram")  # the page only serves files here: its engines are never loaded
    manager = PairManager({preset.name: preset}, preset.name, log=lambda *a: None,
                          pair_factory=lambda p, hw, log=print: FakePair(lambda r: [], p))
    demo = ui.build_page(manager)
    ui.launch(demo, "127.0.0.1", free_port(), block=False)
    try:
        bench_manager = SimpleNamespace(pair=RecordingPair(preset), preset=preset, hardware=Hardware(0, None, (0, 1)),
                                        run_lock=threading.Lock(), reload_if_dead=lambda: None)
        folder = tmp_path / "page" / "bench"  # the page's own bench folder, servable
        final = list(bench_tab.run_bench(bench_manager, CancelRegistry(), str(folder), "SESSION", ["rewrite"], 1,
                                         [4], [0.0], [1], [], 8))[-1]
        url = demo.local_url.rstrip("/")

        def status(path) -> int:
            return httpx.get(f"{url}/gradio_api/file={path}", timeout=30).status_code

        assert status(final["bench_file"]) == 200 and status(final["bench_json"]) == 200  # the session's links
        stem = session_stem("SESSION")
        for name in ("bench.csv", "bench.json"):
            assert status(folder / stem / name) != 200, name  # the stem-named file: served before, not now
        assert stem not in final["bench_file"] and stem not in final["bench_json"]
    finally:
        closing.close(demo)
        manager.shutdown()
