"""The engine keeps the model runner vLLM chose at start, inside the engine's environment: vLLM reads
VLLM_USE_V2_MODEL_RUNNER lazily, so after the environment is restored its config may say otherwise. A stand-in
AsyncLLM (no engine is started)."""

import asyncio
import os
from types import SimpleNamespace

import pytest

from specplay.core.events import EngineSettings
from specplay.engine import vllm_engine


class _Config:
    """Answers like vLLM's VllmConfig.use_v2_model_runner: from the environment, each time it is asked."""

    scheduler_config = SimpleNamespace(async_scheduling=True)
    model_config = SimpleNamespace(dtype="torch.bfloat16", max_model_len=4096)
    speculative_config = SimpleNamespace(method="draft_model", num_speculative_tokens=3)

    @property
    def use_v2_model_runner(self) -> bool:
        return os.environ.get("VLLM_USE_V2_MODEL_RUNNER", "1") == "1"


class _FakeLLM:
    vllm_config = _Config()
    model_config = _Config.model_config

    @classmethod
    def from_engine_args(cls, args, stat_loggers=None):
        return cls()


def test_info_reports_the_runner_captured_at_start(monkeypatch):
    pytest.importorskip("vllm")
    from vllm.v1.engine import async_llm

    monkeypatch.setattr(async_llm, "AsyncLLM", _FakeLLM)
    monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", "1")  # the process default differs from the engine's
    settings = EngineSettings("speculative", {"model": "x", "skip_tokenizer_init": True, "max_model_len": 4096},
                              {"VLLM_USE_V2_MODEL_RUNNER": "0"})
    engine = vllm_engine.Engine(settings)
    asyncio.run(engine.start())
    assert os.environ["VLLM_USE_V2_MODEL_RUNNER"] == "1"  # restored after the start
    assert _FakeLLM.vllm_config.use_v2_model_runner is True  # what the config says now
    assert engine.model_runner == "v1" and engine.info().model_runner == "v1"  # what it said at start


def test_model_runner_is_none_where_vllm_does_not_say():
    assert vllm_engine._model_runner(SimpleNamespace()) is None and vllm_engine._model_runner(None) is None


def test_model_runner_is_v2_where_vllm_has_no_other():
    """vLLM 0.34 removed Model Runner V1 and the config's `use_v2_model_runner` with it: engines.*.model_runner
    read null there. The facts of the real 0.34 wheel (tests/fixtures) say V2 is its only runner."""
    import json
    from pathlib import Path

    from specplay.engine.vllm_facts import VllmFacts

    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-0.34-facts.json"
    v034 = VllmFacts.from_dict(json.loads(fixture.read_text()))
    config_034 = SimpleNamespace(scheduler_config=None)  # a VllmConfig without use_v2_model_runner
    assert vllm_engine._model_runner(config_034, v034) == "v2"
    older = VllmFacts("0.26.0", frozenset(), frozenset(), has_v1_runner=True, has_v2_runner=False)
    assert vllm_engine._model_runner(config_034, older) is None  # 0.26: doesn't say
    assert vllm_engine._model_runner(SimpleNamespace(use_v2_model_runner=False), v034) == "v1"
