"""Which engine serves one side of the pair: an in-process vLLM engine (EngineSettings) or a running
OpenAI-compatible server (RemoteSettings). A new backend is one more entry here."""

from __future__ import annotations

from specplay.core.events import EngineSettings
from specplay.engine.remote import RemoteEngine, RemoteSettings
from specplay.engine.vllm_engine import Engine

BACKENDS = {EngineSettings: Engine, RemoteSettings: RemoteEngine}


def make_engine(settings):
    try:
        return BACKENDS[type(settings)](settings)
    except KeyError:
        raise TypeError(f"no engine backend for {type(settings).__name__}") from None
