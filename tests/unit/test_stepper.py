"""The stepper over a run's verification steps: accepted drafts, the first rejected one beside the target's
own token, the rest greyed, the step's time against the baseline's; "unknown" where step_detail has None,
with the method's note; escaped text; whatever the browser sends back stays numbers."""

from __future__ import annotations

from specplay.page import stepper

VOCAB = {i: w for i, w in enumerate(["The", " cat", " sat", " on", " the", " mat", ".", " <script>", " dog", " ran"])}


def decode(ids):
    return "".join(VOCAB.get(i, "?") for i in ids)


def _result(steps, note=None):
    # output: The cat sat on the mat . (ids 0..6); step 0 is prefill ("The")
    return {"preset": "smollm2-ngram", "speedup": 1.2, "baseline": {"step_seconds": 0.05},
            "speculative": {"token_ids": [0, 1, 2, 3, 4, 5, 6], "step_detail": steps, "step_detail_note": note}}


REJECTED = {"start": 1, "tokens": 3, "accepted": 2, "drafted": 4, "proposed": [1, 2, 8, 9], "target_token": 3,
            "seconds": 0.06}
ALL = {"start": 4, "tokens": 3, "accepted": 2, "drafted": 2, "proposed": [4, 5], "target_token": None,
       "seconds": 0.055}
UNKNOWN = {"start": 1, "tokens": 3, "accepted": None, "drafted": None, "proposed": None, "target_token": None,
           "seconds": None}


def test_a_rejected_step_shows_accepted_rejected_target_and_greyed_tokens():
    run = stepper.run_from(_result([REJECTED, ALL]), k=4, decode=decode)
    assert stepper.first_rejection(run) == 0
    html = stepper.step_html(run, 1)
    assert "Step 1 of 2" in html and "accepted 2 of 4" in html
    assert '<span class="st-sofar">The</span>' in html
    assert 'class="st-tok st-accepted" title="draft 1: accepted"> cat<' in html
    assert 'class="st-tok st-accepted" title="draft 2: accepted"> sat<' in html
    assert 'class="st-tok st-rejected" title="draft 3: rejected"> dog<' in html
    assert 'class="st-tok st-target" title="the target&#x27;s own token, emitted instead"> on<' in html
    assert 'class="st-tok st-greyed" title="draft 4: never checked (after a rejection)"> ran<' in html
    assert "60.0 ms against the baseline&#x27;s 50.0 ms a token (1.20× for 3 tokens)" in html
    html = stepper.step_html(run, 2).split("st-legend")[0]  # every draft accepted: the target's next token follows
    assert "st-rejected" not in html and 'st-target" title="the target&#x27;s own next token">.<' in html


def test_a_step_with_no_draft_says_so_not_0_of_k():
    """The n-gram lookup found no match: vLLM drafted nothing that step (it showed "accepted 0 of 4")."""
    none = {"start": 1, "tokens": 1, "accepted": 0, "drafted": 0, "proposed": [], "target_token": 1,
            "seconds": 0.05}
    html = stepper.step_html(stepper.run_from(_result([none]), k=4, decode=decode), 1)
    assert "accepted nothing: no draft" in html and "0 of 4" not in html


def test_an_unknown_step_says_so_with_the_methods_note_and_never_guesses():
    note = "EAGLE drafts from the target's hidden states inside the engine and vLLM doesn't return the drafted tokens"
    run = stepper.run_from(_result([UNKNOWN], note), k=4, decode=decode)
    html = stepper.step_html(run, 1)
    assert "accepted unknown" in html and "drafts unknown (unknown)" in html and "time unknown" in html
    assert "vLLM doesn&#x27;t return the drafted tokens" in html
    assert "st-accepted\"" not in html.split("st-legend")[0]  # no drafted token drawn: none is known
    counted = dict(UNKNOWN, accepted=1, drafted=4)
    assert "drafts unknown (1 of 4 accepted)" in stepper.step_html(stepper.run_from(_result([counted]), 4, decode), 1)


def test_text_is_escaped_and_a_crafted_result_stays_numbers():
    escaped = dict(REJECTED, proposed=[7, 7, 7, 7])
    html = stepper.step_html(stepper.run_from(_result([escaped]), 4, decode), 1)
    assert "<script>" not in html and "&lt;script&gt;" in html
    for crafted in (None, "x", {"streaming": True}, {"error": "e"}, _result("no"), _result([]),
                    {**_result([REJECTED]), "speculative": {"token_ids": ["<script>", 1], "step_detail": [REJECTED]}}):
        assert stepper.run_from(crafted, 4, decode) is None
    wild = [{"start": "<i>", "tokens": 1e308, "accepted": float("nan"), "proposed": [10 ** 12], "seconds": "x"},
            "not a step", {"start": -3, "proposed": [1, 2], "accepted": 99, "target_token": -1}]
    run = stepper.run_from(_result(wild), 4, decode)
    for i in (1, 2, "<b>", None, 10 ** 9):
        assert "<i>" not in stepper.step_html(run, i)
    assert stepper.step_html(None, 1) == stepper.IDLE


def test_the_stepper_reads_the_step_detail_a_real_result_carries():
    """From RunResult.to_json() itself (where the page's `result` comes from), not a hand-made dict: the
    steps sit under `speculative` (read from the top level, the stepper stayed idle after every run)."""
    from specplay.presets.catalog import get_preset
    from specplay.run.result import RunResult
    from tests.ui_fixtures import comparison_of, synthetic_events

    events = synthetic_events(list(range(9)), [[0], [1, 2, 3], [4], [5, 6, 7, 8]], k=4)
    result = RunResult.of(comparison_of(events), get_preset("smollm2-ngram")).to_json()
    run = stepper.run_from(result, 4, None)
    assert run is not None and len(run.steps) == len(result["speculative"]["step_detail"]) >= 3
    assert f"Step 1 of {len(run.steps)}" in stepper.step_html(run, 1)
