"""The run, one shape (issue 40, 1): RunResult and its parts are frozen pydantic models whose dump is the run
JSON and whose `model_validate` is its one reader. A dump reads back equal (exactly, with EXACT: a
recording keeps every digit and the per-step times; the JSON reads back to the same JSON), nothing in the
run's layers is a mapping, and a truncated or hand-edited run JSON is refused with a ValidationError that
names its field."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel, ValidationError

from specplay.core.events import BASELINE, SPECULATIVE
from specplay.engine.base import EngineInfo
from specplay.presets.catalog import get_preset
from specplay.run.fields import EXACT
from specplay.run.noise import Interval, Noise, Pooled, pooled_runs
from specplay.run.result import EngineResult, RequestInfo, RunResult, SpeculativeResult
from specplay.run.steps import Step, StepDetail
from tests.ui_fixtures import comparison_of, run_with_acceptance, synthetic_events
from tests.unit.test_one_shape import ROOT, mapping_classes

MODELS = (RunResult, EngineResult, SpeculativeResult, RequestInfo, Step, StepDetail, Interval, Noise, Pooled,
          EngineInfo)


def _run() -> RunResult:
    _, c = run_with_acceptance()
    engines = {BASELINE: EngineInfo(async_scheduling=False, kv_cache_bytes=1 << 20),
               SPECULATIVE: EngineInfo(backend="remote", model="m", num_speculative_tokens=4)}
    return RunResult.of(c, get_preset("smollm2-ngram"), device="cpu", engines=engines,
                        load_seconds={BASELINE: 1.0, SPECULATIVE: 2.0}, run_id="run-3")


def test_a_run_dumped_exactly_reads_back_equal_and_its_json_reads_back_to_the_same_json():
    run = _run()
    assert run.step_detail is not None and run.step_detail.steps and run.baseline.step_times  # not a bare run
    assert RunResult.model_validate(run.model_dump(mode="json", context=EXACT)) == run
    out = json.loads(json.dumps(run.model_dump(mode="json")))
    back = RunResult.model_validate(out)
    assert back.model_dump(mode="json") == out
    assert "step_times" not in out[BASELINE] and back.baseline.step_times == ()  # the JSON has no per-step clock
    assert (back.method_kind, back.num_speculative_tokens, back.verifier) == ("ngram", 4, "standard")
    assert back.engines[SPECULATIVE] == run.engines[SPECULATIVE] and back.engines[BASELINE].kv_cache_bytes == 1 << 20
    assert back.counters == run.counters and back.step_detail == run.step_detail


def test_a_pooled_series_is_a_typed_field_of_its_last_run_and_reads_back():
    runs = [_run(), _run()]
    pooled = pooled_runs(runs)
    last = runs[-1].model_copy(update={"pooled": pooled})
    out = json.loads(json.dumps(last.model_dump(mode="json")))
    assert out["pooled"]["runs"] == 2 and set(out["pooled"]) == {
        "runs", "speedup", "tokens_per_step_ratio", "step_cost_ratio", "speedup_interval", "single_run_spread",
        "single_run_intervals"}
    assert RunResult.model_validate(out).pooled == Pooled.model_validate(out["pooled"])
    assert "pooled" not in runs[0].model_dump(mode="json")  # a single run has no pooled key


def test_engine_info_json_is_as_before():
    assert EngineInfo().model_dump(mode="json") == {} and not EngineInfo().started
    info = EngineInfo(async_scheduling=True, model_runner="v2")
    assert "backend" not in info.model_dump(mode="json") and info.model_dump(mode="json")["kv_cache_bytes"] is None
    assert EngineInfo.model_validate(info.model_dump(mode="json")) == info
    assert EngineInfo.model_validate({}) == EngineInfo()


def test_the_runs_models_are_frozen_pydantic_with_no_mapping_face():
    run_layers = {p for p, _ in mapping_classes()
                  if p.startswith(("specplay/run/", "specplay/engine/", "specplay/page/"))}
    assert run_layers == set()
    for model in MODELS:
        assert issubclass(model, BaseModel) and model.model_config.get("frozen"), model.__name__
        assert not hasattr(model, "__getitem__") and not hasattr(model, "get"), model.__name__
        assert not {"to_json", "from_json", "as_dict", "from_dict"} & set(dir(model)), model.__name__
    assert not (ROOT / "specplay/run/result_json.py").exists()  # the pydantic twin is gone


@pytest.mark.parametrize("edit, where", [
    (lambda o: {**o, "speedup": -1}, ("speedup",)),
    (lambda o: {**o, "identical": "yes"}, ("identical",)),
    (lambda o: {k: v for k, v in o.items() if k != SPECULATIVE}, (SPECULATIVE,)),
    (lambda o: {**o, SPECULATIVE: {**o[SPECULATIVE], "token_ids": [1, -2]}}, (SPECULATIVE, "token_ids", 1)),
    (lambda o: {**o, BASELINE: {**o[BASELINE], "token_ids": list(range(1 << 18))}}, (BASELINE, "token_ids")),
    (lambda o: {**o, "num_speculative_tokens": 10 ** 6}, ("num_speculative_tokens",)),
    (lambda o: {**o, "speedup_interval": [1.0]}, ("speedup_interval",)),
    (lambda o: {**o, "engines": {BASELINE: {"kv_cache_bytes": "lots"}}}, ("engines", BASELINE, "kv_cache_bytes")),
    (lambda o: {**o, SPECULATIVE: {**o[SPECULATIVE], "step_detail": [{"start": 1, "tokens": 1, "accepted": 99}]}},
     (SPECULATIVE, "step_detail", 0, "accepted")),
])
def test_a_hand_edited_run_json_is_refused_naming_its_field(edit, where):
    out = json.loads(json.dumps(_run().model_dump(mode="json")))
    with pytest.raises(ValidationError) as caught:
        RunResult.model_validate(edit(out))
    assert caught.value.errors()[0]["loc"][:len(where)] == where, caught.value.errors()[0]


def test_a_truncated_run_json_is_refused():
    text = json.dumps(_run().model_dump(mode="json"))
    with pytest.raises(ValidationError):
        RunResult.model_validate_json(text[:len(text) // 2])
    with pytest.raises(ValidationError) as caught:  # cut to its first keys: the engines' sides are missing
        RunResult.model_validate({"identical": True})
    assert {e["loc"] for e in caught.value.errors()} == {(BASELINE,), (SPECULATIVE,)}
    with pytest.raises(ValidationError):
        RunResult.model_validate([text])


def test_a_stopped_runs_json_says_so_and_reads_back():
    stopped = RunResult.of(comparison_of(synthetic_events([1], [[1]], cancelled=True)), "p")
    out = stopped.model_dump(mode="json")
    assert out["cancelled"] is True and out["error"] is None
    assert RunResult.model_validate(out).stopped
