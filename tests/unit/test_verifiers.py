"""The verifier table (presets.verifiers): which of vLLM's rejection_sample_methods keep the target's output at
T=0, and the sentence a lossy one's divergence gets on the page's badge, in `compare`'s verdict and JSON.
FLy measured on the H200 (vLLM 0.34, docs/results/h200-v034/h200-v034-smollm2-verifiers.json): 1 of 14
prompts identical, against 14/14 for standard and block; before this table the badge blamed floating point."""

from __future__ import annotations

import json
from pathlib import Path

from specplay.cli.report import verdict
from specplay.core.events import BASELINE, SPECULATIVE
from specplay.page import views
from specplay.presets.catalog import get_preset
from specplay.presets.verifiers import VERIFIERS, is_synthetic, verifier_named, verifier_of
from specplay.run.result import RunResult
from tests.ui_fixtures import comparison_of, synthetic_events

FACTS_034 = Path(__file__).parents[1] / "fixtures" / "vllm-0.34-facts.json"
PIECES = {BASELINE: ["a", "b", "c"], SPECULATIVE: ["a", "b", "z"]}


def test_the_table_covers_every_verifier_vllm_034_has():
    recorded = json.loads(FACTS_034.read_text())["rejection_sample_methods"]
    assert recorded and set(recorded) <= set(VERIFIERS)


def test_exact_and_lossy_verifiers():
    assert verifier_of({}).name == "standard" and verifier_of(None).exact is True
    assert verifier_of({"rejection_sample_method": "block"}).exact is True
    fly = verifier_of({"rejection_sample_method": "fly"})
    assert fly.exact is False and "lossy" in fly.why_different and "trades exactness for speed" in fly.why_different
    assert is_synthetic({"rejection_sample_method": "synthetic"}) and not is_synthetic({"method": "ngram"})
    newer = verifier_named("tree")  # a verifier a later vLLM adds: nothing promised, named in the sentence
    assert newer.exact is None and "'tree'" in newer.why_different


def test_a_fly_divergence_is_explained_as_lossy_not_floating_point():
    diverged = comparison_of(synthetic_events([1, 2, 3], [[1], [2, 4]]))
    fly = views.badge_html(diverged, PIECES, verifier=verifier_named("fly"))
    assert "FLy" in fly and "lossy" in fly and views.WHY_T0 not in fly
    assert views.WHY_T0 in views.badge_html(diverged, PIECES, verifier=verifier_named("block"))


def test_a_fly_run_says_so_in_compare_json_and_verdict():
    diverged = comparison_of(synthetic_events([1, 2, 3], [[1], [2, 4]]))
    preset = get_preset("smollm2-ngram-fly")
    result = RunResult.of(diverged, preset, device="gpu")
    out = result.model_dump(mode="json")
    assert out["verifier"] == "fly" and out["verifier_exact"] is False and not out["identical"]
    assert "lossy" in verdict(result)
    # the JSON carries the verdict's sentence too (it was only in the text report): a script reads why
    assert out["verifier_why_different"] == verifier_named("fly").why_different
    assert out["verifier_why_different"] in verdict(result) and "differ by design" in out["verifier_why_different"]
    exact = RunResult.of(diverged, get_preset("smollm2-ngram")).model_dump(mode="json")
    assert exact["verifier"] == "standard" and exact["verifier_exact"] is True
    assert "lossy" not in verdict(RunResult.of(diverged, get_preset("smollm2-ngram")))
