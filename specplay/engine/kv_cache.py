"""What vLLM reserved for an engine's KV cache, in bytes, as vLLM itself reports it: for an in-process
engine from its config after start (the blocks the engine core allocated, which the core sends back to the
frontend), for a `vllm serve` server from its `vllm:cache_config_info` metric (the same CacheConfig, as
labels). The memory chart shows this as "reserved" beside the plan's estimate ("planned").

The bytes a token takes are vLLM's full-attention page size over the attention layers (K and V, or MLA's one
latent, in the cache dtype): exact for the dense decoders the presets run (checked on the CPU engines against
the VLLM_CPU_KVCACHE_SPACE they were given, within one block); sliding-window or hybrid (Mamba) layers, which
vLLM pages otherwise, would make it approximate.
"""

from __future__ import annotations

from specplay.engine.prometheus import samples

CACHE_INFO_METRIC = "vllm:cache_config_info"


def _token_bytes(model_config, parallel_config, cache_dtype: str) -> int:
    """The KV bytes one token takes over a model's attention layers on this rank, as vLLM's attention specs
    size a page: K and V (MLA: one latent) × KV heads × head size × the cache dtype's bytes, per layer."""
    from vllm.utils.torch_utils import get_dtype_size, kv_cache_dtype_str_to_dtype

    layers = model_config.get_num_layers_by_block_type(parallel_config, "attention")
    per_layer = ((1 if model_config.use_mla else 2) * model_config.get_num_kv_heads(parallel_config)
                 * model_config.get_head_size())
    return layers * per_layer * get_dtype_size(kv_cache_dtype_str_to_dtype(cache_dtype, model_config))


def kv_cache_bytes(config) -> int | None:
    """What vLLM reserved for this engine's KV cache, in bytes: the blocks its core allocated at start
    (cache_config.num_gpu_blocks, as the core reported them back; on the CPU too) × block_size tokens × the
    bytes a token takes in every attention layer, the target's and a separate draft model's (both share the
    blocks). Read from the engine's own config after start, so it is vLLM's figure, not the plan's; None where
    the config doesn't say (before start, an unexpected shape)."""
    try:
        cache = config.cache_config
        if not cache.num_gpu_blocks:
            return None
        per_token = _token_bytes(config.model_config, config.parallel_config, cache.cache_dtype)
        spec = config.speculative_config
        draft = getattr(spec, "draft_model_config", None)
        if draft is not None and draft is not config.model_config:  # n-gram and suffix reuse the target's
            per_token += _token_bytes(draft, spec.draft_parallel_config or config.parallel_config, cache.cache_dtype)
        return int(cache.num_gpu_blocks) * int(cache.block_size) * per_token
    except Exception:  # a config this vLLM shapes otherwise: no figure rather than a failed start
        return None


def parse_cache_config_info(text: str) -> dict | None:
    """The labels of `vllm:cache_config_info` in a Prometheus text page (CacheConfig's fields as strings:
    num_gpu_blocks, block_size, cache_dtype, ...), or None where the page has none or is garbled."""
    try:
        return next((labels for name, labels, _ in samples(text, CACHE_INFO_METRIC)), None)
    except ValueError:
        return None


def served_kv_cache_bytes(text: str, bytes_per_token: int | None) -> int | None:
    """A server's reserved KV cache in bytes: its blocks × block_size (from cache_config_info) × the bytes a
    token takes, which a server doesn't expose (its models' shapes): None unless the operator's settings give
    it (RemoteSettings.kv_bytes_per_token)."""
    labels = parse_cache_config_info(text) or {}
    try:
        tokens = int(labels["num_gpu_blocks"]) * int(labels["block_size"])
    except (KeyError, ValueError):
        return None
    return tokens * bytes_per_token if tokens and bytes_per_token else None
