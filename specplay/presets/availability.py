"""Can a preset run here, and if not, exactly why in one sentence (what the installed vLLM lacks, GPUs, a
package vLLM needs, the hub)."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from specplay.core.hardware import Hardware, detect
from specplay.presets.capabilities import needed_package
from specplay.presets.hub import hub_reachable
from specplay.presets.models import cached_hub_config
from specplay.presets.offline_model import OFFLINE_MODELS
from specplay.presets.schema import Preset


@dataclass(frozen=True)
class Availability:
    runnable: bool
    reason: str
    needs_hub: bool = False  # downloads from the Hugging Face hub first (runnable only where it can be reached)


def offline_models_needed(preset: Preset) -> list[str]:
    return [ref[len("offline:"):] for ref in preset.model_refs() if ref.startswith("offline:")]


def _hub_cached(repo_id: str) -> bool:
    return cached_hub_config(repo_id) is not None


def _package_missing(preset: Preset) -> str | None:
    needed = needed_package(preset.speculative_config)
    if needed is None:
        return None
    module, why = needed
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    return None if found else why


def availability(preset: Preset, hardware: Hardware | None = None) -> Availability:
    hardware = hardware or detect()
    if preset.vllm_problem:
        return Availability(False, preset.vllm_problem)
    if preset.device == "gpu" and hardware.gpu_count == 0:
        if preset.facts.gpu_only:
            return Availability(False, f"method {preset.method} runs on a GPU only; none here")
        return Availability(False, f"needs {preset.gpus} GPU(s); none here")
    if hardware.gpu_count and hardware.gpu_count < preset.gpus:
        return Availability(False, f"needs {preset.gpus} GPUs; {hardware.gpu_count} here")
    missing_package = _package_missing(preset)
    if missing_package:
        return Availability(False, missing_package)
    hub = [ref for ref in preset.model_refs() if ":" not in ref]
    missing_hub = [ref for ref in hub if not _hub_cached(ref)]
    if missing_hub and not hub_reachable():
        return Availability(False, f"needs the hub for {', '.join(missing_hub)} (not in the local Hugging Face "
                            "cache), and the hub can't be reached from here", needs_hub=True)
    if missing_hub:
        return Availability(True, "needs the hub: " + ", ".join(missing_hub), needs_hub=True)
    offline = offline_models_needed(preset)
    if offline:
        ready = all(OFFLINE_MODELS[name].is_ready() for name in offline)
        return Availability(True, "offline model present" if ready else "offline model, prepared on first use")
    if preset.target.load_format == "dummy":
        return Availability(True, "dummy weights (config shipped in the package)")
    return Availability(True, "models in the local hub cache")
