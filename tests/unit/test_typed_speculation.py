"""A preset's speculative_config is typed (presets.speculation): its kind, the method table's facts, the
verifier, the synthetic flag and the limits of k, with vLLM's keys kept verbatim for the engine. Readers take
the kind: PARD (vLLM's draft_model with parallel_drafting) drafts all k in one pass (issue 37, 2)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from specplay.bench import advice as bench_advice
from specplay.bench.passes import preset_draft_passes
from specplay.bench.report import BenchReport, BenchRow
from specplay.bench.runner import BenchRun, BenchSettings
from specplay.core.hardware import Hardware
from specplay.presets import methods
from specplay.presets.catalog import engine_settings, get_preset
from specplay.presets.speculation import Speculation

ROOT = Path(__file__).resolve().parents[2]


def _rows(k_small=5, k_large=7):
    """The rule says raise k (80% accepted), the smaller k measured faster, and the step cost grows with k."""
    return [BenchRow(workload="token-ids", temperature=0.0, concurrency=1, k=k, speedup=s, tokens_per_step_ratio=g,
                     step_cost_ratio=c, acceptance_rate=a)
            for k, s, g, c, a in ((k_small, 1.5, 2.2, 1.3, 0.80), (k_large, 1.3, 2.4, 1.6, 0.78))]


class _Pair:  # BenchRun reads nothing of the pair until it runs
    can_swap_speculative = True


def test_a_pard_bench_says_one_pass_drafts_all_k():
    """The bench looked the advice's facts up by vLLM's method ("draft_model"), so a PARD bench said each
    draft position adds a draft pass; PARD's one pass drafts all k."""
    preset = get_preset("dummy-llama8b-pard1b-k5")
    assert preset.method == "draft_model" and preset.kind == "pard"
    bench = BenchRun(_Pair(), preset, BenchSettings(preset.name, k=(5, 7), n=1), {"token-ids": [[1, 2, 3]]},
                     Hardware(0, None, (0, 1)))
    bench.rows = _rows()
    result = bench.result()
    [advice] = result.advice
    assert "one pass drafts all k" in advice.sentence
    assert "adds a draft pass" not in advice.sentence
    assert result.kind == "pard"
    # a replot or merge of its bench.json reads the kind back, not the method
    again = BenchReport.model_validate(json.loads(json.dumps(result.model_dump())))
    assert again.kind == "pard" and again.method == "draft_model"


def test_a_draft_model_bench_still_says_each_position_adds_a_pass():
    [advice] = bench_advice.advise(_rows(), 5, get_preset("llama31-8b-draft-1b-k5").kind, None)
    assert "adds a draft pass and verification work" in advice.sentence
    assert "one pass drafts all k" not in advice.sentence


def test_the_typed_section_carries_kind_facts_verifier_synthetic_and_limits():
    pard = get_preset("dummy-llama8b-pard1b-k5").speculative_config
    assert isinstance(pard, Speculation)
    assert (pard.kind, pard.method, pard.k, pard.facts.parallel, pard.synthetic) == ("pard", "draft_model", 5, True, True)
    assert pard.verifier.name == "synthetic" and pard.verifier.exact is False
    assert (pard.limits.k_min, pard.limits.k_max, pard.limits.prompt_lookup) == (1, 16, None)
    ngram = get_preset("smollm2-ngram").speculative_config
    assert ngram.kind == "ngram" and not ngram.synthetic and ngram.verifier.exact
    assert ngram.limits.prompt_lookup == (ngram.prompt_lookup_min, ngram.prompt_lookup_max)
    fly = get_preset("smollm2-ngram-fly").speculative_config
    assert fly.verifier.name == "fly" and "differ by design" in fly.verifier.why_different


def test_vllm_gets_the_raw_keys_verbatim():
    preset = get_preset("dummy-llama8b-pard1b-k5")
    spec = preset.speculative_config
    raw = spec.vllm
    assert type(raw) is dict and raw["method"] == "draft_model" and raw["parallel_drafting"] is True
    assert "kind" not in raw and spec.model_dump() == raw  # the dump is vLLM's keys, as written
    assert Speculation.model_validate(raw) == spec  # and model_validate reads them back
    sent = engine_settings(preset, Hardware(1, "H200", (0, 1)))[1].engine_args["speculative_config"]
    assert type(sent) is dict and json.loads(json.dumps(sent))["method"] == "draft_model"
    raw["method"] = "changed"  # a copy: the preset's own is untouched
    assert spec.method == "draft_model" and not hasattr(spec, "__getitem__")
    copy = dataclasses.replace(preset, speculative_config=spec.replace(num_speculative_tokens=7))
    assert isinstance(copy.speculative_config, Speculation) and copy.kind == "pard" and copy.num_speculative_tokens == 7
    assert list(copy.speculative_config.vllm) == list(raw)  # the keys in the order the preset wrote them


def test_a_new_method_is_one_table_row(monkeypatch):
    row = methods.MethodFacts("zflash", "zflash", "head", "ZFlash draft", methods.ONE_DRAFT_PASS, None,
                              "a ZFlash draft trained for this target would help", target_hidden_states=True)
    monkeypatch.setitem(methods.METHOD_FACTS, "zflash", row)
    spec = Speculation(method="zflash", num_speculative_tokens=4, model="org/zflash")
    assert spec.kind == "zflash" and spec.facts is row
    assert preset_draft_passes(spec, 4) == 1  # the bench's cost model
    [advice] = bench_advice.advise(_rows(4, 6), 4, spec.kind, None)  # the advice
    assert "one pass drafts all k" in advice.sentence


def test_no_reader_looks_facts_up_by_vllms_method_name():
    """Facts come from a kind (Speculation.kind, facts_of_kind), never from {"method": ...} built by a reader."""
    offenders = [str(p.relative_to(ROOT)) for p in (ROOT / "specplay").rglob("*.py")
                 if 'facts_for({"method"' in p.read_text()]
    assert offenders == []
