"""A preset as the two engines' settings (engine arguments + environment) and as `vllm serve` lines."""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass

from specplay.core.events import BASELINE, SPECULATIVE, EngineSettings
from specplay.core.hardware import Hardware, core_layout, detect, split_cores
from specplay.presets.capabilities import has_v1_runner
from specplay.presets.engine_args import TARGET_ONLY, engine_extras
from specplay.presets.models import OFFLINE, resolve_model
from specplay.presets.schema import Preset

BASELINE_PORT, SPECULATIVE_PORT = 8000, 8001
# Workarounds of the playground's for vLLM on CPU, not part of the lesson (left out of the `vllm serve`
# lines): AOT compile off, since compile caches only hit across starts without it (0.32: the AOT artifact
# fails to reload and every start recompiles for ~40 s); and a 1 s grace for an engine core's worker to
# exit: on the CPU it has nothing to release and always used the whole default 5 s, so every stop took 5-10 s.
CPU_ENV = {"VLLM_USE_AOT_COMPILE": "0", "VLLM_WORKER_SHUTDOWN_TIMEOUT_SECONDS": "1"}
# Set (to 1) by the test suite: CPU engines skip torch.compile (enforce_eager) and start in about half the
# time, with the same tokens (a test holds a compiled engine to that). The page itself runs them compiled.
CPU_EAGER_ENV = "PLAYGROUND_CPU_EAGER"
# With it, torch.compile is off in the engines' processes too: under enforce_eager vLLM still compiles a few
# sampling helpers, a C++ build in each engine's first steps (4 s of a pair's 44 s start on 2 cores,
# 2026-12-07, the same tokens). Like CPU_ENV, the playground's own: left out of the serve lines.
CPU_EAGER_EXTRA_ENV = {"TORCH_COMPILE_DISABLE": "1"}
NOT_SERVED_ENV = (*CPU_ENV, *CPU_EAGER_EXTRA_ENV)
# A preset's model_runner, as vLLM reads it (lazily, from the environment, when it builds the config).
MODEL_RUNNER_ENV = "VLLM_USE_V2_MODEL_RUNNER"
MODEL_RUNNER_VALUES = {"v1": "0", "v2": "1"}
# What the serve lines name for the models the playground builds offline: the hub id they come from (the
# converted GGUF is the same model), so a line runs on any machine; None: derived here, no hub id.
SERVE_MODEL_IDS = {"offline:smollm2-135m-instruct": "HuggingFaceTB/SmolLM2-135M-Instruct",
                   "offline:smollm2-135m-instruct-skip12-17": None, "offline:bigram-draft-1k": None}
DEFAULT_GPU_MEMORY_UTILIZATION = 0.9  # vLLM's default for a server alone on its GPU


def dtype_for(preset: Preset, device: str) -> str:
    """The target's dtype on this device: `gpu_dtype` on a GPU when the preset sets one (bfloat16 for the
    SmolLM2 presets: float32 doubles a small model's step cost on a GPU), else `dtype`."""
    return (preset.target.gpu_dtype or preset.target.dtype) if device == "gpu" else preset.target.dtype


def where_it_pays(preset: Preset, device: str) -> str | None:
    """One sentence: where this preset is expected to pay, on this kind of device."""
    return preset.pays_off.on(device)


def engines_get_own_gpus(preset: Preset) -> bool:
    return preset.gpus >= 2 * preset.target.tensor_parallel_size


def _engine_args(preset: Preset, role: str, hardware: Hardware) -> dict:
    t = preset.target
    args = {"model": resolve_model(t.model), "dtype": dtype_for(preset, hardware.device),
            "max_model_len": t.max_model_len}
    if t.tensor_parallel_size > 1:
        args["tensor_parallel_size"] = t.tensor_parallel_size
    args["seed"] = 0
    if t.load_format != "auto":
        args["load_format"] = t.load_format
    if t.quantization:
        args["quantization"] = t.quantization
    if t.enforce_eager or _cpu_eager(hardware):
        args["enforce_eager"] = True
    if preset.prompt_input == "token_ids":
        args["skip_tokenizer_init"] = True
    if hardware.device == "gpu":
        args["gpu_memory_utilization"] = preset.memory.gpu_share(role)
    args.update(engine_extras(t))  # the preset's other engine arguments, verbatim (checked when it loaded)
    if role == SPECULATIVE:
        args["speculative_config"] = _vllm_keys(preset, resolve_model)
    return args


