"""The backend contract (engine.base): both backends implement it, a third one is one file plus one registry
line (tests/echo_backend.py, driven here through the pair, the run layer and telemetry), and EngineInfo
keeps the JSON keys each backend's info had."""

from __future__ import annotations

import json

import pytest

from specplay.core.events import BASELINE, SPECULATIVE, EngineSettings, GenerationRequest, PairState, Schedule
from specplay.engine import backends
from specplay.engine.base import Backend, EngineInfo, EngineStartError, PromptError
from specplay.engine.pair import EnginePair
from specplay.run import stream
from specplay.run.result import RunResult
from tests.echo_backend import EchoEngine, EchoSettings

IN_PROCESS_KEYS = {"async_scheduling", "model_runner", "dtype", "method", "num_speculative_tokens",
                   "per_request_metrics", "kv_cache_bytes"}


@pytest.fixture
def echo_registered(monkeypatch):
    monkeypatch.setitem(backends.BACKENDS, EchoSettings, EchoEngine)  # the one registry line, undone after
    yield


def test_both_backends_and_the_echo_implement_the_contract():
    from specplay.engine.remote import RemoteEngine, RemoteSettings
    from specplay.engine.vllm_engine import Engine

    remote = RemoteEngine(RemoteSettings(SPECULATIVE, "http://127.0.0.1:9"))
    try:
        for engine in (Engine(EngineSettings(BASELINE, {})), remote, EchoEngine(EchoSettings(BASELINE))):
            assert isinstance(engine, Backend), type(engine).__name__
    finally:
        remote.shutdown()


def test_remote_settings_fake_no_in_process_fields():
    from specplay.engine.backends import RemoteSettings

    settings = RemoteSettings(BASELINE, "http://127.0.0.1:9", token_ids_only=True)
    assert not hasattr(settings, "engine_args") and not hasattr(settings, "env")


def test_a_third_backend_runs_a_comparison_through_the_pair_and_the_run_layer(echo_registered):
    from specplay.engine.telemetry import kv_usage_of, sampler_for_pair

    pair = EnginePair(EchoSettings(BASELINE), EchoSettings(SPECULATIVE, tokens_per_step=3))  # warm-up included
    try:
        pair.start()
        assert pair.status.state == PairState.READY
        request = GenerationRequest(prompt="abcd", max_tokens=10)
        comparison = stream.compare(pair, request, Schedule.SEQUENTIAL)
        result = RunResult.of(comparison, engines=pair.engine_info())
        assert result.identical and result.error is None
        assert result.baseline.text == "abcdabcdab" == result.speculative.text
        assert result.baseline.steps == 10 and result.speculative.steps == 4  # 1 + 3 + 3 + 3 tokens a step
        assert result.tokens_per_step_ratio == pytest.approx(3.0)  # decode steps: 9 tokens in 3, against 9
        assert (result.counters.num_drafts, result.counters.num_draft_tokens, result.counters.num_accepted_tokens) \
            == (3, 6, 6)
        assert result.acceptance_source == "per-request"
        assert isinstance(result.engines[SPECULATIVE], EngineInfo)
        out = json.loads(json.dumps(result.model_dump(mode="json")))
        assert out["engines"][SPECULATIVE] == {**dict.fromkeys(IN_PROCESS_KEYS), "backend": "echo", "model": "echo",
                                               "method": "echo", "num_speculative_tokens": 2,
                                               "per_request_metrics": True}
        assert kv_usage_of(pair) == {BASELINE: 0.0, SPECULATIVE: 0.0}
        assert sampler_for_pair(pair, gpu=False).kind == "rss"
        with pytest.raises(PromptError):
            pair.prompt_token_ids(GenerationRequest(prompt="x" * 300, max_tokens=4))
    finally:
        pair.shutdown()
    assert not pair.engines[BASELINE].is_alive()


