"""The stepper over a run's verification steps: accepted drafts, the first rejected one beside the target's
own token, the rest greyed, the step's time against the baseline's; "unknown" where step_detail has None,
with the method's note; escaped text. The stepper reads the session's own typed run (a RunResult; here made
through RunResult.model_validate, whose validation refuses what the page never made), and decodes each drafted
id once with the run's own tokenizer."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from specplay.page import stepper
from specplay.run.result import RunResult

VOCAB = {i: w for i, w in enumerate(["The", " cat", " sat", " on", " the", " mat", ".", " <script>", " dog", " ran"])}


def decode(ids):
    return "".join(VOCAB.get(i, "?") for i in ids)


PIECES = [VOCAB[i] for i in range(7)]


def _json(steps, note=None):
    # output: The cat sat on the mat . (ids 0..6); step 0 is prefill ("The")
    return {"identical": True, "preset": "smollm2-ngram", "speedup": 1.2, "method_kind": "ngram",
            "num_speculative_tokens": 4, "baseline": {"step_seconds": 0.05},
            "speculative": {"token_ids": [0, 1, 2, 3, 4, 5, 6], "step_detail": steps, "step_detail_note": note}}


def _result(steps, note=None):
    return RunResult.model_validate(_json(steps, note))


def _run(steps, note=None, decode=decode):
    return stepper.run_from(_result(steps, note), PIECES, decode)


REJECTED = {"start": 1, "tokens": 3, "accepted": 2, "drafted": 4, "proposed": [1, 2, 8, 9], "target_token": 3,
            "seconds": 0.06}
ALL = {"start": 4, "tokens": 3, "accepted": 2, "drafted": 2, "proposed": [4, 5], "target_token": None,
       "seconds": 0.055}
UNKNOWN = {"start": 1, "tokens": 3, "accepted": None, "drafted": None, "proposed": None, "target_token": None,
           "seconds": None}


def test_a_rejected_step_shows_accepted_rejected_target_and_greyed_tokens():
    run = _run([REJECTED, ALL])
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
    html = stepper.step_html(_run([none]), 1)
    assert "accepted nothing: no draft" in html and "0 of 4" not in html


def test_an_unknown_step_says_so_with_the_methods_note_and_never_guesses():
    note = "EAGLE drafts from the target's hidden states inside the engine and vLLM doesn't return the drafted tokens"
    run = _run([UNKNOWN], note)
    html = stepper.step_html(run, 1)
    assert "accepted unknown" in html and "drafts unknown (unknown)" in html and "time unknown" in html
    assert "vLLM doesn&#x27;t return the drafted tokens" in html
    assert "st-accepted\"" not in html.split("st-legend")[0]  # no drafted token drawn: none is known
    counted = dict(UNKNOWN, accepted=1, drafted=4)
    assert "drafts unknown (1 of 4 accepted)" in stepper.step_html(_run([counted]), 1)


def test_text_is_escaped_and_a_crafted_run_json_is_refused_by_its_validation():
    escaped = dict(REJECTED, proposed=[7, 7, 7, 7])
    html = stepper.step_html(_run([escaped]), 1)
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert _run([]) is None and stepper.run_from(None, PIECES, decode) is None
    for crafted in (None, "x", _json("no"), {**_json([REJECTED]), "speculative": {"token_ids": ["<script>", 1]}},
                    _json([{"start": "<i>", "tokens": 1e308}]), _json([{"start": 1, "tokens": 1, "accepted": 99}]),
                    _json([{"start": 1, "tokens": 1, "proposed": [10 ** 12]}]), _json(["not a step"]),
                    {**_json([REJECTED]), "speedup": float("nan")}):
        with pytest.raises(ValidationError):
            RunResult.model_validate(crafted)
    for i in (1, 2, "<b>", None, 10 ** 9):
        assert "<i>" not in stepper.step_html(_run([REJECTED]), i)
    assert stepper.step_html(None, 1) == stepper.IDLE


def test_each_drafted_id_is_decoded_once_by_the_runs_own_tokenizer():
    """Decoding is linear in the run: a thousand steps drafting the same few ids decode each id once (the
    old stepper decoded what the browser posted, a POST of 41 kB costing ~4 CPU-seconds)."""
    calls = []

    def counting(ids):
        calls.append(list(ids))
        return decode(ids)

    steps = [dict(REJECTED, start=1 + i % 5) for i in range(1000)]
    run = stepper.run_from(RunResult.model_validate({**_json(steps), "speculative": {
        **_json(steps)["speculative"], "token_ids": list(range(7)) * 200}}), PIECES * 200, counting)
    assert len(run.steps) == 1000 and sorted(map(tuple, calls)) == [(1,), (2,), (3,), (8,), (9,)]


def test_the_stepper_reads_the_step_detail_a_real_result_carries():
    """From RunResult.model_dump(mode="json") itself (where the page's `result` comes from), not a hand-made dict: the
    steps sit under `speculative` (read from the top level, the stepper stayed idle after every run)."""
    from specplay.presets.catalog import get_preset
    from tests.ui_fixtures import comparison_of, synthetic_events

    events = synthetic_events(list(range(9)), [[0], [1, 2, 3], [4], [5, 6, 7, 8]], k=4)
    result = RunResult.of(comparison_of(events), get_preset("smollm2-ngram"))
    run = stepper.run_from(result, [f"{i} " for i in range(9)], None)
    assert run is not None and len(run.steps) == len(result.step_detail.steps) >= 3 and run.k == 4
    again = RunResult.model_validate(result.model_dump(mode="json"))  # the JSON round trip keeps what it reads
    back = stepper.run_from(again, [f"{i} " for i in range(9)], None)

    def drafts(r):  # times are rounded in the JSON (6 digits): what was drafted and accepted is exact
        return [{k: v for k, v in step.items() if k != "seconds"} for step in r.steps]
    assert drafts(back) == drafts(run) and back.k == run.k
    assert f"Step 1 of {len(run.steps)}" in stepper.step_html(run, 1)


def test_a_replayed_drafts_rejected_token_is_marked_not_checked():
    """Issue 36, 8: compare --draft-steps recomputes a draft model's drafts alone; vLLM's counts confirm where
    a rejection fell, not which token was rejected, so that token says "not checked" (it was shown as known);
    the flag survives the JSON round trip."""
    result = _result([REJECTED])
    replayed = result.with_step_detail(result.step_detail.model_copy(update={"rejections_checked": False}))
    again = RunResult.model_validate(replayed.model_dump(mode="json"))
    assert again.step_detail.rejections_checked is False and result.step_detail.rejections_checked is True
    html = stepper.step_html(stepper.run_from(again, PIECES, decode), 1)
    assert "not checked" in html and "st-rejected st-unchecked" in html
    assert "not checked</span>" not in stepper.step_html(_run([REJECTED]), 1).split("st-legend")[0]
