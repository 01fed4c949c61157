"""An engine pair for a preset: the presets layer's settings handed to the engine layer, offline models built
first. Switching presets that share a target replaces only the speculative engine."""

from __future__ import annotations

from specplay.core.events import BASELINE
from specplay.core.paths import configure_cache_env
from specplay.engine.pair import EnginePair, ProgressCallback
from specplay.presets.catalog import engine_settings, offline_models_needed
from specplay.presets.offline_model import ensure_offline_models


def prepare(preset, log=print) -> None:
    """Caches pointed into the project, offline models built if missing."""
    configure_cache_env()
    needed = offline_models_needed(preset)
    if needed:
        ensure_offline_models(needed, log=log)


def open_pair(preset, hardware=None, warmup: bool = True, log=print) -> EnginePair:
    """An unstarted pair for a preset. Call .start() (blocking, minutes on a CPU) and .shutdown() when done."""
    prepare(preset, log)
    baseline, speculative = engine_settings(preset, hardware)
    return EnginePair(baseline, speculative, warmup=warmup, tag=preset)


def switch_in_place(pair: EnginePair, preset, hardware=None, progress: ProgressCallback | None = None,
                    log=print) -> bool:
    """Load `preset` into a running pair by replacing only its speculative engine, when its baseline would
    be the very same engine (presets sharing a target): half the wait. False, and nothing changed, if not."""
    baseline, speculative = engine_settings(preset, hardware)
    if baseline != pair.engines[BASELINE].settings:
        return False
    prepare(preset, log)
    pair.swap_speculative(speculative, tag=preset, progress=progress)
    return True
