"""Model references in presets, and where each one lives:
  offline:NAME  a model the playground builds offline into its cache (presets.offline_model)
  bundled:NAME  a config-only folder shipped in the package (specplay/presets/data/models/NAME), for
                load_format: dummy
  repo:PATH     a folder with a config.json in a source checkout, relative to the project root (for users'
                own presets)
  path:PATH     a folder on this machine (an ad-hoc pair's local folder; a user's own --preset-file)
  anything else a Hugging Face hub id
"""

from __future__ import annotations

import re
from pathlib import Path

from specplay.core.paths import BUNDLED_MODELS_DIR, PROJECT_ROOT
from specplay.core.reading import CONFIG_MAX_BYTES, UnreadableInput, load_json
from specplay.presets.offline_model import OFFLINE_MODELS

OFFLINE, BUNDLED, REPO, LOCAL = "offline:", "bundled:", "repo:", "path:"
# The hub's own rule for a repo id (huggingface_hub validate_repo_id): org/name of letters, digits, - _ . ;
# no "..", no part ending in "." (so `a/..` never becomes a cache path outside the cache)
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95}")


def ref_problem(ref: str) -> str | None:
    """What a valid reference would be, when `ref` isn't one; None when it is."""
    if ref.startswith(OFFLINE):
        if ref[len(OFFLINE):] not in OFFLINE_MODELS:
            return f"an offline model ({', '.join(OFFLINE + n for n in OFFLINE_MODELS)})"
    elif ref.startswith(BUNDLED):
        name = ref[len(BUNDLED):]
        if "/" in name or name.startswith(".") or not (BUNDLED_MODELS_DIR / name / "config.json").is_file():
            known = sorted(p.parent.name for p in BUNDLED_MODELS_DIR.glob("*/config.json"))
            return f"a bundled model ({', '.join(BUNDLED + n for n in known)})"
    elif ref.startswith(REPO):
        folder = (PROJECT_ROOT / ref[len(REPO):]).resolve()
        if not folder.is_relative_to(PROJECT_ROOT) or not (folder / "config.json").is_file():
            return "a folder with a config.json inside this source checkout"
    elif ref.startswith(LOCAL):
        if not (Path(ref[len(LOCAL):]) / "config.json").is_file():
            return "a folder with a config.json on this machine"
    elif not HUB_ID.fullmatch(ref) or ".." in ref or any(part.endswith(".") for part in ref.split("/")):
        return "a hub id 'org/name', 'offline:NAME', 'bundled:NAME' or 'repo:PATH'"
    return None


def local_folder(ref: str) -> Path | None:
    """The folder a bundled:, repo: or offline: reference names; None for a hub id."""
    if ref.startswith(OFFLINE):
        return OFFLINE_MODELS[ref[len(OFFLINE):]].path
    if ref.startswith(BUNDLED):
        return BUNDLED_MODELS_DIR / ref[len(BUNDLED):]
    if ref.startswith(REPO):
        return (PROJECT_ROOT / ref[len(REPO):]).resolve()
    if ref.startswith(LOCAL):
        return Path(ref[len(LOCAL):]).resolve()
    return None


def resolve_model(ref: str) -> str:
    """What vLLM gets: a local folder's path, or the hub id."""
    folder = local_folder(ref)
    return ref if folder is None else str(folder)


def local_config(ref: str) -> dict | None:
    """config.json of a bundled or repo folder (or a prepared offline model); None otherwise."""
    folder = local_folder(ref)
    if folder is None:
        return None
    try:
        config = load_json(folder / "config.json", CONFIG_MAX_BYTES)
    except UnreadableInput:  # the gate (plan.gate) refuses such a pair with the reason; here it's unknown
        return None
    return config if isinstance(config, dict) else None


def cached_hub_config(repo_id: str) -> dict | None:
    try:
        from huggingface_hub import try_to_load_from_cache

        path = try_to_load_from_cache(repo_id, "config.json")
        config = load_json(path, CONFIG_MAX_BYTES) if isinstance(path, str) else None
        return config if isinstance(config, dict) else None
    except Exception:  # no huggingface_hub, or a broken cache entry
        return None


def vocab_size(ref: str, default: int | None = None) -> int | None:
    """The model's vocabulary size from its config (local, or the hub cache); `default` when unknown."""
    config = local_config(ref) or (cached_hub_config(ref) if local_folder(ref) is None else None)
    try:
        text = config.get("text_config") or config
        return int(text["vocab_size"])
    except (AttributeError, KeyError, TypeError, ValueError):
        return default


def target_vocab_size(preset, default: int | None = None) -> int | None:
    """The preset target's vocabulary size (token-id prompts must stay below it)."""
    return vocab_size(preset.target.model, default)
