"""Presets: YAML files in presets/, validated, turned into engine settings and `vllm serve` lines.

A preset names a target model and a vLLM `speculative_config` (today's syntax, passed through verbatim),
plus how to split memory between the two resident engines. Model references:
  offline:NAME  a model the playground builds offline into its cache (playground.offline_model)
  repo:PATH     a folder shipped in this repository (config-only models for load_format: dummy)
  anything else a Hugging Face hub id
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass
from pathlib import Path

import yaml

from specplay.core.events import BASELINE, SPECULATIVE
from specplay.core.hardware import Hardware, detect, split_cores
from specplay.presets.offline_model import OFFLINE_MODELS
from specplay.core.paths import PRESETS_DIR, PROJECT_ROOT

METHODS = {"draft_model", "eagle", "eagle3", "ngram"}
DEFAULT_PRESET = "smollm2-ngram"
BASELINE_PORT, SPECULATIVE_PORT = 8000, 8001
# Workarounds of the playground's for vLLM on CPU, not part of the lesson (left out of the `vllm serve`
# lines): AOT compile off, since compile caches only hit across starts without it (0.32: the AOT artifact
# fails to reload and every start recompiles for ~40 s); and a 1 s grace for an engine core's worker to
# exit: on the CPU it has nothing to release and always used the whole default 5 s, so every stop took 5-10 s.
CPU_ENV = {"VLLM_USE_AOT_COMPILE": "0", "VLLM_WORKER_SHUTDOWN_TIMEOUT_SECONDS": "1"}
# Set (to 1) by the test suite: CPU engines skip torch.compile (enforce_eager) and start in about half the
# time, with the same tokens (a test holds a compiled engine to that). The page itself runs them compiled.
CPU_EAGER_ENV = "PLAYGROUND_CPU_EAGER"


class PresetError(ValueError):
    """A preset is missing, malformed or unknown; the message names the file, field and expectation."""


@dataclass(frozen=True)
class Preset:
    name: str
    description: str
    guide_section: str
    notes: str
    device: str  # "any" (CPU or GPU) | "gpu"
    gpus: int
    target: dict  # model, dtype, max_model_len, tensor_parallel_size, load_format, quantization, enforce_eager
    speculative_config: dict
    memory: dict  # baseline/speculative_gpu_memory_utilization, cpu_kvcache_space_gib
    prompt_input: str  # "text" | "token_ids"
    default_max_tokens: int
    ignore_eos: bool
    source: Path
    pays_off: dict  # device ("cpu", "gpu") -> where this preset is expected to pay, in one sentence

    @property
    def method(self) -> str:
        return self.speculative_config["method"]

    @property
    def num_speculative_tokens(self) -> int:
        return int(self.speculative_config["num_speculative_tokens"])

    @property
    def draft_model(self) -> str | None:
        return self.speculative_config.get("model")

    def model_refs(self) -> list[str]:
        return [self.target["model"]] + ([self.draft_model] if self.draft_model else [])


# -- schema ------------------------------------------------------------------------------------------
_TOP = {
    "name": (str, True), "description": (str, True), "guide_section": (str, True), "notes": (str, False),
    "device": (str, True), "gpus": (int, False), "target": (dict, True), "speculative_config": (dict, True),
    "memory": (dict, True), "prompt_input": (str, False), "default_max_tokens": (int, False),
    "ignore_eos": (bool, False), "pays_off": (dict, True),
}
_TARGET = {
    "model": (str, True), "dtype": (str, True), "max_model_len": (int, True),
    "tensor_parallel_size": (int, False), "load_format": (str, False), "quantization": (str, False),
    "enforce_eager": (bool, False), "gpu_dtype": (str, False),
}
_MEMORY = {
    "baseline_gpu_memory_utilization": (float, True), "speculative_gpu_memory_utilization": (float, True),
    "cpu_kvcache_space_gib": (int, True),
}
_DTYPES = {"auto", "float32", "float16", "bfloat16"}
_PAYS_OFF = {"cpu": (str, False), "gpu": (str, True)}


def _fail(source: Path, field: str, expected: str, got=None) -> None:
    got_text = "" if got is None else f", got {got!r}"
    raise PresetError(f"{source.name}: field '{field}': expected {expected}{got_text}")


def _check_fields(source: Path, data: dict, schema: dict, prefix: str = "") -> None:
    for key in data:
        if key not in schema:
            _fail(source, prefix + key, f"one of the known fields ({', '.join(schema)})", "unknown field")
    for key, (kind, required) in schema.items():
        if key not in data or data[key] is None:
            if required:
                _fail(source, prefix + key, f"a {kind.__name__} (required)", "nothing")
            continue
        value = data[key]
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) if kind is float else (
            isinstance(value, kind) and not (kind is int and isinstance(value, bool)))
        if not ok:
            _fail(source, prefix + key, f"a {kind.__name__}", value)


def validate(data, source: Path) -> Preset:
    if not isinstance(data, dict):
        raise PresetError(f"{source.name}: expected a YAML mapping of preset fields, got {type(data).__name__}")
    _check_fields(source, data, _TOP)
    _check_fields(source, data["target"], _TARGET, "target.")
    _check_fields(source, data["memory"], _MEMORY, "memory.")
    _check_fields(source, data["pays_off"], _PAYS_OFF, "pays_off.")
    if data["device"] == "any" and not data["pays_off"].get("cpu"):
        _fail(source, "pays_off.cpu", "a sentence for the CPU (this preset runs there)", "nothing")
    if data["name"] != source.stem:
        _fail(source, "name", f"the file name without .yaml ({source.stem!r})", data["name"])
    if data["device"] not in ("any", "gpu"):
        _fail(source, "device", "'any' (CPU or GPU) or 'gpu'", data["device"])
    target, spec, memory = data["target"], data["speculative_config"], data["memory"]
    for key in ("dtype", "gpu_dtype"):
        if key in target and target[key] not in _DTYPES:
            _fail(source, f"target.{key}", f"one of {sorted(_DTYPES)}", target[key])
    if not 64 <= target["max_model_len"] <= 131072:
        _fail(source, "target.max_model_len", "an integer from 64 to 131072", target["max_model_len"])
    tp = target.get("tensor_parallel_size", 1)
    if tp < 1:
        _fail(source, "target.tensor_parallel_size", "1 or more", tp)
    if target.get("load_format", "auto") not in ("auto", "dummy", "safetensors"):
        _fail(source, "target.load_format", "'auto', 'safetensors' or 'dummy'", target.get("load_format"))
    _check_model_ref(source, "target.model", target["model"])
    _check_speculative_config(source, spec, tp)
    gpus = data.get("gpus", tp)
    if gpus < tp:
        _fail(source, "gpus", f"at least tensor_parallel_size ({tp})", gpus)
    for role in (BASELINE, SPECULATIVE):
        util = memory[f"{role}_gpu_memory_utilization"]
        if not 0.05 <= util <= 0.9:
            _fail(source, f"memory.{role}_gpu_memory_utilization", "a fraction of the GPU from 0.05 to 0.9", util)
    total = memory["baseline_gpu_memory_utilization"] + memory["speculative_gpu_memory_utilization"]
    if gpus < 2 * tp and total > 0.92:
        _fail(source, "memory", "GPU fractions that add up to 0.92 or less (both engines share the GPUs; "
              "or set gpus to twice tensor_parallel_size to give each engine its own)", round(total, 3))
    if not 1 <= memory["cpu_kvcache_space_gib"] <= 64:
        _fail(source, "memory.cpu_kvcache_space_gib", "1 to 64 GiB", memory["cpu_kvcache_space_gib"])
    prompt_input = data.get("prompt_input", "text")
    if prompt_input not in ("text", "token_ids"):
        _fail(source, "prompt_input", "'text' or 'token_ids'", prompt_input)
    if (target.get("load_format") == "dummy") != (prompt_input == "token_ids"):
        _fail(source, "prompt_input", "'token_ids' exactly when target.load_format is 'dummy' (no tokenizer)",
              prompt_input)
    max_tokens = data.get("default_max_tokens", 128)
    if not 1 <= max_tokens <= target["max_model_len"] // 2:
        _fail(source, "default_max_tokens", f"1 to half of max_model_len ({target['max_model_len'] // 2})", max_tokens)
    return Preset(
        name=data["name"], description=data["description"].strip(), guide_section=data["guide_section"],
        notes=(data.get("notes") or "").strip(), device=data["device"], gpus=gpus,
        target={"tensor_parallel_size": 1, "load_format": "auto", "enforce_eager": False, **target},
        speculative_config=dict(spec), memory=dict(memory), prompt_input=prompt_input,
        default_max_tokens=max_tokens, ignore_eos=bool(data.get("ignore_eos", False)), source=source,
        pays_off={k: v.strip() for k, v in data["pays_off"].items()},
    )


def _check_model_ref(source: Path, field: str, ref: str) -> None:
    if ref.startswith("offline:"):
        if ref[len("offline:"):] not in OFFLINE_MODELS:
            _fail(source, field, f"an offline model ({', '.join('offline:' + n for n in OFFLINE_MODELS)})", ref)
    elif ref.startswith("repo:"):
        folder = (PROJECT_ROOT / ref[len("repo:"):]).resolve()
        if not folder.is_relative_to(PROJECT_ROOT) or not (folder / "config.json").is_file():
            _fail(source, field, "a folder with a config.json inside this repository", ref)
    elif ref.count("/") != 1 or ref.startswith(("/", ".")) or " " in ref:
        _fail(source, field, "a hub id 'org/name', 'offline:NAME' or 'repo:PATH'", ref)


def _check_speculative_config(source: Path, spec: dict, tp: int) -> None:
    method = spec.get("method")
    if method not in METHODS:
        _fail(source, "speculative_config.method", f"one of {sorted(METHODS)}", method)
    k = spec.get("num_speculative_tokens")
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= 16:
        _fail(source, "speculative_config.num_speculative_tokens", "an integer from 1 to 16", k)
    if method == "ngram":
        if "model" in spec:
            _fail(source, "speculative_config.model", "no model for method 'ngram' (it looks up the prompt)", spec["model"])
        lo, hi = spec.get("prompt_lookup_min"), spec.get("prompt_lookup_max")
        if not (isinstance(lo, int) and isinstance(hi, int) and 1 <= lo <= hi):
            _fail(source, "speculative_config.prompt_lookup_min/max", "integers with 1 <= min <= max", (lo, hi))
    else:
        if not isinstance(spec.get("model"), str):
            _fail(source, "speculative_config.model", f"the draft model for method '{method}'", spec.get("model"))
        _check_model_ref(source, "speculative_config.model", spec["model"])
    draft_tp = spec.get("draft_tensor_parallel_size", 1 if method != "ngram" else None)
    if draft_tp is not None and draft_tp not in (1, tp):
        _fail(source, "speculative_config.draft_tensor_parallel_size", f"1 or the target's tensor_parallel_size ({tp})", draft_tp)
    if spec.get("rejection_sample_method", "standard") == "synthetic":
        rates = spec.get("synthetic_acceptance_rates")
        if not (isinstance(rates, list) and len(rates) == k and all(0 <= r <= 1 for r in rates)
                and all(a >= b for a, b in zip(rates, rates[1:]))):
            _fail(source, "speculative_config.synthetic_acceptance_rates",
                  f"{k} non-increasing probabilities, one per draft position", rates)


# -- loading -----------------------------------------------------------------------------------------
def load_file(path: Path) -> Preset:
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise PresetError(f"{path.name}: not valid YAML ({exc})") from exc
    return validate(data, path)


def load_presets(directory: Path = PRESETS_DIR) -> dict[str, Preset]:
    presets = {}
    for path in sorted(directory.glob("*.yaml")):
        preset = load_file(path)
        presets[preset.name] = preset
    if not presets:
        raise PresetError(f"no presets (*.yaml) in {directory}")
    return presets


def get_preset(name: str, presets: dict[str, Preset] | None = None) -> Preset:
    presets = presets if presets is not None else load_presets()
    if name not in presets:
        raise PresetError(f"unknown preset {name!r}; known presets: {', '.join(sorted(presets))}")
    return presets[name]


# -- turning a preset into engines -----------------------------------------------------------------
def resolve_model(ref: str) -> str:
    if ref.startswith("offline:"):
        return str(OFFLINE_MODELS[ref[len("offline:"):]].path)
    if ref.startswith("repo:"):
        return str((PROJECT_ROOT / ref[len("repo:"):]).resolve())
    return ref


def offline_models_needed(preset: Preset) -> list[str]:
    return [ref[len("offline:"):] for ref in preset.model_refs() if ref.startswith("offline:")]


def dtype_for(preset: Preset, device: str) -> str:
    """The target's dtype on this device: `gpu_dtype` on a GPU when the preset sets one (bfloat16 for the
    SmolLM2 presets: float32 doubles a small model's step cost on a GPU), else `dtype`."""
    return (preset.target.get("gpu_dtype") or preset.target["dtype"]) if device == "gpu" else preset.target["dtype"]


