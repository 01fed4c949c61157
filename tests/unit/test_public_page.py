"""A public page, second round: the bench under the operator's limits, leaving mid-bench, disk kept clean. No
engines: FakePair and fake benches. Reloads and health: test_public_page_recovery.py; what visitors can send
and see: test_public_page_visitors.py."""

from __future__ import annotations

import json
import os
import threading
import time
from types import SimpleNamespace

import pytest

from tests.public_page_fixtures import _manager, _wait


# -- 1. the bench: off on a public page, bounded by the run time limit ---------------------------------------
def test_bench_is_off_on_a_public_page_unless_the_operator_allows_it():
    from specplay.hosting.options import AppSettings, parse_args, resolve_options, settings_from_options

    assert settings_from_options(AppSettings()).allow_bench is True  # 127.0.0.1
    assert settings_from_options(AppSettings(host="0.0.0.0")).allow_bench is False
    assert settings_from_options(AppSettings(share=True, auth="a:b")).allow_bench is False
    public = resolve_options(parse_args(["--host", "0.0.0.0", "--allow-bench"]))
    assert settings_from_options(public).allow_bench is True
    assert settings_from_options(resolve_options(parse_args(["--no-bench"]))).allow_bench is False


def test_a_page_without_the_bench_has_no_bench_tab_or_route():
    from specplay.page import ui
    from specplay.hosting.settings import PageSettings

    manager = _manager()
    try:
        def names(demo):
            return {fn.api_name for fn in demo.fns.values()}
        assert "bench" not in names(ui.build_page(manager, PageSettings(allow_bench=False)))
        assert "bench" in names(ui.build_page(manager, PageSettings()))
    finally:
        manager.shutdown()


class FakeBench:
    """Stands in for BenchRun: a row every `step_s` until cancelled; `restore_s` / `restore_error` at the end."""

    restore_s, restore_error, restarts, step_s = 0.0, None, 0, 0.05

    def __init__(self, pair, preset, settings, prompts, hardware, cancel=None, restore=False):
        self.pair, self.preset, self.cancel = pair, preset, cancel
        self.rows, self.plan = [], SimpleNamespace(restarts=self.restarts)
        self.restored = threading.Event()

    def run(self):
        try:
            while not self.cancel.is_set() and len(self.rows) < 10_000:
                time.sleep(self.step_s)
                self.rows.append({"row": len(self.rows)})
                yield SimpleNamespace(row=self.rows[-1])
        finally:
            time.sleep(self.restore_s)  # the preset's own speculative engine loaded back
            self.restored.set()
            if self.restore_error:
                raise RuntimeError(self.restore_error)

    def result(self):
        return {"rows": list(self.rows), "advice": [], "synthetic": False}


@pytest.fixture
def fake_bench(monkeypatch, tmp_path):
    from specplay.page import bench_tab

    made = []

    class Bench(FakeBench):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            made.append(self)

    monkeypatch.setattr(bench_tab, "BenchRun", Bench)
    monkeypatch.setattr(bench_tab, "load_prompts", lambda settings, preset: {"w": []})
    monkeypatch.setattr(bench_tab, "bench_advice", lambda result: [])
    for name, fake in (("settings_from_picks", lambda preset, *picks: SimpleNamespace()), ("empty_frame", dict),
                       ("progress_html", lambda step: ""), ("table_frame", lambda rows: len(rows)),
                       ("chart_frame", lambda rows, p: {}), ("advice_html", lambda advice: ""),
                       ("exports", lambda written, rows: {"bench_file": written["csv"]})):
        monkeypatch.setattr(bench_tab.bv, name, fake)
    monkeypatch.setattr(bench_tab, "bench_figures", lambda rows, k, synthetic: {})  # rows here are stand-ins

    def write(out_dir, result, figures, png=False):
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "bench.csv").write_text(json.dumps(result["rows"]))
        return {"csv": str(out_dir / "bench.csv")}
    monkeypatch.setattr(bench_tab, "write_results", write)
    return SimpleNamespace(cls=Bench, made=made, folder=tmp_path / "bench")


