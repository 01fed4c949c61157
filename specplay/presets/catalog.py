"""Presets: the YAML files in specplay/presets/data/, loaded and validated, by name.

A preset names a target model and a vLLM `speculative_config` (today's syntax, passed through verbatim),
plus how to split memory between the two resident engines. The schema is in `schema` (and schema.json),
the rules across fields in `validation`, model references in `models`, per-method facts in `methods`,
engine settings and `vllm serve` lines in `engines`, whether it can run here in `availability`. The names
other packages import from here stay importable from here.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from specplay.core.paths import PRESETS_DIR
from specplay.presets.availability import Availability, availability, offline_models_needed  # noqa: F401
from specplay.presets.engines import (  # noqa: F401
    BASELINE_PORT, CPU_EAGER_ENV, CPU_ENV, SPECULATIVE_PORT, dtype_for, engine_settings, engines_get_own_gpus,
    serve_command, serve_commands, where_it_pays,
)
from specplay.presets.methods import METHODS  # noqa: F401
from specplay.presets.models import resolve_model  # noqa: F401
from specplay.presets.schema import Preset, PresetError  # noqa: F401
from specplay.presets.validation import validate

DEFAULT_PRESET = "smollm2-ngram"


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
