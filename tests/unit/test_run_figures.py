"""One run's figures, defined once; the speedup's two factors; the replay; the explanation."""

from __future__ import annotations


import json

import pytest

from specplay.core.events import (
    BASELINE, PER_REQUEST, SPECULATIVE, RunFinished, RunStarted, SpecDecodeCounters, StepEvent,
)
from specplay.page import charts
from specplay.page import views
from specplay.run.result import RunResult
from specplay.engine.base import EngineInfo
from tests.ui_fixtures import comparison_of, run_with_acceptance, synthetic_events



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
    result = RunResult.of(c).model_dump(mode="json")
    assert result["tokens_per_step_ratio"] == pytest.approx(3.0) and result["step_cost_ratio"] == pytest.approx(1.0)
    assert result["speculative"]["step_sizes"] == [1, 3, 3, 3]


def test_metrics_define_each_figure_once_for_report_table_and_csv():
    from specplay.run import metrics
    from specplay.cli import report

    _, c = run_with_acceptance()
    result = RunResult.of(c)
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


def _result_with(speedup, gain, cost, acc, step, runner=None, **_) -> RunResult:
    """A RunResult with these figures (a synthetic run's, the factors overwritten)."""
    base = RunResult.of(run_with_acceptance()[1])
    # sequential: nothing shared, the factors are the draft's (test_explain_schedule)
    return base.model_copy(update=dict(
        speedup=speedup, tokens_per_step_ratio=gain, step_cost_ratio=cost, schedule="sequential",
        baseline=base.baseline.model_copy(update={"step_seconds": step}),
        speculative=base.speculative.model_copy(update=dict(num_drafts=10, num_draft_tokens=100,
                                                            num_accepted=round(acc * 100), accepted_per_position=())),
        engines={BASELINE: EngineInfo(async_scheduling=True),
                 SPECULATIVE: EngineInfo(async_scheduling=False, model_runner=runner)}))


H200_8B_FLOOR = 16.06e9 / 4.8e12  # Llama-3.1-8B in bf16 read at an H200's 4.8 TB/s: 3.3 ms


@pytest.mark.parametrize("figures, method, device, expected", [
    (dict(speedup=1.9, gain=2.5, cost=1.3, acc=0.7, step=0.005), "eagle", "gpu", "Speculation pays (1.90×)"),
    (dict(speedup=1.5, gain=1.6, cost=1.07, acc=0.3, step=0.05), "ngram", "cpu", "acceptance decides"),
    (dict(speedup=0.9, gain=1.1, cost=1.22, acc=0.05, step=0.05), "ngram", "cpu", "copies from it"),
    (dict(speedup=0.3, gain=2.0, cost=6.6, acc=0.5, step=0.002), "ngram", "gpu", "without async scheduling"),
    # 135M target on an H100: 0.27 GB of weights is a 0.08 ms floor under a 2 ms step
    (dict(speedup=0.3, gain=2.0, cost=6.6, acc=0.5, step=0.002, floor=0.27e9 / 3.35e12), "ngram", "gpu",
     "too small for speculation"),
    (dict(speedup=0.5, gain=1.8, cost=3.6, acc=0.4, step=0.05), "draft_model", "cpu", "draft is slow relative"),
    (dict(speedup=0.2, gain=1.1, cost=5.5, acc=0.05, step=0.05), "draft_model", "cpu", "Both factors lose"),
    (dict(speedup=0.8, gain=2.4, cost=3.0, acc=0.6, step=0.0047, floor=H200_8B_FLOOR, runner="v2"),
     "draft_model", "gpu", "without CUDA graphs (4 eager draft passes a step)"),
    (dict(speedup=0.8, gain=2.4, cost=3.0, acc=0.6, step=0.0047, runner="v2"), "draft_model", "gpu",
     "parallel drafting (PARD) would pay"),
    (dict(speedup=0.5, gain=1.1, cost=1.9, acc=0.05, step=0.0047, runner="v2"), "draft_model", "gpu",
     "would help; the V1 runner (`model_runner: v1` in the preset"),
])
def test_explanation_names_the_deciding_factor(figures, method, device, expected):
    from specplay.run.explain import explain

    result = _result_with(**figures)
    sentence = explain(result, method, 4, device, figures.get("floor"))
    assert expected in sentence and sentence.count(". ") == 0  # one sentence
    html = views.explain_html(result.model_copy(update={"explanation": sentence}), "where it pays <b>")
    assert f"{figures['gain']:.2f}×" in html and f"{figures['cost']:.2f}×" in html
    assert "speculative: async scheduling off" in html and "&lt;b&gt;" in html and sentence in html


