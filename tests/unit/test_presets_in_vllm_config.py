"""The bundled-config presets as vLLM 0.32 itself reads them: its SpeculativeConfig built in-process from
each preset's speculative_config (config objects only, no engine): MTP finds MiMo's MTP layer, PARD keeps
parallel drafting and the draft's pard_token, and suffix asks for arctic-inference as availability says."""

import importlib.util

import pytest

from specplay.presets.catalog import load_presets
from specplay.presets.models import resolve_model



def _speculative_config(preset):
    # imported here, not at collection: vllm.config costs ~10 s of CPU, and every xdist worker collects this file
    vllm_config = pytest.importorskip("vllm.config")
    from vllm.config.speculative import SpeculativeConfig

    folder = resolve_model(preset.target.model)
    target = vllm_config.ModelConfig(model=folder, tokenizer=folder, skip_tokenizer_init=True, dtype="bfloat16",
                                     max_model_len=preset.target.max_model_len)
    spec = preset.speculative_config.vllm
    if "model" in spec:
        spec["model"] = resolve_model(spec["model"])
    return SpeculativeConfig(**spec, target_model_config=target, target_parallel_config=vllm_config.ParallelConfig())


def test_mtp_preset_builds_mimos_mtp_draft():
    config = _speculative_config(load_presets()["dummy-mimo7b-mtp-k1"])
    assert config.method == "mtp" and config.num_speculative_tokens == 1
    assert config.draft_model_config.architectures == ["MiMoMTPModel"]
    assert config.draft_model_config.hf_config.n_predict == 1


def test_pard_preset_keeps_parallel_drafting_and_the_pard_token():
    config = _speculative_config(load_presets()["dummy-llama8b-pard1b-k5"])
    assert config.method == "draft_model" and config.parallel_drafting and config.num_speculative_tokens == 5
    assert config.draft_model_config.hf_config.pard_token == 128255


def test_suffix_without_arctic_inference_is_refused_by_vllm_too():
    if importlib.util.find_spec("arctic_inference") is not None:
        pytest.skip("arctic-inference is installed here")
    SpeculativeConfig = pytest.importorskip("vllm.config.speculative").SpeculativeConfig

    with pytest.raises(ImportError, match="Arctic Inference"):
        SpeculativeConfig(method="suffix", num_speculative_tokens=8)


@pytest.mark.parametrize("name, method, k, architecture", [
    ("dummy-llama8b-dflash", "dflash", 9, "DFlashDraftModel"),
    ("dummy-qwen3-8b-dspark", "dspark", 7, "Qwen3DSparkModel"),
])
def test_the_bundled_dflash_and_dspark_drafts_are_read_by_vllm(name, method, k, architecture):
    """The dummy twins' draft configs (built from the public checkpoints' shapes) as vLLM reads them: the
    method's draft architecture, one block of k drafted in parallel."""
    config = _speculative_config(load_presets()[name])
    assert config.method == method and config.num_speculative_tokens == k and config.parallel_drafting
    assert config.draft_model_config.architectures == [architecture]


def test_the_block_verifier_preset_keeps_its_verifier():
    config = _speculative_config(load_presets()["dummy-llama8b-eagle3-block"])
    assert config.rejection_sample_method == "block" and config.method == "eagle3"