def where_it_pays(preset: Preset, device: str) -> str | None:
    """One sentence: where this preset is expected to pay, on this kind of device."""
    return preset.pays_off.get(device)


def _engine_args(preset: Preset, role: str, hardware: Hardware) -> dict:
    t = preset.target
    args = {"model": resolve_model(t["model"]), "dtype": dtype_for(preset, hardware.device),
            "max_model_len": t["max_model_len"]}
    if t["tensor_parallel_size"] > 1:
        args["tensor_parallel_size"] = t["tensor_parallel_size"]
    args["seed"] = 0
    if t["load_format"] != "auto":
        args["load_format"] = t["load_format"]
    if t.get("quantization"):
        args["quantization"] = t["quantization"]
    if t["enforce_eager"] or (hardware.device == "cpu" and os.environ.get(CPU_EAGER_ENV) == "1"):
        args["enforce_eager"] = True
    if preset.prompt_input == "token_ids":
        args["skip_tokenizer_init"] = True
    if hardware.device == "gpu":
        args["gpu_memory_utilization"] = preset.memory[f"{role}_gpu_memory_utilization"]
    if role == SPECULATIVE:
        spec = dict(preset.speculative_config)
        if "model" in spec:
            spec["model"] = resolve_model(spec["model"])
        args["speculative_config"] = spec
    return args


