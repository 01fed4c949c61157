"""Presets: the YAML files in specplay/presets/data/, loaded and validated, by name.

A preset names a target model and a vLLM `speculative_config` (today's syntax, passed through verbatim),
plus how to split memory between the two resident engines. The schema is in `schema` (and schema.json),
the rules across fields in `validation`, model references in `models`, per-method facts in `methods`,
engine settings and `vllm serve` lines in `engines`, whether it can run here in `availability`. The names
other packages import from here stay importable from here.
"""

from __future__ import annotations

from pathlib import Path

from specplay.core.paths import PRESETS_DIR
from specplay.core.reading import PRESET_MAX_BYTES, UnreadableInput, load_yaml
from specplay.presets.availability import Availability, availability, offline_models_needed  # noqa: F401
from specplay.presets.engines import (  # noqa: F401
    BASELINE_PORT, CPU_EAGER_ENV, CPU_ENV, SPECULATIVE_PORT, dtype_for, engine_settings, engines_get_own_gpus,
    serve_command, serve_commands, where_it_pays,
)
from specplay.presets.capabilities import INSTALLED
from specplay.presets.models import resolve_model  # noqa: F401
from specplay.presets.schema import Preset, PresetError  # noqa: F401
from specplay.presets.validation import validate

DEFAULT_PRESET = "smollm2-ngram"
# On a GPU the same lookup by ngram_gpu, where the installed vLLM has it: it gets async scheduling, which
# plain ngram doesn't on vLLM 0.32 (2.57x against 1.89x at 8B scale on an H200, docs/benchmarks.md).
GPU_DEFAULT_PRESET = "smollm2-ngram-gpu"
DEFAULTS_SAID = f"{DEFAULT_PRESET}; on a GPU {GPU_DEFAULT_PRESET} where the installed vLLM runs it"  # --help's


def default_preset_name(hardware=None, presets: dict | None = None) -> str:
    """The preset a page or command loads when none is named: smollm2-ngram, on a GPU its ngram_gpu twin
    when this vLLM can run it."""
    from specplay.core.hardware import detect
    from specplay.presets.availability import availability as can_run

    hardware = hardware or detect()
    if hardware.device == "gpu":
        presets = presets if presets is not None else load_presets()
        gpu = presets.get(GPU_DEFAULT_PRESET)
        if gpu is not None and can_run(gpu, hardware).runnable:
            return GPU_DEFAULT_PRESET
    return DEFAULT_PRESET


def load_file(path: Path, facts=INSTALLED) -> Preset:
    try:
        data = load_yaml(path, PRESET_MAX_BYTES, path.name)
    except UnreadableInput as exc:
        raise PresetError(str(exc)) from None
    return validate(data, path, facts)


def load_user_file(path) -> Preset:
    """A user's preset file anywhere (--preset-file), validated as the shipped ones are; every way it can't be
    read is a PresetError of one line, naming the file."""
    path = Path(path).expanduser()
    try:
        data = load_yaml(path, PRESET_MAX_BYTES, f"--preset-file: {path}")
    except UnreadableInput as exc:
        raise PresetError(str(exc)) from None
    if not isinstance(data, dict):
        raise PresetError(f"--preset-file: {path}: expected a preset, a YAML mapping (see the shipped ones in "
                          f"{PRESETS_DIR}), got {type(data).__name__}")
    try:
        return validate(data, path.resolve())
    except PresetError as exc:  # one line: the file's own validation message, under the option's name
        raise type(exc)(f"--preset-file: {' '.join(str(exc).split())}") from None


def load_presets(directory: Path = PRESETS_DIR, facts=INSTALLED) -> dict[str, Preset]:
    """The catalog, judged against the installed vLLM (or `facts`: another vLLM's, engine.vllm_facts)."""
    presets = {}
    for path in sorted(directory.glob("*.yaml")):
        preset = load_file(path, facts)
        presets[preset.name] = preset
    if not presets:
        raise PresetError(f"no presets (*.yaml) in {directory}")
    return presets


def get_preset(name: str, presets: dict[str, Preset] | None = None) -> Preset:
    presets = presets if presets is not None else load_presets()
    if name not in presets:
        raise PresetError(f"unknown preset {name!r}; known presets: {', '.join(sorted(presets))}")
    return presets[name]
