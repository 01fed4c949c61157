"""The named configs of benchmarks/gpu/spec_probe.py (the issue-17 table, `spec_probe.py --list`): target and
speculative_config of each, on the config-only models of the project's presets and of benchmarks/gpu/probe-models/
(loaded with load_format="dummy"). Plain Python: imports neither vLLM nor the project's package."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def preset_model(name: str) -> str:
    """A config-only model folder of the project's presets (presets/models/ when these runs were made; the
    package restructuring moves them to specplay/presets/data/models/, same files)."""
    for base in ("presets/models", "specplay/presets/data/models"):
        if (ROOT / base / name / "config.json").exists():
            return str(ROOT / base / name)
    raise FileNotFoundError(f"no config.json for {name} under presets/models or specplay/presets/data/models")


TARGET_8B = preset_model("llama-3.1-8b-shaped")
DRAFT_1B = preset_model("llama-3.2-1b-shaped")
EAGLE = preset_model("eagle-llama3-8b-head")
EAGLE3 = preset_model("eagle3-llama3.1-8b-head")
PARD_1B = str(ROOT / "benchmarks/gpu/probe-models/pard-llama-3.2-1b-shaped")
MIMO = str(ROOT / "benchmarks/gpu/probe-models/mimo-7b-mtp-shaped")
# vLLM 0.34's block drafters: the presets' config-only shapes (dummy-llama8b-dflash, dummy-qwen3-8b-dspark)
DFLASH = preset_model("dflash-llama3.1-8b-draft")
QWEN3_8B = preset_model("qwen3-8b-shaped")
DSPARK = preset_model("dspark-qwen3-8b-draft")


def rates(a: float, k: int) -> list[float]:
    return [round(a ** (i + 1), 6) for i in range(k)]


def spec(method: str, k: int, a: float = 0.7, **extra) -> dict:
    d = {"method": method, "num_speculative_tokens": k, "rejection_sample_method": "synthetic",
         "synthetic_acceptance_rates": rates(a, k)}
    d.update(extra)
    return d


# name -> (target, speculative_config or None, env for the whole process, baseline name for ×)
CONFIGS: dict[str, dict] = {
    "baseline": dict(target=TARGET_8B, spec=None),
    "draft-k3-v2": dict(target=TARGET_8B, spec=spec("draft_model", 3, model=DRAFT_1B)),
    "draft-k3-v1": dict(target=TARGET_8B, spec=spec("draft_model", 3, model=DRAFT_1B),
                        env={"VLLM_USE_V2_MODEL_RUNNER": "0"}),
    "draft-k3-v1-during-start": dict(target=TARGET_8B, spec=spec("draft_model", 3, model=DRAFT_1B),
                                     v1_during_start=True),
    "draft-k3-v1-noasync": dict(target=TARGET_8B, spec=spec("draft_model", 3, model=DRAFT_1B),
                                env={"VLLM_USE_V2_MODEL_RUNNER": "0"}, engine={"async_scheduling": False}),
    "pard-k5": dict(target=TARGET_8B, spec=spec("draft_model", 5, model=PARD_1B, parallel_drafting=True)),
    "pard-k7": dict(target=TARGET_8B, spec=spec("draft_model", 7, model=PARD_1B, parallel_drafting=True)),
    "pard-k8": dict(target=TARGET_8B, spec=spec("draft_model", 8, model=PARD_1B, parallel_drafting=True)),
    "eagle-k3": dict(target=TARGET_8B, spec=spec("eagle", 3, model=EAGLE)),
    "eagle3-k5": dict(target=TARGET_8B, spec=spec("eagle3", 5, model=EAGLE3)),
    "ngram-k4": dict(target=TARGET_8B, spec=spec("ngram", 4, prompt_lookup_max=4, prompt_lookup_min=2)),
    "ngram-k4-v1": dict(target=TARGET_8B, spec=spec("ngram", 4, prompt_lookup_max=4, prompt_lookup_min=2),
                        env={"VLLM_USE_V2_MODEL_RUNNER": "0"}),
    "ngram_gpu-k4": dict(target=TARGET_8B, spec=spec("ngram_gpu", 4, prompt_lookup_max=4, prompt_lookup_min=2)),
    "mimo-baseline": dict(target=MIMO, spec=None),
    "mtp-k1": dict(target=MIMO, spec=spec("mtp", 1)),
    "mtp-k3": dict(target=MIMO, spec=spec("mtp", 3)),
    "suffix": dict(target=TARGET_8B, spec={"method": "suffix", "num_speculative_tokens": 4}),
    # vLLM 0.34 (Model Runner V2 only; the draft model has CUDA graphs): k, the draft's dtype, its sampling
    "draft-k2-v2": dict(target=TARGET_8B, spec=spec("draft_model", 2, model=DRAFT_1B)),
    "draft-k4-v2": dict(target=TARGET_8B, spec=spec("draft_model", 4, model=DRAFT_1B)),
    "draft-k5-v2": dict(target=TARGET_8B, spec=spec("draft_model", 5, model=DRAFT_1B)),
    "draft-k7-v2": dict(target=TARGET_8B, spec=spec("draft_model", 7, model=DRAFT_1B)),
    "draft-k3-fp8": dict(target=TARGET_8B, spec=spec("draft_model", 3, model=DRAFT_1B, quantization="fp8")),
    "draft-k2-fp8": dict(target=TARGET_8B, spec=spec("draft_model", 2, model=DRAFT_1B, quantization="fp8")),
    "draft-k3-prob": dict(target=TARGET_8B, spec=spec("draft_model", 3, model=DRAFT_1B,
                                                      draft_sample_method="probabilistic")),
    # dynamic k (num_speculative_tokens_per_batch_size: [min_batch, max_batch, k]); k is the largest of them
    "draft-dyn": dict(target=TARGET_8B, spec=spec("draft_model", 3, model=DRAFT_1B,
                                                  num_speculative_tokens_per_batch_size=[[1, 4, 3], [5, 16, 2],
                                                                                         [17, 1024, 1]])),
    # one draft pass proposes the whole block (k = the block's drafted tokens)
    "dflash-k9": dict(target=TARGET_8B, spec=spec("dflash", 9, model=DFLASH)),
    "qwen3-baseline": dict(target=QWEN3_8B, spec=None),
    "dspark-k7": dict(target=QWEN3_8B, spec=spec("dspark", 7, model=DSPARK)),
    # the block verifier replaces synthetic acceptance: random weights reject nearly every draft (its cost only)
    "eagle3-k5-block": dict(target=TARGET_8B, spec={"method": "eagle3", "model": EAGLE3, "num_speculative_tokens": 5,
                                                    "rejection_sample_method": "block"}),
}
_BASELINES = {MIMO: "mimo-baseline", QWEN3_8B: "qwen3-baseline"}
for _name, _c in CONFIGS.items():
    _c.setdefault("baseline", _BASELINES.get(_c["target"], "baseline"))
