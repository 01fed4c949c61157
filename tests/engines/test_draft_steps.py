"""A draft model's drafts, recomputed (issue 31, 1): `specplay compare --draft-steps` on smollm2-layerskip-draft
(the offline SmolLM2 with a layer-skipped draft, partial acceptance) starts the draft model alone after the
run and continues each step's context greedily. Every step with drafts must then agree with what the target
emitted (its accepted drafts are the output there, the target's own token follows), and the run has
rejected drafts to show. Real CPU engines, the real command (`specplay.cli.main`)."""

from __future__ import annotations

import json


def test_compare_draft_steps_recomputes_a_draft_models_drafts_and_each_agrees_with_the_stream(layerskip_pair, capsys):
    """The command as it runs (arguments, report, JSON on stdout) on the session's pair, which the pool moved
    to smollm2-layerskip-draft by swapping only the speculative engine; the draft engine starts here."""
    from specplay.cli.main import main

    assert main(["compare", "--preset", "smollm2-layerskip-draft", "--max-tokens", "32", "--draft-steps", "--json",
                 "--schedule", "concurrent"],  # the schedule changes no token: the quicker one
                pair=layerskip_pair) == 0
    done = capsys.readouterr()
    assert "replaying the draft model's drafts" in done.err
    result = json.loads(done.out)  # stdout is exactly one JSON object
    spec = result["speculative"]
    out, steps, k = spec["token_ids"], spec["step_detail"], 3
    assert sum(s["tokens"] for s in steps) == len(out) - spec["step_sizes"][0]
    known = [s for s in steps if s["proposed"] is not None]
    assert len(known) >= 0.8 * len(steps), steps
    for s in known:
        a = s["accepted"] if s["accepted"] is not None else s["tokens"]
        assert len(s["proposed"]) == k and out[s["start"]:s["start"] + a] == s["proposed"][:a], s
        if s["target_token"] is not None:  # the first rejected draft, and the target's own token in its place
            assert s["proposed"][a] != s["target_token"] == out[s["start"] + a], s
    rejected = [s for s in known if s["target_token"] is not None]
    assert rejected, "a layer-skipped draft at ~50% acceptance rejects some drafts"
    assert "recomputed after the run" in spec["step_detail_note"]


def test_draft_steps_are_refused_with_the_reason_where_they_cant_be_replayed():
    from specplay.presets.catalog import get_preset
    from specplay.run.draft_steps import NOT_A_DRAFT_MODEL, NOT_GREEDY, why_not

    assert why_not(get_preset("smollm2-ngram"), 0.0) == NOT_A_DRAFT_MODEL
    assert why_not(get_preset("dummy-llama8b-eagle-k3"), 0.0) == NOT_A_DRAFT_MODEL
    assert why_not(get_preset("smollm2-layerskip-draft"), 0.7) == NOT_GREEDY
    assert why_not(get_preset("smollm2-layerskip-draft"), 0.0) is None