def test_an_8b_target_on_an_h200_is_not_called_too_small():
    # the run: 1.89× with a 4.7 ms baseline step, 3.3 ms of which is reading 16 GB of weights
    from specplay.core.hardware import Hardware, bandwidth_floor_s, memory_bandwidth
    from specplay.run.explain import explain

    h200 = Hardware(1, "NVIDIA H200", (0,))
    assert memory_bandwidth("NVIDIA H200") == 4.8e12 and memory_bandwidth(None) is None
    floor = bandwidth_floor_s(16.06e9, h200)
    assert floor == pytest.approx(H200_8B_FLOOR)
    for runner in (None, "v1"):
        result = _result_with(speedup=1.89, gain=2.6, cost=1.38, acc=0.7, step=0.0047, runner=runner)
        sentence = explain(result, "eagle3", 3, "gpu", floor)
        assert sentence.startswith("Speculation pays (1.89×)") and "too small" not in sentence
    # without a floor nothing is claimed about the model's size
    assert "too small" not in explain(_result_with(0.3, 2.0, 6.6, 0.5, 0.002), "ngram", 4, "gpu")
    # a V1 runner's draft model isn't blamed on CUDA graphs
    v1 = explain(_result_with(0.8, 2.4, 3.0, 0.6, 0.0047, runner="v1"), "draft_model", 4, "gpu", floor)
    assert "CUDA graphs" not in v1
    assert "parallel drafting (PARD: one draft pass proposes all k tokens) would pay" in v1  # the cure on V1
    # PARD drafts all k in one pass: the per-pass cost is the whole extra cost, not a k-th of it
    pard = explain(_result_with(0.8, 2.0, 2.5, 0.6, 0.0047, runner="v1"), "pard", 5, "gpu", floor)
    assert "its one pass adds about 150% of a target step" in pard


@pytest.mark.parametrize("name, bandwidth", [
    ("NVIDIA H100 80GB HBM3", 3.35e12), ("NVIDIA H100 PCIe", 2.0e12), ("NVIDIA A100-SXM4-80GB", 2.039e12),
    ("NVIDIA A100-SXM4-40GB", 1.555e12), ("NVIDIA A10G", 0.6e12), ("NVIDIA L4", 0.3e12),
    ("NVIDIA L40S", 0.864e12), ("NVIDIA GeForce RTX 4090", 1.008e12), ("Tesla T4", None),
])
def test_memory_bandwidth_by_gpu_name(name, bandwidth):
    from specplay.core.hardware import memory_bandwidth

    assert memory_bandwidth(name) == bandwidth


# -- exact steps: merged chunks don't change the step counts ---------------------------------------------------
def _merged_run(source=PER_REQUEST):
    """Baseline: 9 tokens in 5 chunks (vLLM merged some); speculative: 13 tokens in 4 chunks for 5 steps
    (prefill, then 4 drafting steps accepting 3, 2, 0 and 3: the second chunk holds two steps)."""
    t0 = 100.0
    ev = lambda role, i, ids, last=False: StepEvent(  # noqa: E731
        engine=role, step=i, token_ids=tuple(ids), text="", time=t0 + i + 1, submitted_at=t0, finished=last,
        finish_reason="length" if last else None)
    events = [RunStarted("run-0", (1, 2, 3), "sequential")]
    events += [ev(BASELINE, i, ids, i == 4) for i, ids in enumerate([[0], [1, 2], [3], [4, 5, 6], [7, 8]])]
    spec_chunks = [[0], [1, 2, 3, 4, 5], [6, 7, 8], [9, 10, 11, 12]]
    events += [ev(SPECULATIVE, i, ids, i == 3) for i, ids in enumerate(spec_chunks)]
    counters = SpecDecodeCounters(4, 16, 8, (3, 3, 2, 0))
    events.append(RunFinished("run-0", t0 + 10, counters, counters_source=source))
    return comparison_of(events)


def test_steps_come_from_tokens_and_per_request_counters_not_chunks():
    from tests.checks import check_statistics

    c = _merged_run()
    b, s = c.baseline, c.speculative
    assert (b.steps_source, b.steps, b.decode_steps) == ("tokens", 9, 8) and b.tokens_per_step == 1.0
    # 12 decode tokens, 8 of them accepted drafts: 12 - 8 = 4 decode steps (the 4 drafting ones)
    assert (s.steps_source, s.decode_steps) == ("per-request", 4) and s.tokens_per_step == 3.0
    assert b.step_seconds == pytest.approx(4.0 / 8) and s.step_seconds == pytest.approx(3.0 / 4)
    assert c.speedup == pytest.approx(c.tokens_per_step_ratio / c.step_cost_ratio)
    result = RunResult.of(c).model_dump(mode="json")
    assert result[BASELINE]["steps_source"] == "tokens" and result[SPECULATIVE]["steps_source"] == "per-request"
    assert result[BASELINE]["steps"] == 9 and result[BASELINE]["step_sizes"] == [1, 2, 1, 3, 2]
    assert check_statistics(result, k=4, max_tokens=13) == 8  # merged chunks pass; accepted read off tokens
    # without the request's own counters the speculative side falls back to its chunks, and says so
    fallback = _merged_run(source="engine delta").speculative
    assert (fallback.steps_source, fallback.steps) == ("chunks", 4)


