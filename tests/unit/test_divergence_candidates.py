"""At the first divergence, the top candidates and their log-probabilities on both sides: from vLLM's
per-token logprobs (Chunk), kept on the trace, in `compare --json` and in the page's badge."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

from specplay.core.events import BASELINE, SPECULATIVE, StepEvent
from specplay.engine.vllm_engine import TOP_LOGPROBS, chunk_of, top_logprobs
from specplay.page import views
from specplay.presets.verifiers import verifier_named
from specplay.run.result import RunResult
from tests.ui_fixtures import comparison_of, synthetic_events


def _lp(logprob, text):
    return SimpleNamespace(logprob=logprob, decoded_token=text, rank=None)


def test_vllm_logprobs_become_ranked_candidates_per_token():
    positions = [{5: _lp(-0.1, " the"), 7: _lp(-2.5, " a"), 9: _lp(-3.0, None)}, {1: _lp(-0.01, ".")}]
    assert top_logprobs(positions) == (((" the", -0.1), (" a", -2.5), ("<9>", -3.0)), ((".", -0.01),))
    assert top_logprobs(None) is None and top_logprobs([object()]) is None
    out = SimpleNamespace(finished=False, outputs=[SimpleNamespace(token_ids=[5], text=" the", finish_reason=None,
                                                                   logprobs=positions[:1])])
    assert chunk_of(out).logprobs[0][0] == (" the", -0.1) and TOP_LOGPROBS == 5


def _with_logprobs(events, table):
    """Each StepEvent's tokens given candidates: table[(role, token index)] or a default single one."""
    seen = {BASELINE: 0, SPECULATIVE: 0}
    out = []
    for e in events:
        if isinstance(e, StepEvent):
            lps = []
            for _ in e.token_ids:
                lps.append(table.get((e.engine, seen[e.engine]), (("x", -0.05),)))
                seen[e.engine] += 1
            e = dataclasses.replace(e, logprobs=tuple(lps))
        out.append(e)
    return out


def test_divergence_candidates_reach_the_json_and_the_badge():
    tie = {(BASELINE, 2): ((" cat", -0.70), (" dog", -0.72)), (SPECULATIVE, 2): ((" dog", -0.69), (" cat", -0.71))}
    events = _with_logprobs(synthetic_events([1, 2, 3, 4], [[1], [2, 9], [4]]), tie)
    comparison = comparison_of(events)
    assert comparison.first_divergence == 2 and len(comparison.baseline.top_logprobs) == 4
    result = RunResult.of(comparison)
    cands = result.model_dump(mode="json")["divergence_candidates"]
    assert cands == {BASELINE: [[" cat", -0.7], [" dog", -0.72]], SPECULATIVE: [[" dog", -0.69], [" cat", -0.71]]}
    badge = views.badge_html(comparison, {BASELINE: ["a", "b", "c", "d"], SPECULATIVE: ["a", "b", "z", "d"]})
    assert '<table>' in badge and "baseline token" in badge and "-0.720" in badge
    assert "A near-tie" in badge and "0.02 nats" in badge
    # Synthetic acceptance (dummy presets) emits drafts whatever the model rates them: the H200 screenshot
    # showed a 'near-tie' table under "outputs differ by design"; no candidates there.
    synthetic = views.badge_html(comparison, {BASELINE: ["a", "b", "c", "d"], SPECULATIVE: ["a", "b", "z", "d"]},
                                 verifier=verifier_named("synthetic"))
    assert verifier_named("synthetic").why_different in synthetic
    assert "<table>" not in synthetic and "near-tie" not in synthetic
    far = views.candidates_html({BASELINE: [["a", -0.1], ["b", -4.0]], SPECULATIVE: [["b", -0.2]]})
    assert "clear preference" in far
    assert "not among the baseline" in views.candidates_html({BASELINE: [["a", -0.1]], SPECULATIVE: [["q", -0.2]]})


def test_no_logprobs_no_candidates():
    comparison = comparison_of(synthetic_events([1, 2, 3], [[1], [2, 9]]))
    assert comparison.first_divergence == 2
    assert "divergence_candidates" not in RunResult.of(comparison).model_dump(mode="json")
    assert "<table>" not in views.badge_html(comparison)
    identical = comparison_of(_with_logprobs(synthetic_events([1, 2, 3], [[1], [2, 3]]), {}))
    assert "divergence_candidates" not in RunResult.of(identical).model_dump(mode="json")


def test_the_cli_report_lists_the_candidates():
    from specplay.cli.report import verdict as verdict_text

    tie = {(BASELINE, 2): ((" cat", -0.70), (" dog", -0.72)), (SPECULATIVE, 2): ((" dog", -0.69),)}
    result = RunResult.of(comparison_of(_with_logprobs(synthetic_events([1, 2, 3, 4], [[1], [2, 9], [4]]), tie)))
    text = verdict_text(result)
    assert "baseline top:    ' cat' -0.700, ' dog' -0.720" in text and "speculative top: ' dog' -0.690" in text