def test_a_third_backend_that_fails_to_start_fails_the_pair_by_the_contracts_error(echo_registered):
    pair = EnginePair(EchoSettings(BASELINE), EchoSettings(SPECULATIVE, fail_start=True))
    try:
        with pytest.raises(EngineStartError, match="speculative echo engine refused"):
            pair.start()
        assert pair.status.state == PairState.ERROR
    finally:
        pair.shutdown()


def test_an_unregistered_backend_is_refused_by_name():
    with pytest.raises(TypeError, match="no engine backend for EchoSettings"):
        backends.make_engine(EchoSettings(BASELINE))


def test_engine_info_keeps_each_backends_json_keys():
    assert EngineInfo().model_dump(mode="json") == {} and not EngineInfo().started  # not started: as before, {}
    in_process = EngineInfo(async_scheduling=False, model_runner="v1", dtype="bfloat16", method="ngram",
                            num_speculative_tokens=3, per_request_metrics=True)
    assert set(in_process.model_dump(mode="json")) == IN_PROCESS_KEYS
    remote = EngineInfo(backend="remote", model="target", num_speculative_tokens=3, per_request_metrics=True)
    assert set(remote.model_dump(mode="json")) == IN_PROCESS_KEYS | {"backend", "model"}
    assert remote.backend == "remote" and remote.dtype is None  # read by attribute: no dict face
    assert EngineInfo.model_validate(json.loads(json.dumps(in_process.model_dump(mode="json")))) == in_process
    assert EngineInfo.model_validate(remote.model_dump(mode="json")) == remote


def test_a_run_result_reads_engine_info_typed_from_json_too():
    from tests.ui_fixtures import run_with_acceptance

    as_json = {BASELINE: {"async_scheduling": True, "model_runner": "v2"}}
    result = RunResult.of(run_with_acceptance()[1], engines=as_json)
    assert result.engines[BASELINE] == EngineInfo(async_scheduling=True, model_runner="v2")
    assert result.async_scheduling(BASELINE) is True and result.model_runner(BASELINE) == "v2"
    assert result.async_scheduling(SPECULATIVE) is None


def test_one_schedule_default_for_the_pair_the_run_layer_the_cli_and_the_page():
    """core.events.DEFAULT_SCHEDULE, defined once: the pair and run/stream said "concurrent" while the CLI and
    the page said sequential."""
    import argparse
    import inspect

    from specplay.cli.compare import CompareCommand
    from specplay.core.events import DEFAULT_SCHEDULE
    from specplay.page.inputs import DEFAULT_SCHEDULE as PAGE_DEFAULTS
    from specplay.run.compare_prompt import compare_prompt

    defaults = {f"{f.__module__}.{f.__qualname__}": inspect.signature(f).parameters["schedule"].default
                for f in (EnginePair.stream, EnginePair.run, stream.events, stream.compare, compare_prompt)}
    assert set(defaults.values()) == {DEFAULT_SCHEDULE}, defaults
    parser = argparse.ArgumentParser()
    CompareCommand().add_arguments(parser)
    assert parser.parse_args([]).schedule == DEFAULT_SCHEDULE
    assert set(PAGE_DEFAULTS.values()) == {DEFAULT_SCHEDULE}


def test_one_state_vocabulary_no_state_written_as_a_bare_string():
    """The pair's and the page manager's states are core.events.PairState members, never string literals."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "specplay"
    wrong = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Assign):
                continue
            for target in node.targets:
                pairs = (zip(target.elts, node.value.elts) if isinstance(target, ast.Tuple)
                         and isinstance(node.value, ast.Tuple) else [(target, node.value)])
                wrong += [f"{path.relative_to(root.parent)}:{node.lineno}" for t, v in pairs
                          if isinstance(t, ast.Attribute) and t.attr in ("state", "_state")
                          and isinstance(v, ast.Constant) and isinstance(v.value, str)]
    assert not wrong, wrong