def test_a_step_without_a_draft_counts_and_a_cut_last_step_does_not_undercount():
    from specplay.core.trace import EngineTrace

    trace = EngineTrace(SPECULATIVE, token_ids=list(range(8)), step_sizes=[1, 7], step_times=[1.0, 2.0])
    trace.set_verified_steps(num_drafts=3, num_accepted=4)  # 3 drafting steps + 0 plain: 7 - 4 = 3
    assert trace.decode_steps == 3
    trace.set_verified_steps(num_drafts=3, num_accepted=5)  # the last step's 2 accepted drafts were cut
    assert trace.decode_steps == 3
    trace.set_verified_steps(num_drafts=1, num_accepted=2)  # 1 drafting step (3 tokens) + 4 plain ones
    assert trace.decode_steps == 5


# -- the JSON at the edges ----------------------------------------------------------------------------------------
COMPARE_KEYS = {"identical", "first_divergence", "speedup", "tokens_per_step_ratio", "step_cost_ratio", "schedule",
                "prompt_tokens", "baseline", "speculative", "preset", "load_seconds", "engines", "explanation",
                "speedup_interval", "tokens_per_step_ratio_interval", "step_cost_ratio_interval", "verifier",
                "verifier_exact", "verifier_why_different", "method_kind", "num_speculative_tokens"}
ENGINE_KEYS = {"text", "token_ids", "ttft_s", "tokens_per_s", "steps", "steps_source", "step_sizes", "step_seconds",
               "tokens_per_step", "finish_reason"}
SPEC_KEYS = ENGINE_KEYS | {"acceptance_rate", "mean_acceptance_length", "accepted_per_position", "drafted_per_position",
                           "num_drafts",
                           "num_draft_tokens", "num_accepted", "acceptance_source",
                           "speedup_per_acceptance_length", "efficiency",  # the old name, one more release
                           "acceptance_histogram", "step_detail", "step_detail_note",
                           "step_detail_rejections_checked"}


def test_compare_json_keys_and_values_are_pinned():
    from specplay.presets.catalog import get_preset

    _, c = run_with_acceptance()
    engines = {BASELINE: EngineInfo(async_scheduling=False), SPECULATIVE: EngineInfo(async_scheduling=False)}
    result = RunResult.of(c, get_preset("smollm2-ngram"), device="cpu", engines=engines,
                          load_seconds={BASELINE: 1.0, SPECULATIVE: 2.0})
    out = json.loads(json.dumps(result.model_dump(mode="json")))
    assert set(out) == COMPARE_KEYS and set(out[BASELINE]) == ENGINE_KEYS and set(out[SPECULATIVE]) == SPEC_KEYS
    assert (out["verifier"], out["verifier_exact"], out["verifier_why_different"]) == ("standard", True, None)
    assert {k: out[k] for k in ("identical", "first_divergence", "speedup", "tokens_per_step_ratio",
                                "step_cost_ratio", "schedule", "prompt_tokens", "preset")} == {
        "identical": True, "first_divergence": None, "speedup": 2.667, "tokens_per_step_ratio": 2.6667,
        "step_cost_ratio": 1.0, "schedule": "concurrent", "prompt_tokens": 3, "preset": "smollm2-ngram"}
    assert out[BASELINE] == {"text": "", "token_ids": list(range(9)), "ttft_s": 0.5, "tokens_per_s": 2.0, "steps": 9,
                             "steps_source": "tokens", "step_sizes": [1] * 9, "step_seconds": 0.5,
                             "tokens_per_step": 1.0, "finish_reason": "length"}
    spec = out[SPECULATIVE]
    assert (spec["steps"], spec["steps_source"], spec["step_sizes"]) == (4, "chunks", [1, 3, 1, 4])
    assert spec["tokens_per_s"] == 5.33
    assert (spec["num_drafts"], spec["num_draft_tokens"], spec["num_accepted"]) == (3, 12, 5)
    assert spec["acceptance_rate"] == 0.4167 and spec["mean_acceptance_length"] == 2.667
    assert spec["accepted_per_position"] == [2, 2, 1, 0] and spec["speedup_per_acceptance_length"] == 1.0
    assert spec["efficiency"] == spec["speedup_per_acceptance_length"]  # the old key, kept for one release
    assert spec["acceptance_source"] == "engine delta"
    assert out["load_seconds"] == {BASELINE: 1.0, SPECULATIVE: 2.0}
    assert out["engines"] == {role: info.model_dump(mode="json") for role, info in engines.items()}
    assert out["explanation"].startswith("Speculation pays (2.67×)")
    # a stopped run adds error and cancelled; the page's result adds its run id and request
    stopped = RunResult.of(comparison_of(synthetic_events([1], [[1]], cancelled=True)), "p")
    assert stopped.model_dump(mode="json")["cancelled"] is True and stopped.model_dump(mode="json")["error"] is None
    from specplay.core.events import GenerationRequest

    page = RunResult.of(c, "p", run_id="run-0", request=GenerationRequest(max_tokens=9, temperature=0.5))
    page = page.model_dump(mode="json")
    # a preset given by name alone has no speculative config, so no verifier
    assert set(page) == (COMPARE_KEYS - {"load_seconds", "verifier", "verifier_exact", "verifier_why_different",
                                         "method_kind", "num_speculative_tokens"} | {"run_id", "request"})
    assert page["request"] == {"max_tokens": 9, "temperature": 0.5}