def _bench(manager, fake_bench, session="S", **settings):
    from specplay.page.bench_tab import run_bench
    from specplay.hosting.cancel import CancelRegistry
    from specplay.hosting.settings import PageSettings

    return run_bench(manager, CancelRegistry(), fake_bench.folder, session, ["w"], 1, [4], [0.0], [1], [], 32,
                     settings=PageSettings(**settings))


def test_a_bench_stops_at_the_run_time_limit_and_keeps_what_it_measured(fake_bench):
    manager = _manager()
    try:
        started = time.monotonic()
        outs = list(_bench(manager, fake_bench, max_run_seconds=0.5))
        assert time.monotonic() - started < 5
        last = outs[-1]
        assert "limit of 0.5 seconds" in last["bench_error"] and last["bench_table"] > 0
        with open(last["bench_file"]) as f:
            assert json.loads(f.read())  # the rows measured are in the CSV
        assert not manager.run_lock.locked()
    finally:
        manager.shutdown()


def test_a_bench_refuses_to_restart_the_engine_where_switching_is_off(fake_bench):
    fake_bench.cls.restarts = 1
    manager = _manager()
    try:
        outs = list(_bench(manager, fake_bench, allow_switching=False))
        assert "switching engines is turned off" in outs[-1]["bench_error"] and not fake_bench.made[0].rows
        assert not manager.run_lock.locked()
        outs = list(_bench(manager, fake_bench, allow_bench=False))
        assert "turned off" in outs[-1]["bench_error"]
    finally:
        manager.shutdown()


# -- 2. leaving mid-bench: cleanup off the closing thread, the lock always released --------------------------
@pytest.mark.parametrize("restore_error", [None, "the engine failed to start"])
def test_leaving_mid_bench_returns_at_once_and_releases_the_engines(fake_bench, restore_error):
    fake_bench.cls.restore_s, fake_bench.cls.restore_error = 1.5, restore_error
    manager = _manager()
    try:
        gen = _bench(manager, fake_bench)
        next(gen), next(gen)
        assert manager.run_lock.locked()
        started = time.monotonic()
        gen.close()  # what Gradio does, on its event loop, when the visitor has left
        assert time.monotonic() - started < 0.5
        bench = fake_bench.made[0]
        assert bench.cancel.is_set()
        assert _wait(lambda: not manager.run_lock.locked(), 5) and bench.restored.is_set()
    finally:
        manager.shutdown()


# -- 6. disk: one folder per cache, old files cleaned ---------------------------------------------------
def test_history_and_bench_folders_are_reused_and_old_files_cleaned(tmp_path, monkeypatch, fake_bench):
    from specplay.page import ui
    from specplay.hosting.cancel import CancelRegistry
    from specplay.page.compare_run import RunPlace, run_comparison
    from specplay.hosting.settings import PageSettings

    monkeypatch.setattr(ui, "PAGE_DIR", tmp_path / "page")
    manager = _manager()
    try:
        first, second = (ui.build_page(manager, PageSettings(allow_bench=False)) for _ in range(2))
        assert first.playground_file_dirs == second.playground_file_dirs  # no new folder per start
        history_dir, bench_dir = first.playground_file_dirs
        assert sorted(p.name for p in (tmp_path / "page").iterdir()) == ["bench", "history"]
        old = os.path.join(history_dir, "history-old.csv")
        open(old, "w").close()
        os.utime(old, (time.time() - 7200,) * 2)
        place = RunPlace(manager, CancelRegistry(), history_dir, PageSettings())
        last = list(run_comparison(place, "hi", 2, 0.0, "sequential", [], "S"))[-1]
        assert not os.path.exists(old) and os.path.exists(last["history_file"])
        fake_bench.folder = bench_dir
        stale = os.path.join(bench_dir, "0123456789abcdef")
        os.makedirs(stale)
        os.utime(stale, (time.time() - 7200,) * 2)
        written = list(_bench(manager, fake_bench, max_run_seconds=0.3))[-1]["bench_file"]
        assert written.startswith(str(bench_dir)) and "/tmp/playground-bench" not in written
        assert not os.path.exists(stale)
    finally:
        manager.shutdown()