def engines_get_own_gpus(preset: Preset) -> bool:
    return preset.gpus >= 2 * preset.target["tensor_parallel_size"]


def _engine_env(preset: Preset, role: str, hardware: Hardware) -> dict:
    if hardware.device == "gpu":
        if not engines_get_own_gpus(preset):
            return {}
        # The engine-core process is spawned with this environment: each engine sees its own GPUs.
        tp = preset.target["tensor_parallel_size"]
        first = 0 if role == BASELINE else tp
        return {"CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in range(first, first + tp))}
    binds = dict(zip((BASELINE, SPECULATIVE), split_cores(hardware.cpu_cores)))
    return {**CPU_ENV, "VLLM_CPU_KVCACHE_SPACE": str(preset.memory["cpu_kvcache_space_gib"]),
            "VLLM_CPU_OMP_THREADS_BIND": binds[role]}


def engine_settings(preset: Preset, hardware: Hardware | None = None):
    """(baseline, speculative) EngineSettings for this machine."""
    from specplay.core.events import EngineSettings

    hardware = hardware or detect()
    return tuple(EngineSettings(role, _engine_args(preset, role, hardware), _engine_env(preset, role, hardware))
                 for role in (BASELINE, SPECULATIVE))


def serve_command(preset: Preset, role: str, hardware: Hardware | None = None) -> str:
    """The `vllm serve` line this engine corresponds to, in today's syntax (flags as vLLM's CLI spells them)."""
    hardware = hardware or detect()
    if preset.device == "gpu" and not hardware.gpu_count:  # show the line for the machine it is meant for
        hardware = Hardware(preset.gpus, None, hardware.cpu_cores)
    args = _engine_args(preset, role, hardware)
    env = _engine_env(preset, role, hardware)
    for key in CPU_ENV:  # workarounds of the playground's, not part of the lesson
        env.pop(key, None)
    parts = [f"{k}={shlex.quote(v)}" for k, v in env.items()] + ["vllm", "serve", shlex.quote(args.pop("model"))]
    for key, value in args.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            parts.append(flag)
        elif key == "speculative_config":
            parts += [flag, shlex.quote(json.dumps(value, separators=(", ", ": ")))]
        else:
            parts += [flag, shlex.quote(str(value))]
    parts += ["--port", str(BASELINE_PORT if role == BASELINE else SPECULATIVE_PORT)]
    return " ".join(parts)


def serve_commands(preset: Preset, hardware: Hardware | None = None) -> dict[str, str]:
    return {role: serve_command(preset, role, hardware) for role in (BASELINE, SPECULATIVE)}


# -- can it run here? ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Availability:
    runnable: bool
    reason: str
    needs_hub: bool = False  # runnable only if the Hugging Face hub can be reached from here


def _hub_cached(repo_id: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache

        return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)
    except Exception:
        return False


def availability(preset: Preset, hardware: Hardware | None = None) -> Availability:
    hardware = hardware or detect()
    if preset.device == "gpu" and hardware.gpu_count == 0:
        return Availability(False, f"needs {preset.gpus} GPU(s); none here")
    if hardware.gpu_count and hardware.gpu_count < preset.gpus:
        return Availability(False, f"needs {preset.gpus} GPUs; {hardware.gpu_count} here")
    hub = [ref for ref in preset.model_refs() if ":" not in ref]
    missing_hub = [ref for ref in hub if not _hub_cached(ref)]
    if missing_hub:
        return Availability(True, "needs the hub: " + ", ".join(missing_hub), needs_hub=True)
    offline = offline_models_needed(preset)
    if offline:
        ready = all(OFFLINE_MODELS[name].is_ready() for name in offline)
        return Availability(True, "offline model present" if ready else "offline model, prepared on first use")
    if preset.target["load_format"] == "dummy":
        return Availability(True, "dummy weights (config shipped in the repo)")
    return Availability(True, "models in the local hub cache")
