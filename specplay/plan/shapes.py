"""A model's shape from its config.json, offline: the config found (a local folder, the GGUF header of the
offline SmolLM2, a same-shape bundled stand-in (specplay/presets/data/models/) for hub models, the hub's own
when reachable), then its parameters counted as vLLM builds the model, its weight bytes and its KV cache
per token. The memory plan (`plan.memory`) is built on these. No vLLM, no Gradio.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from specplay.core.paths import BUNDLED_MODELS_DIR
from specplay.core.reading import CONFIG_MAX_BYTES, UnreadableInput, check_values, load_json
from specplay.plan.gguf import read_gguf_metadata
from specplay.presets.hub import hub_reachable
from specplay.presets.models import BUNDLED, LOCAL, REPO, local_folder
from specplay.presets.offline_model import (BIGRAM_DRAFT_NAME, DERIVED_DRAFT_NAME, DERIVED_DRAFT_SKIPPED, OFFLINE_MODELS,
                                            TARGET_NAME)

DTYPE_BYTES = {"float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2}
FOUR_BIT_METHODS = {"awq", "awq_marlin", "gptq", "gptq_marlin", "bitsandbytes", "gguf"}

# Hub models with a bundled config of the same architecture, used when the hub's own config isn't in the
# local cache (the planner never needs weights, only the shape).
SHAPE_STAND_INS = {
    "meta-llama/Llama-3.1-8B-Instruct": "llama-3.1-8b-shaped",
    "meta-llama/Llama-3.1-70B-Instruct": "llama-3.1-70b-shaped",
    "meta-llama/Llama-3.2-1B-Instruct": "llama-3.2-1b-shaped",
    "amd/PARD-Llama-3.2-1B": "llama-3.2-1b-pard-shaped",
    "yuhuili/EAGLE-LLaMA3-Instruct-8B": "eagle-llama3-8b-head",
    "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B": "eagle3-llama3.1-8b-head",
    "z-lab/LLaMA3.1-8B-Instruct-DFlash-UltraChat": "dflash-llama3.1-8b-draft",
    "Qwen/Qwen3-8B": "qwen3-8b-shaped",
    "deepseek-ai/dspark_qwen3_8b_block7": "dspark-qwen3-8b-draft",  # layer sizes assumed (its _comment)
}


class ConfigUnavailable(Exception):
    """A model's config.json can't be had offline; the message says why."""


# -- model configs -----------------------------------------------------------------------------------
def load_config(ref: str) -> tuple[dict, str]:
    """(config.json as a dict, where it came from) for a preset's model reference; ConfigUnavailable if
    there is none to be had from here."""
    if ref.startswith("offline:"):
        return _offline_config(ref[len("offline:"):])
    if ref.startswith((BUNDLED, REPO, LOCAL)):  # a folder here: its own config.json
        return _read_json(local_folder(ref) / "config.json"), ref
    return _hub_config(ref)


def _read_json(path: Path) -> dict:
    """A config.json, bounded (core.reading); ConfigUnavailable when there is none, UnreadableInput when
    there is one no model could have (too big, too deep, a list, a FIFO): the gate refuses that pair."""
    if not path.exists() and not path.is_symlink():
        raise ConfigUnavailable(f"{path}: no such file")
    config = load_json(path, CONFIG_MAX_BYTES, str(path))
    if not isinstance(config, dict):
        raise UnreadableInput(f"{path}: expected a JSON object (a model's config), got {type(config).__name__}")
    return config


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
    if name == BIGRAM_DRAFT_NAME:  # a fixed shape, whatever text it learns from (presets.bigram_draft)
        from specplay.presets.bigram_draft import BIGRAM_CONFIG

        return dict(BIGRAM_CONFIG), "presets/bigram_draft.py (not prepared yet)"
    from specplay.presets.offline_model import OfflineModelError, find_smollm2_gguf

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
        name = SHAPE_STAND_INS[repo_id]
        return _read_json(BUNDLED_MODELS_DIR / name / "config.json"), f"{BUNDLED}{name} (same architecture)"
    if try_to_load_from_cache is not None and hub_reachable():
        try:
            from huggingface_hub import hf_hub_download

            return _read_json(Path(hf_hub_download(repo_id, "config.json", etag_timeout=5))), "Hugging Face hub"
        except Exception as exc:  # gated, missing, network: say which, don't crash
            raise ConfigUnavailable(f"config for {repo_id} not available: the hub refused ({type(exc).__name__})") from None
    raise ConfigUnavailable(f"config for {repo_id} not available offline (not in the Hugging Face cache, "
                            "and the hub can't be reached from here)")


def config_from_gguf(path: Path) -> dict:
    """The Llama config.json transformers derives from a llama-architecture GGUF (as `prepare` saves it)."""
    return dict(_config_from_gguf(Path(path).resolve()))


_GGUF_NEEDED = ("llama.attention.head_count", "llama.embedding_length", "llama.block_count", "llama.feed_forward_length")


@lru_cache(maxsize=4)
def _config_from_gguf(path: Path) -> dict:
    meta, tensors = read_gguf_metadata(path)
    arch = meta.get("general.architecture")
    if arch != "llama":
        raise ConfigUnavailable(f"{path}: architecture {arch!r}, expected 'llama'")
    missing = [key for key in _GGUF_NEEDED if key not in meta]
    if missing:
        raise UnreadableInput(f"{path}: its GGUF metadata has no {missing[0]}")
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
    check_values(config, str(path))  # a u64 past int64, an f32 inf: refused here, as a config.json's are
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
    """What vLLM loads for an EAGLE head (or a DFlash / DSpark draft: count_block_draft), and what it shares
    with the target (not counted here).

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
    if method in ("dflash", "dspark"):
        return count_block_draft(config, method, target_config)
    raise ValueError(f"not an EAGLE method: {method!r}")