def _cpu_eager(hardware: Hardware) -> bool:
    """The suite's shortcut (CPU_EAGER_ENV) on a CPU."""
    return hardware.device == "cpu" and os.environ.get(CPU_EAGER_ENV) == "1"


def _vllm_keys(preset: Preset, name_model) -> dict:
    """The speculative_config as vLLM gets it: the preset's keys verbatim, the draft named by `name_model`."""
    spec = preset.speculative_config.vllm
    if preset.speculative_config.model is not None:
        spec["model"] = name_model(preset.speculative_config.model)
    return spec


def _engine_env(preset: Preset, role: str, hardware: Hardware) -> dict:
    env = {}
    # Only where vLLM still chooses between runners: 0.34 has V2 alone and refuses the variable's "0" (and
    # warns that "1" is redundant).
    if role == SPECULATIVE and preset.model_runner in MODEL_RUNNER_VALUES and has_v1_runner() is not False:
        env[MODEL_RUNNER_ENV] = MODEL_RUNNER_VALUES[preset.model_runner]
    if hardware.device == "gpu":
        if not engines_get_own_gpus(preset):
            return env
        # The engine-core process is spawned with this environment: each engine sees its own GPUs.
        tp = preset.target.tensor_parallel_size
        first = 0 if role == BASELINE else tp
        return {"CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in range(first, first + tp)), **env}
    bind = dict(zip((BASELINE, SPECULATIVE), split_cores(hardware.cpu_cores)))[role]
    if bind is not None:  # None (core layout "off"): vLLM's own binding, or the operator's
        env = {"VLLM_CPU_OMP_THREADS_BIND": bind, **env}
    extra = CPU_EAGER_EXTRA_ENV if _cpu_eager(hardware) else {}
    return {**CPU_ENV, **extra, "VLLM_CPU_KVCACHE_SPACE": str(preset.memory.cpu_kvcache_space_gib), **env}


def engine_settings(preset: Preset, hardware: Hardware | None = None) -> tuple[EngineSettings, EngineSettings]:
    """(baseline, speculative) EngineSettings for this machine."""
    hardware = hardware or detect()
    host = core_layout(hardware.cpu_cores).host if hardware.device == "cpu" else None
    return tuple(EngineSettings(role, _engine_args(preset, role, hardware), _engine_env(preset, role, hardware),
                                host)
                 for role in (BASELINE, SPECULATIVE))


def draft_engine_settings(preset: Preset, hardware: Hardware | None = None) -> EngineSettings | None:
    """The preset's draft model alone, as a plain engine on the baseline's place (same dtype, length, cores):
    the stepper's drafts for a draft-model preset come from its greedy continuations. None where the preset
    has no separate draft checkpoint that drafts one token a pass (EAGLE heads, MTP, PARD, n-gram...)."""
    spec = preset.speculative_config
    if preset.facts.draft != "model" or not spec.model or spec.parallel_drafting:
        return None
    hardware = hardware or detect()
    baseline = engine_settings(preset, hardware)[0]
    args = {key: value for key, value in baseline.engine_args.items() if key not in TARGET_ONLY}
    args["model"] = resolve_model(spec.model)
    return EngineSettings("draft", args, baseline.env, baseline.host_cores)


def _serve_hardware(preset: Preset, hardware: Hardware | None) -> Hardware:
    hardware = hardware or detect()
    if preset.device == "gpu" and not hardware.gpu_count:  # show the line for the machine it is meant for
        hardware = Hardware(preset.gpus, None, hardware.cpu_cores)
    return hardware


def serve_model(ref: str) -> str:
    """The model as a serve line names it: the hub id of an offline model where it has one, else what vLLM
    gets here (a hub id, or a local folder)."""
    if ref.startswith(OFFLINE) and SERVE_MODEL_IDS.get(ref):
        return SERVE_MODEL_IDS[ref]
    return resolve_model(ref)


def _per_request_flag(per_request: bool | None) -> bool:
    if per_request is None:
        from specplay.engine.probes import per_request_metrics_supported as server_supports_per_request_metrics

        return server_supports_per_request_metrics()
    return per_request


@dataclass(frozen=True)
class ServeLine:
    """A `vllm serve` line in its parts: the environment it needs in front, the model, the engine arguments
    (`speculative_config` a dict, as vLLM takes it) and the port. Read by its parts, never parsed back."""

    env: tuple[tuple[str, str], ...]
    model: str
    args: dict
    port: int

    @property
    def argv(self) -> list[str]:
        """The command from `vllm` on, one argument each (without the environment)."""
        return ["vllm", "serve", self.model, *cli_flags(self.args), "--port", str(self.port)]

    def as_text(self) -> str:
        """The line a shell takes: the environment in front, every part quoted."""
        return " ".join([f"{k}={shlex.quote(v)}" for k, v in self.env] + [shlex.quote(a) for a in self.argv])


def serve_line(preset: Preset, role: str, hardware: Hardware | None = None,
               per_request: bool | None = None) -> ServeLine:
    """The `vllm serve` line this engine corresponds to, in today's syntax (flags as vLLM's CLI spells them),
    with the environment it needs (e.g. VLLM_USE_V2_MODEL_RUNNER=0). Offline models are named by their hub
    id (serve_model); the speculative line asks for per-request acceptance where the installed vLLM has
    `--per-request-spec-decode-metrics` (`per_request`: None asks the installed vLLM)."""
    hardware = _serve_hardware(preset, hardware)
    args = _engine_args(preset, role, hardware)
    env = _engine_env(preset, role, hardware)
    for key in NOT_SERVED_ENV:  # the playground's workarounds and shortcut, not part of the lesson
        env.pop(key, None)
    args.pop("model")
    if role == SPECULATIVE:
        args["speculative_config"] = _vllm_keys(preset, serve_model)
        if _per_request_flag(per_request):
            from specplay.engine.probes import SERVER_PER_REQUEST_LEVEL

            args["per_request_spec_decode_metrics"] = SERVER_PER_REQUEST_LEVEL
    return ServeLine(tuple(env.items()), serve_model(preset.target.model), args,
                     BASELINE_PORT if role == BASELINE else SPECULATIVE_PORT)


def serve_command(preset: Preset, role: str, hardware: Hardware | None = None,
                  per_request: bool | None = None) -> str:
    """The serve line as text (serve_line)."""
    return serve_line(preset, role, hardware, per_request).as_text()


def cli_flags(engine_args: dict) -> list[str]:
    """Engine arguments as vLLM's CLI spells them (`--max-model-len 2048`, a bare flag for True, `--no-...`
    for False: vLLM's boolean flags are BooleanOptionalAction, and a preset's `enable_prefix_caching: false`
    must reach the server; JSON for a config, a list's items one argument each): the serve lines and the
    servers `launch` starts."""
    flags = []
    for key, value in engine_args.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            flags.append(flag)
        elif value is False:
            flags.append("--no-" + key.replace("_", "-"))
        elif isinstance(value, list):
            flags += [flag, *map(str, value)]
        elif value is not None:  # (0 is a value: the seed)
            flags += [flag, json.dumps(value) if isinstance(value, dict) else str(value)]
    return flags


def serve_notes(preset: Preset, role: str, hardware: Hardware | None = None) -> list[str]:
    """What a reader of the serve line should know, one sentence each (shown as `# ...` comment lines)."""
    hardware = _serve_hardware(preset, hardware)
    notes = [f"the installed vLLM can't run this line: {preset.vllm_problem}"] if preset.vllm_problem else []
    draft = preset.speculative_config.model
    refs = [preset.target.model] + ([draft] if role == SPECULATIVE and draft is not None else [])
    for ref in dict.fromkeys(refs):
        if ref.startswith(OFFLINE) and not SERVE_MODEL_IDS.get(ref):
            notes.append(f"{ref[len(OFFLINE):]} has no hub id: `specplay prepare` derives it on this machine "
                         f"(the path above is this machine's)")
    if hardware.device == "gpu" and not engines_get_own_gpus(preset):
        util = preset.memory.gpu_share(role)
        notes.append(f"--gpu-memory-utilization {util} is this engine's share of a GPU both engines use; a "
                     f"server alone on its GPU would use vLLM's default {DEFAULT_GPU_MEMORY_UTILIZATION}")
    return notes


def serve_text(preset: Preset, role: str, hardware: Hardware | None = None,
               per_request: bool | None = None) -> str:
    """The serve line with its notes above it as `# ` comment lines: what the page and `serve-cmd` show."""
    notes = [f"# {note}" for note in serve_notes(preset, role, hardware)]
    return "\n".join(notes + [serve_command(preset, role, hardware, per_request)])


def serve_commands(preset: Preset, hardware: Hardware | None = None,
                   per_request: bool | None = None) -> dict[str, str]:
    return {role: serve_command(preset, role, hardware, per_request) for role in (BASELINE, SPECULATIVE)}


def serve_texts(preset: Preset, hardware: Hardware | None = None,
                per_request: bool | None = None) -> dict[str, str]:
    return {role: serve_text(preset, role, hardware, per_request) for role in (BASELINE, SPECULATIVE)}
