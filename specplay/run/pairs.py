"""An engine pair for a preset: the presets layer's settings handed to the engine layer, offline models built
first. Switching presets that share a target replaces only the speculative engine; after an engine died,
only that engine is started again."""

from __future__ import annotations

from specplay.core.events import BASELINE, SPECULATIVE
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
                    log=print, dead: tuple[str, ...] = ()) -> bool:
    """Load `preset` into a running pair by replacing only the engines that must change: those whose settings
    differ (presets sharing a target: the speculative one) and those in `dead` (an engine that died); the
    other stays loaded, half the wait. False, and nothing changed, if no engine could stay."""
    wanted = dict(zip((BASELINE, SPECULATIVE), engine_settings(preset, hardware)))
    replace = {role: settings for role, settings in wanted.items()
               if role in dead or settings != pair.engines[role].settings}
    if len(replace) == len(wanted):
        return False
    prepare(preset, log)
    pair.replace_engines(replace, tag=preset, progress=progress)
    return True