def count_block_draft(config: dict, method: str, target_config: dict) -> tuple[ParamCount, str]:
    """What vLLM loads for a DFlash or DSpark draft (vllm/model_executor/models/qwen3_dflash.py, qwen3_dspark.py):
    num_hidden_layers Qwen3 decoder layers (with per-head q and k norms), an fc from the target's hidden
    states at its target layers (len(target_layer_ids) x the target's hidden size -> hidden), a hidden norm
    and a final norm. The token embedding and the LM head are the target's where the shapes match (the public
    checkpoints carry neither: z-lab's Llama-3.1-8B draft is 1.95 GiB, its five layers and fc). DSpark adds a
    low-rank Markov head (vocab x rank, rank x draft vocab) and a small confidence head."""
    s, t = _shape(config), _shape(target_config)
    shares = (s["vocab"], s["hidden"]) == (t["vocab"], t["hidden"])
    ids = (config.get("dflash_config") or {}).get("target_layer_ids") or config.get("target_layer_ids")
    taps = len(ids) if ids else s["layers"]
    target_hidden = config.get("target_hidden_size") or t["hidden"]
    linear = s["layers"] * _layer_linear(s) + taps * target_hidden * s["hidden"]
    norm = (2 * s["layers"] + 2) * s["hidden"] + 2 * s["layers"] * s["head_dim"]
    note = "token embedding and LM head shared with the target" if shares else "own token embedding and LM head"
    if method == "dspark":
        rank = int(config.get("markov_rank") or 0)
        linear += rank * (s["vocab"] + (config.get("draft_vocab_size") or s["vocab"]))
        if config.get("enable_confidence_head"):
            linear += s["hidden"] + (rank if config.get("confidence_head_with_markov") else 0) + 1
        note += f"; a rank-{rank} Markov head"
    own = 0 if shares else s["vocab"] * s["hidden"]
    return ParamCount(embedding=own, linear=linear, norm=norm, lm_head=own), note


def mtp_layers(config: dict) -> int:
    """How many MTP layers a target's checkpoint carries (num_nextn_predict_layers; 0 when none)."""
    text = config.get("text_config") or config
    return int(text.get("num_nextn_predict_layers") or text.get("mtp_num_hidden_layers") or 0)


def count_mtp_layers(target_config: dict) -> tuple[ParamCount, dict, str]:
    """What vLLM loads for method 'mtp' beside the target, as MiMo's MTP layers are built
    (vllm/model_executor/models/mimo_mtp.py): per layer, the target's decoder layer plus an input
    projection of 2*hidden -> hidden and three RMSNorms (token, hidden, final); the token embedding and
    the LM head are the target's (the proposer shares them). Returns (count, a config whose KV cache is
    those layers', a note)."""
    s, n = _shape(target_config), mtp_layers(target_config)
    count = ParamCount(linear=n * (_layer_linear(s) + 2 * s["hidden"] * s["hidden"]), norm=n * 5 * s["hidden"])
    text = target_config.get("text_config") or target_config
    return count, {**text, "num_hidden_layers": n}, f"{n} MTP layer(s) in the target's checkpoint; embedding and LM head shared"


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


