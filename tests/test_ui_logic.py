"""Pure tests of the page's logic on synthetic runs: highlighting, escaping, badge, charts, tables, inputs,
telemetry. No engines, no server (a few seconds)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import threading
import time

import pytest

from playground import charts, views
from playground.comparison import Comparison
from playground.events import BASELINE, SPECULATIVE, SpecDecodeCounters
from playground.presets import get_preset
from playground.telemetry import MemorySampler, rss_bytes
from tests.ui_fixtures import FakeEngine, FakePair, ROOT, synthetic_events

XSS = "<script>window.__pwned=1</script><img src=x onerror=alert(1)>"


def comparison_of(events, k=4, decode=None):
    c = Comparison(decode=decode, num_speculative_tokens=k)
    for e in events:
        c.add(e)
    return c


# -- escaping ----------------------------------------------------------------------------------------------
def test_token_html_escapes_markup():
    pieces = ["<script>", "window.__pwned=1", "</script>", '<img src=x onerror="alert(1)">']
    html = views.speculative_tokens_html(pieces, [1, 3], k=4, divergence=None, stop_token=False)
    assert "<script>" not in html and "<img" not in html
    assert "&lt;script&gt;" in html and "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in html
    base = views.baseline_tokens_html(pieces, None, False)
    assert "<script>" not in base and "&lt;/script&gt;" in base


def test_badge_escapes_divergent_continuations_and_errors():
    events = synthetic_events([1, 2, 3, 4], [[1], [2, 9], [7]], k=2)
    c = comparison_of(events, k=2)
    pieces = {BASELINE: ["a", "b", "<script>", "d"], SPECULATIVE: ["a", "b", "<img onerror=x>", "e"]}
    html = views.badge_html(c, pieces)
    assert "Diverged at token 3" in html
    assert "<script>" not in html and "<img" not in html
    assert "&lt;script&gt;" in html and "&lt;img onerror=x&gt;" in html
    failed = comparison_of(synthetic_events([1], [[1]], error="boom <b>x</b>"))
    assert "&lt;b&gt;x&lt;/b&gt;" in views.badge_html(failed)


def test_error_and_status_escape():
    assert "&lt;script&gt;" in views.error_html("<script>")
    assert "<script>" not in views.status_html("error", "p", "<script>", 0, None, "CPU")
    assert views.error_html(None) == ""


# -- highlighting ------------------------------------------------------------------------------------------
def test_speculative_highlight_groups_tokens_by_step_with_accepted_colour():
    # steps: prefill [1], then 3 tokens (2 accepted), then 1 token (0 accepted), then 5 tokens (4 accepted)
    steps = [[1], [2, 3, 4], [5], [6, 7, 8, 9, 10]]
    html = views.speculative_tokens_html([f"t{i}" for i in range(10)], [len(s) for s in steps], k=4,
                                         divergence=None, stop_token=False)
    assert html.count('class="tok prefill start"') == 1
    assert html.count("step 1: accepted 2 of 4 drafted, 3 tokens") == 3
    assert html.count("step 2: accepted 0 of 4 drafted, 1 token\"") == 1
    assert html.count("step 3: accepted 4 of 4 drafted, 5 tokens") == 5
    assert html.count(f"background:{views.accepted_color(2, 4)}") == 3
    assert html.count(f"background:{views.accepted_color(4, 4)}") == 5
    assert html.count(f"background:{views.ZERO_COLOR}") == 1
    assert html.count(" start") == 4  # one rule per step


def test_accepted_colours_distinct_and_legend_lists_each_count():
    colours = [views.accepted_color(a, 5) for a in range(6)]
    assert len(set(colours)) == 6
    legend = views.legend_html(5)
    for a in range(6):
        assert f"{a} accepted" in legend and colours[a] in legend
    assert "prefill" in legend


def test_divergence_marks_tokens_from_divergence_on():
    html = views.baseline_tokens_html(["a", "b", "c", "d"], divergence=2, stop_token=False)
    assert html.count(" div") == 2
    assert html.index('title="token 3') < html.index("tok div") + 200


def test_token_pieces_keep_multibyte_characters_whole():
    # a byte-level tokenizer splitting "é" (2 bytes) over two tokens: the first alone decodes to U+FFFD
    table = {1: b"caf", 2: b"\xc3", 3: b"\xa9", 4: b" ok"}

    def decode(ids):
        return b"".join(table[i] for i in ids).decode("utf-8", errors="replace")

    tp = views.TokenPieces(decode)
    assert tp.update([1, 2]) == ["caf", "\ufffd"]  # pending, shown as is for now
    assert tp.update([1, 2, 3, 4]) == ["caf", "", "é", " ok"]
    assert "".join(tp.pieces) == "café ok"


def test_token_pieces_without_tokenizer_show_ids():
    assert views.TokenPieces(None).update([5, 17]) == ["5 ", "17 "]


# -- badge -------------------------------------------------------------------------------------------------
def test_badge_identical_diverged_stopped_running():
    same = comparison_of(synthetic_events([1, 2, 3], [[1], [2, 3]]))
    assert "Identical" in views.badge_html(same) and "3 tokens" in views.badge_html(same)
    diverged = comparison_of(synthetic_events([1, 2, 3], [[1], [2, 4]]))
    html = views.badge_html(diverged, {BASELINE: ["x", "y", "z"], SPECULATIVE: ["x", "y", "w"]})
    assert "Diverged at token 3" in html and views.WHY_T0 in html
    assert views.WHY_SAMPLED in views.badge_html(diverged, temperature=0.8)
    assert views.WHY_SYNTHETIC in views.badge_html(diverged, synthetic=True)
    stopped = comparison_of(synthetic_events([1, 2], [[1]], cancelled=True))
    assert "Stopped" in views.badge_html(stopped)
    live = comparison_of(synthetic_events([1, 2], [[1]])[:-1])
    assert "Streaming" in views.badge_html(live, max_tokens=9) and "/ 9" in views.badge_html(live, max_tokens=9)


# -- charts and tables ---------------------------------------------------------------------------------------
def run_with_acceptance():
    events = synthetic_events(list(range(9)), [[0], [1, 2, 3], [4], [5, 6, 7, 8]], k=4, dt=0.5)
    return events, comparison_of(events)


def test_tokens_per_s_series_matches_summary_definition():
    _, c = run_with_acceptance()
    fig = charts.tokens_per_s_figure(c)
    by_name = {t.name: t for t in fig.data}
    assert set(by_name) == {"baseline", "speculative"}
    assert by_name["speculative"].y[-1] == pytest.approx(c.speculative.tokens_per_s, rel=1e-3)
    assert by_name["baseline"].y[-1] == pytest.approx(c.baseline.tokens_per_s, rel=1e-3)
    assert by_name["baseline"].x[0] == pytest.approx(1.0)  # second baseline token at t0 + 2 * 0.5


def test_acceptance_figure_rate_and_per_position_bars():
    events, c = run_with_acceptance()
    history = [(e.time, e.counters) for e in events if getattr(e, "counters", None) is not None
               and hasattr(e, "engine")]
    assert history == c.counter_history
    fig = charts.acceptance_figure(c)
    line, bars = fig.data
    assert line.y[-1] == pytest.approx(c.counters.acceptance_rate, abs=1e-4)  # 5 accepted of 12 drafted
    assert c.counters.acceptance_rate == pytest.approx(5 / 12)
    assert list(bars.x) == ["1", "2", "3", "4"]
    assert list(bars.y) == pytest.approx([2 / 3, 2 / 3, 1 / 3, 0.0], abs=1e-4)  # per-position accepts over 3 drafts


def test_memory_figure_is_labelled_and_in_gib():
    from playground.telemetry import MemorySeries

    series = {BASELINE: MemorySeries(BASELINE, (10.0, 11.0), (2 * 1024 ** 3, 3 * 1024 ** 3))}
    fig = charts.memory_figure(series, "resident memory (RSS, CPU)", origin=10.0)
    assert "RSS" in fig.layout.title.text
    assert list(fig.data[0].y) == [2.0, 3.0] and list(fig.data[0].x) == [0.0, 1.0]
    assert fig.data[1].name == "speculative" and len(fig.data[1].x) == 0


def test_summary_table_values():
    _, c = run_with_acceptance()
    df = charts.summary_table(c.as_dict())
    assert list(df.columns) == charts.SUMMARY_COLUMNS
    rows = {row.figure: row for row in df.itertuples()}
    assert rows["tokens"].speculative == "9" and rows["steps"].speculative == "4" and rows["steps"].baseline == "9"
    assert rows["acceptance rate"].speculative == "41.7%" and rows["acceptance rate"].baseline == ""
    assert rows["mean acceptance length"].speculative == f"{1 + 5 / 3:.2f}"
    assert rows["speedup"].speculative == f"{c.speedup:.2f}×"
    assert rows["decode step (ms)"].baseline == "500.00"  # one token every 0.5 s
    assert charts.summary_table(None).empty


def test_history_rows_and_csv(tmp_path):
    _, c = run_with_acceptance()
    rows = [charts.history_row(c.as_dict(), 1, "smollm2-ngram", "x" * 100, 9, 0.0)]
    df = charts.history_table(rows)
    path = tmp_path / "h.csv"
    df.to_csv(path, index=False)
    text = path.read_text().splitlines()
    assert text[0].split(",")[:3] == ["run", "preset", "prompt"]
    assert len(text) == 2 and "smollm2-ngram" in text[1]
    assert rows[0]["prompt"].endswith("...") and len(rows[0]["prompt"]) == 60
    assert rows[0]["identical"] is True and rows[0]["outcome"] == "done"
    assert rows[0]["speedup"] == pytest.approx(c.speedup, abs=1e-3)
    assert rows[0]["tokens_per_s_speculative"] == pytest.approx(c.speculative.tokens_per_s, abs=0.01)


# -- one run's figures: defined once, the speedup's two factors, the replay ----------------------------------
def test_speedup_is_the_product_of_its_two_factors():
    # speculative: 4 steps 0.6 s apart yielding 3 tokens each; baseline: 9 steps 0.25 s apart
    events = synthetic_events(list(range(9)), [[0], [1, 2, 3], [4, 5, 6], [7, 8, 9]], k=4, dt=0.25)
    c = comparison_of(events)
    b, s = c.baseline, c.speculative
    assert b.tokens_per_step == 1.0 and s.tokens_per_step == 3.0
    assert b.step_seconds == pytest.approx(0.25) and s.step_seconds == pytest.approx(0.25)
    for trace in (b, s):
        assert trace.tokens_per_s == pytest.approx(trace.tokens_per_step / trace.step_seconds)
    assert c.speedup == pytest.approx(c.tokens_per_step_ratio / c.step_cost_ratio)
    result = c.as_dict()
    assert result["tokens_per_step_ratio"] == pytest.approx(3.0) and result["step_cost_ratio"] == pytest.approx(1.0)
    assert result["speculative"]["step_sizes"] == [1, 3, 3, 3]


def test_metrics_define_each_figure_once_for_report_table_and_csv():
    from playground import metrics, report

    _, c = run_with_acceptance()
    result = c.as_dict()
    table = {row[0]: row[1:] for row in metrics.table_rows(result)}
    assert set(table) == {f.label for f in metrics.FIGURES}
    cli = {row[0]: row[1:] for row in report.metrics_rows(result)}
    page = {row.figure: (row.baseline, row.speculative) for row in charts.summary_table(result).itertuples()}
    assert all(cli[label] == page[label] == table[label] for label in table)  # same text in all three
    flat = metrics.flat_row(result)
    assert list(flat) == list(metrics.FLAT_COLUMNS)
    assert set(metrics.FLAT_COLUMNS) <= set(charts.HISTORY_COLUMNS)
    assert flat["steps_speculative"] == 4 and flat["tokens_baseline"] == 9


def test_replay_puts_both_engines_on_one_clock():
    # sequential: the speculative engine is submitted after the baseline finished
    base = synthetic_events(list(range(6)), [], dt=1.0, t0=100.0)
    spec = synthetic_events([], [[0], [1, 2], [3, 4, 5]], dt=1.0, t0=200.0)
    c = comparison_of([base[0], *base[1:-1], *spec[1:-1], spec[-1]])
    assert c.replay_seconds == pytest.approx(6.0)  # the baseline's 6 s; the speculative engine took 3 s
    at2 = c.until(2.0)
    assert len(at2.baseline.token_ids) == 2 and len(at2.speculative.token_ids) == 3
    assert not at2.done and at2.counters.num_drafts == 1  # counters as they stood then
    at4 = c.until(4.0)
    assert at4.speculative.token_ids == c.speculative.token_ids and at4.speculative.finished
    assert len(at4.baseline.token_ids) == 4 and not at4.done
    end = c.until(c.replay_seconds)
    assert end.done and end.identical and end.counters == c.counters


@pytest.mark.parametrize("figures, method, device, expected", [
    (dict(speedup=1.9, gain=2.5, cost=1.3, acc=0.7, step=0.005), "eagle", "gpu", "Speculation pays (1.90×)"),
    (dict(speedup=1.5, gain=1.6, cost=1.07, acc=0.3, step=0.05), "ngram", "cpu", "acceptance decides"),
    (dict(speedup=0.9, gain=1.1, cost=1.22, acc=0.05, step=0.05), "ngram", "cpu", "copies from it"),
    (dict(speedup=0.3, gain=2.0, cost=6.6, acc=0.5, step=0.002), "ngram", "gpu", "without async scheduling"),
    (dict(speedup=0.3, gain=2.0, cost=6.6, acc=0.5, step=0.002), "ngram", "gpu", "too small for speculation"),
    (dict(speedup=0.5, gain=1.8, cost=3.6, acc=0.4, step=0.05), "draft_model", "cpu", "draft is slow relative"),
    (dict(speedup=0.2, gain=1.1, cost=5.5, acc=0.05, step=0.05), "draft_model", "cpu", "Both factors lose"),
])
def test_explanation_names_the_deciding_factor(figures, method, device, expected):
    from playground.explain import explain

    result = {"speedup": figures["speedup"], "tokens_per_step_ratio": figures["gain"],
              "step_cost_ratio": figures["cost"], "baseline": {"step_seconds": figures["step"]},
              "speculative": {"acceptance_rate": figures["acc"]},
              "engines": {"baseline": {"async_scheduling": True}, "speculative": {"async_scheduling": False}}}
    sentence = explain(result, method, 4, device)
    assert expected in sentence and sentence.count(". ") == 0  # one sentence
    html = views.explain_html(result, sentence, "where it pays <b>")
    assert f"{figures['gain']:.2f}×" in html and f"{figures['cost']:.2f}×" in html
    assert "speculative: async scheduling off" in html and "&lt;b&gt;" in html


# -- inputs ------------------------------------------------------------------------------------------------
def test_build_request_validates():
    from playground.inputs import InputError, build_request

    text = get_preset("smollm2-ngram")
    assert build_request(text, "hi", 16, 0.5).max_tokens == 16
    for bad, message in [(("", 16, 0), "empty"), (("hi", 0, 0), "Max tokens"), (("hi", 5000, 0), "1 to 1024"),
                         (("hi", 16, 2.5), "Temperature"), (("hi", 1.5, 0), "whole number"),
                         (("x" * 30000, 16, 0), "characters"), (("hi", float("inf"), 0), "1 to 1024"),
                         (("hi", float("nan"), 0), "1 to 1024"), (("hi", 16, float("nan")), "Temperature")]:
        with pytest.raises(InputError, match=message):
            build_request(text, *bad)
    ids = get_preset("dummy-llama8b-eagle-k3")
    assert build_request(ids, "1, 2 3", 8, 0).prompt_token_ids == (1, 2, 3)
    with pytest.raises(InputError, match="token ids"):
        build_request(ids, "hello", 8, 0)
    with pytest.raises(InputError, match="outside the vocabulary"):
        build_request(ids, "999999999", 8, 0)


def test_live_run_renders_xss_output_as_text():
    from playground.events import GenerationRequest
    from playground.live_run import API_OUTPUTS, LiveRun

    preset = get_preset("smollm2-ngram")
    vocab = {1: "<script>window.__pwned=1</script>", 2: "<img src=x onerror=alert(1)>", 3: " ok"}
    engine = FakeEngine(vocab)
    live = LiveRun(preset, GenerationRequest(prompt="p", max_tokens=3), {BASELINE: engine.decode,
                                                                          SPECULATIVE: engine.decode})
    for e in synthetic_events([1, 2, 3], [[1], [2, 3]]):
        live.add(e)
    final = live.final()
    assert set(final) == set(API_OUTPUTS)  # every output of the run route, by name
    for name in ("pane_b", "pane_s", "badge", "explain"):
        assert "<script" not in final[name] and "<img" not in final[name]
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in final["pane_s"]
    assert "Identical" in final["badge"]


# -- telemetry ------------------------------------------------------------------------------------------------
def test_rss_sampler_sums_processes_and_keeps_series():
    child = subprocess.Popen([sys.executable, "-c", "b = bytearray(200 * 1024 * 1024); print('ok', flush=True); "
                              "import time; time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ok"  # allocated and touched
        sampler = MemorySampler(lambda: {BASELINE: [os.getpid()], SPECULATIVE: [child.pid]}, hz=20).start()
        time.sleep(0.5)
        sampler.stop()
        series = sampler.series()
        assert sampler.kind == "rss" and "RSS" in sampler.label
        assert len(series[BASELINE].times) >= 3
        assert series[SPECULATIVE].latest >= 200 * 1024 * 1024
        assert series[SPECULATIVE].latest == pytest.approx(rss_bytes([child.pid]), rel=0.1)
        later = sampler.series(since=series[BASELINE].times[-1])
        assert len(later[BASELINE].times) == 1
    finally:
        child.kill()


def test_pair_manager_loads_in_background_and_refuses_other_presets():
    from playground.pair_manager import PairManager, PresetNotAllowed

    preset = get_preset("smollm2-ngram")
    manager = PairManager({preset.name: preset}, preset.name,
                          pair_factory=lambda p, hw, log=print: FakePair(lambda r: [], p))
    manager.load(preset.name)
    assert manager.status().state == "loading" and manager.pair is None
    deadline = time.monotonic() + 10
    while manager.status().state != "ready" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert manager.status().state == "ready" and manager.pair is not None
    with pytest.raises(PresetNotAllowed):
        manager.load("llama31-8b-eagle")
    with manager.run_lock:  # a run holds the engines: no switch under it
        with pytest.raises(RuntimeError, match="run is in progress"):
            manager.load(preset.name)
    manager.shutdown()


def test_app_help_is_light():
    out = subprocess.run([sys.executable, "app.py", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0
    for option in ("--presets", "--preset", "--config", "--host", "--port", "--share", "--auth"):
        assert option in out.stdout
    probe = subprocess.run([sys.executable, "-c", "import sys, app; app.parse_args(['--help'])"], cwd=ROOT,
                           capture_output=True, text=True, timeout=30)
    assert probe.returncode == 0
    heavy = subprocess.run([sys.executable, "-c", "import sys, app; print(sorted(m for m in ('vllm', 'torch', "
                            "'gradio') if m in sys.modules))"], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert heavy.stdout.strip() == "[]"


def test_app_options_from_config_and_flags(tmp_path, monkeypatch):
    import app

    config = tmp_path / "page.yaml"
    config.write_text("presets: [smollm2-ngram, smollm2-self-draft]\nport: 9000\nauth: a:b\n")
    monkeypatch.delenv("PLAYGROUND_AUTH", raising=False)
    options = app.resolve_options(app.parse_args(["--config", str(config), "--port", "9001"]))
    assert options["presets"] == ["smollm2-ngram", "smollm2-self-draft"]
    assert options["port"] == 9001 and options["auth"] == ("a", "b")
    monkeypatch.setenv("PLAYGROUND_AUTH", "u:p")
    assert app.resolve_options(app.parse_args([]))["auth"] == ("u", "p")
    with pytest.raises(SystemExit):
        app.resolve_options(app.parse_args(["--auth", "nopassword"]))
    presets, initial, _ = app.offered_presets({**app.DEFAULTS, "presets": ["smollm2-ngram", "smollm2-self-draft"]})
    assert initial == "smollm2-ngram" and set(presets) == {"smollm2-ngram", "smollm2-self-draft"}
    with pytest.raises(SystemExit, match="unknown preset"):
        app.offered_presets({**app.DEFAULTS, "presets": ["../../etc/passwd"]})


# -- hosting: what a visitor can and can't do ----------------------------------------------------------------
def _ready_manager(*names):
    from playground.pair_manager import PairManager

    presets = {n: get_preset(n) for n in names}
    events = synthetic_events([1, 2, 3], [[1], [2, 3]])
    manager = PairManager(presets, names[0], pair_factory=lambda p, hw, log=print: FakePair(lambda r: events, p))
    manager.load(names[0])
    deadline = time.monotonic() + 10
    while manager.status().state != "ready" and time.monotonic() < deadline:
        time.sleep(0.05)
    return manager


def test_visitors_switch_presets_only_where_the_operator_allows_it():
    from playground.page_settings import PageSettings
    from playground.ui import switch_refusal

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
    from playground import ui

    manager = _ready_manager("smollm2-ngram")
    try:
        demo = ui.build_page(manager)
        by_name = {fn.api_name: fn for fn in demo.fns.values() if fn.api_name}
        assert by_name["stop"].fn.__qualname__.startswith("_wire_run")  # the comparison's Stop owns "stop"
        assert by_name["stop"].queue is False and by_name["status"].queue is False  # a full queue can't block them
        assert by_name["run"].queue is not False and by_name["switch_preset"].queue is not False
        polls = [fn for fn in demo.fns.values() if getattr(fn.fn, "__name__", "") == "poll"]
        assert polls and all(fn.queue is False for fn in polls)
    finally:
        manager.shutdown()


def test_history_is_capped_named_safely_and_formula_free(tmp_path):
    from playground.cancel import CancelRegistry
    from playground.page_settings import PageSettings
    from playground.ui import _run

    manager = _ready_manager("smollm2-ngram")
    try:
        history, settings = [], PageSettings(history_rows=2)
        for prompt in ("one", "=HYPERLINK(\"http://x\")", "three"):
            last = list(_run(manager, CancelRegistry(), str(tmp_path), settings, prompt, 3, 0.0, "sequential",
                             history, "SESSION-ID-123"))[-1]
            history = last["history"]
        assert [row["run"] for row in history] == [2, 3]  # the oldest row went; numbering goes on
        assert history[0]["prompt"] == "'=HYPERLINK(\"http://x\")"  # a spreadsheet shows it as text
        files = list(tmp_path.iterdir())
        assert len(files) == 1 and "SESSION" not in files[0].name  # one file a session, not named by its id
        assert last["history_file"] == str(files[0])
    finally:
        manager.shutdown()


@pytest.mark.parametrize("prompt", ["²", "①", "1" * 5000, "12, 3x", "-5"])
def test_malformed_token_ids_get_a_message(prompt):
    from playground.inputs import InputError, build_request

    with pytest.raises(InputError, match="not a token id"):
        build_request(get_preset("dummy-llama8b-eagle-k3"), prompt, 8, 0)


def test_messages_for_visitors_carry_no_server_paths():
    from playground.page_settings import scrub

    message = "OSError: [Errno 2] No such file: '/work/main/.cache/models/x/config.json' (see /tmp/a/b.log)"
    assert "/work" not in scrub(message) and "/tmp/a" not in scrub(message) and "OSError" in scrub(message)
    assert "/work/main" not in views.error_html(message) and "/work/main" not in views.status_html(
        "error", "p", message, 0, None, "CPU")


# -- acceptance per request (vLLM >= 0.29) or the engine's delta (0.26): no vLLM, fake outputs and engines ----
def test_histogram_becomes_the_stat_loggers_counters():
    # histogram[j]: verify steps that accepted j drafted tokens (k=4); a step accepting j accepts positions < j
    counters = SpecDecodeCounters.from_histogram([3, 1, 0, 2, 1], num_draft_tokens=26)
    steps = [0, 0, 0, 1, 3, 3, 4]  # the same steps, counted as vLLM's stat logger counts them
    assert counters.num_drafts == len(steps) == 7 and counters.num_draft_tokens == 26
    assert counters.num_accepted_tokens == sum(steps) == 11
    assert counters.accepted_per_position == tuple(sum(j > i for j in steps) for i in range(4)) == (4, 3, 3, 1)
    assert counters.mean_acceptance_length == pytest.approx(1 + 11 / 7)
    assert SpecDecodeCounters.from_histogram([5, 0, 0], 10).accepted_per_position == (0, 0)
    assert counters.plus(counters).minus(counters) == counters


def test_outputs_without_per_request_metrics_fall_back():
    from types import SimpleNamespace as NS

    from playground.engine import chunk_of, request_counters, supports_per_request_metrics

    metrics = NS(num_spec_tokens=2, histogram=[1, 2, 3], num_draft_tokens=12)
    new = NS(finished=True, outputs=[NS(token_ids=(7, 8), text="ab", finish_reason="length",
                                        spec_decode_metrics=metrics)])
    old = NS(finished=True, outputs=[NS(token_ids=(7, 8), text="ab", finish_reason="length")])  # vLLM 0.26
    assert chunk_of(new) == ([7, 8], "ab", True, "length", SpecDecodeCounters(6, 12, 8, (5, 3)))
    assert chunk_of(old) == ([7, 8], "ab", True, "length", None)
    assert request_counters(NS(spec_decode_metrics=None)) is None  # metrics off, or an aborted request
    assert request_counters(NS(spec_decode_metrics=NS(histogram=[1]))) is None  # an unexpected shape

    @dataclasses.dataclass
    class Args026:
        speculative_config: dict | None = None

    @dataclasses.dataclass
    class Args032(Args026):
        per_request_spec_decode_metrics: str = "none"

    assert not supports_per_request_metrics(Args026) and supports_per_request_metrics(Args032)


class _FakeSpecEngine:
    """A speculative engine shared with someone else: its engine-wide counters also count another request's
    drafts. `exact` is what vLLM >= 0.29 attaches to the last chunk (None: vLLM 0.26)."""

    def __init__(self, exact):
        from playground.engine import Chunk

        self.exact, self.total, self.Chunk = exact, SpecDecodeCounters(), Chunk

    def counters(self):
        return self.total

    def prompt_token_ids(self, request):
        return [1, 2, 3]

    async def stream(self, request_id, ids, request):
        self.total = self.total.plus(SpecDecodeCounters(5, 20, 9, (4, 3, 2, 0)))  # another visitor's request
        yield self.Chunk([4], "a", False, None)
        yield self.Chunk([5, 6], "bc", True, "length", self.exact)

    async def abort(self, request_id):
        pass

    def shutdown(self):
        pass


@pytest.mark.parametrize("exact", [SpecDecodeCounters(1, 4, 1, (1, 0, 0, 0)), None])
def test_run_and_batch_prefer_per_request_counters(exact):
    from playground.engine import EngineSettings
    from playground.engine_pair import EnginePair
    from playground.events import ENGINE_DELTA, PER_REQUEST, GenerationRequest, RunFinished

    pair = EnginePair(EngineSettings(BASELINE, {}), EngineSettings(SPECULATIVE, {}), warmup=False)
    pair.engines = {BASELINE: _FakeSpecEngine(None), SPECULATIVE: _FakeSpecEngine(exact)}
    noisy = SpecDecodeCounters(5, 20, 9, (4, 3, 2, 0))  # the engine-wide delta, skewed by the other request
    try:
        for schedule in ("concurrent", "sequential"):
            finished = pair.run(GenerationRequest(prompt="x", max_tokens=3), schedule=schedule)[-1]
            assert isinstance(finished, RunFinished) and finished.error is None
            assert (finished.counters, finished.counters_source) == (
                (exact, PER_REQUEST) if exact else (noisy, ENGINE_DELTA))
        batch = pair.run_batch(SPECULATIVE, [GenerationRequest(prompt="x", max_tokens=3)] * 3, concurrency=2)
        assert (batch.counters, batch.counters_source) == (
            (exact.plus(exact).plus(exact), PER_REQUEST) if exact else (
                noisy.plus(noisy).plus(noisy), ENGINE_DELTA))
    finally:
        pair.shutdown()
    c = comparison_of([RunFinished("run-0", 1.0, exact or noisy, counters_source=finished.counters_source)])
    assert c.as_dict()[SPECULATIVE]["acceptance_source"] == finished.counters_source
    assert "acceptance: " in views.explain_html({**c.as_dict(), "speedup": 1.0}, None)


# -- many visitors (the load test's client side, playground/visitors.py) -------------------------------------
def test_fifo_is_judged_on_the_queue_places_and_run_numbers_the_page_gives():
    from playground.visitors import Visit, fifo, outcome, percentile

    def visit(i, run, places=(), start=None, end=None):
        v = Visit(i, f"p{i}")
        v.got = outcome({"error": "", "result": {"run_id": None if run is None else f"run-{run}"}})
        v.places, v.started_at, v.finished_at = list(places), start, end
        return v

    # visitors 1 and 2 reached the queue the other way round: the page queued [2, 1, 3] behind 0's run,
    # told each its place (size, rank) on joining and at each start, and ran them in that order
    joined = [visit(0, 7), visit(1, 9, [(2, 1), (2, 0)]), visit(2, 8, [(1, 0)]),
              visit(3, 10, [(3, 2), (2, 1), (1, 0)]), visit(4, None)]
    kept = fifo(joined)
    assert kept["kept"] and kept["verified"] and kept["runs_on_engines"] == 4 and kept["order"] == [0, 2, 1, 3]
    assert kept["inversions"] == 0 and kept["pairs_checked"] == 1 and kept["inversions_against_press_order"] == 1
    assert not fifo(joined, joins_ordered=True)["kept"]  # pressed in order, each once the last was queued
    # the queue had 2 ahead of 1, but 1's run took the engines first
    jumped = fifo([visit(1, 8, [(2, 1)]), visit(2, 9, [(2, 0)])])
    assert not jumped["kept"] and jumped["inversions"] == 1
    assert not fifo([visit(0, 1), visit(1, 2)])["verified"]  # no picture of the queue: nothing to judge on
    # what the visitors saw: late and bunched messages are reported beyond the tolerance only
    seen = fifo([visit(0, 1, (), 0.0, 2.0), visit(1, 2, (), 1.0, 3.0), visit(2, 3, (), 2.95, 4.0)])["client_view"]
    assert seen["overlaps"] == 1 and seen["inversions"] == 0
    assert percentile([3, 1, 2, 4], 0.5) == 2 and percentile(list(range(1, 21)), 0.95) == 19
    assert percentile([], 0.5) is None


def test_load_tests_killer_fires_once_a_run_from_its_target_on_is_in_the_engines():
    """scripts/load_test.py --kill: a run that has started counts, tokens or not (on a GPU a short run
    streams in one redraw, so waiting for tokens never fired); earlier runs and finished ones don't. The
    process killed is a real one."""
    import importlib.util

    from playground.visitors import Visit

    spec = importlib.util.spec_from_file_location("load_test", ROOT / "scripts" / "load_test.py")
    load_test = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(load_test)
    victim = subprocess.Popen(["sleep", "60"])
    try:
        killer = load_test.Killer("speculative", app_pid=0, cores=[1, victim.pid], target=2)
        early, done, waiting, running = Visit(1, "a"), Visit(2, "b"), Visit(3, "c"), Visit(4, "d")
        early.started_at = done.started_at = running.started_at = time.time()  # 1: before the target
        done.got = {"error": ""}
        killer([early, done, waiting])
        assert killer.record["pid"] is None and victim.poll() is None
        killer([early, done, waiting, running])
        assert victim.wait(timeout=5) == -9
        assert killer.record["pid"] == victim.pid and killer.record["visitor_in_flight"] == 4
        assert killer.record["tokens_seen"] == {"baseline": 0, "speculative": 0}
    finally:
        if victim.poll() is None:
            victim.kill()


def _prompt_echo(request):
    """A fake run whose tokens depend on the prompt: a stream given to the wrong visitor would show."""
    import zlib

    seed = zlib.crc32(request.prompt.encode())
    ids = [(seed >> (i % 24)) % 1000 + 1 for i in range(request.max_tokens)]
    return synthetic_events(ids, [ids[:1]] + [ids[i:i + 2] for i in range(1, len(ids), 2)])


def test_visitors_at_once_on_a_page_whose_cache_is_outside_the_working_and_temp_dirs(tmp_path, monkeypatch):
    """Four visitors on a page with a fake pair: served one at a time in the order they joined, each its own
    output. The page's files are where neither Gradio's working nor temp directory is (PLAYGROUND_CACHE=/data,
    or a .cache that is a symlink): the history CSV every run returns must still be served."""
    import tempfile

    from playground import ui, visitors
    from playground.pair_manager import PairManager
    from tests.ui_fixtures import free_port

    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    monkeypatch.setattr(ui, "PAGE_DIR", tmp_path / "cache" / "page")
    preset = get_preset("smollm2-ngram")
    manager = PairManager({preset.name: preset}, preset.name,
                          pair_factory=lambda p, hw, log=print: FakePair(_prompt_echo, p, step_delay=0.01))
    manager.load(preset.name)
    deadline = time.monotonic() + 10
    while manager.pair is None and time.monotonic() < deadline:
        time.sleep(0.05)
    demo = ui.build_page(manager)
    crowd = None
    try:
        ui.launch(demo, "127.0.0.1", free_port(), block=False)
        prompts = visitors.visitor_prompts(4)
        alone = visitors.client(demo.local_url)
        solo = visitors.solo_runs(alone, prompts, 6)
        alone.close()
        assert not any(s["error"] for s in solo.values()), solo
        assert len({tuple(s["baseline"]) for s in solo.values()}) == 4
        crowd = visitors.Visitors(demo.local_url, prompts, 6)
        crowd.connect()
        crowd.start()
        crowd.watch(time.time() + 60)
        summary = visitors.summary(crowd.visits, solo, joins_ordered=True)
        assert summary["errors"] == 0 and summary["equal_to_solo"] == 4, summary
        assert summary["fifo_kept"] and summary["fifo"]["order"] == [0, 1, 2, 3], summary["fifo"]
        assert summary["fifo"]["runs_on_engines"] == 4
        assert summary["queue_wait_p95_s"] >= summary["queue_wait_p50_s"] >= 0
    finally:
        if crowd is not None:
            crowd.close()
        demo.close()
        manager.shutdown()
