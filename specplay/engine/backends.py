"""Which backend serves one side of the pair, by the type of its settings: an in-process vLLM engine
(core.events.EngineSettings) or a running OpenAI-compatible server (RemoteSettings). A new backend is one
module implementing engine.base.Backend plus one entry here (or one `register_backend` call).

The layers above name a backend's settings through this module, never the backend module itself.
"""

from __future__ import annotations

from specplay.core.events import EngineSettings
from specplay.engine.base import Backend
from specplay.engine.remote import RemoteEngine, RemoteSettings
from specplay.engine.vllm_engine import Engine

__all__ = ["BACKENDS", "EngineSettings", "RemoteSettings", "make_engine", "register_backend"]

BACKENDS: dict[type, type] = {EngineSettings: Engine, RemoteSettings: RemoteEngine}


def register_backend(settings_type: type, backend: type) -> None:
    """Make `backend(settings)` serve every engine whose settings are a `settings_type`."""
    BACKENDS[settings_type] = backend


def make_engine(settings) -> Backend:
    try:
        return BACKENDS[type(settings)](settings)
    except KeyError:
        raise TypeError(f"no engine backend for {type(settings).__name__}") from None
