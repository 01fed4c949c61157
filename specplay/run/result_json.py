"""A run JSON (`RunResult.to_json()`) read back into a RunResult, validated: pydantic models of exactly the
shape `to_json` writes, every number finite and bounded, every list capped. What fails says which field.
The page never reads a run from the browser (it keeps its own, typed, per session); this is for a run JSON
from a file or another tool (`compare --json`), and the round-trip test holds `to_json` to its shape."""

from __future__ import annotations

import math
from typing import Annotated, Any, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from specplay.core.events import SpecDecodeCounters

MAX_TOKENS = 1 << 17  # longer than any run a page or the CLI allows
MAX_K = 64
Count = Annotated[int, Field(ge=0, le=1 << 40)]
TokenId = Annotated[int, Field(ge=0, lt=1 << 31)]
Ids = Annotated[list[TokenId], Field(max_length=MAX_TOKENS)]
Seconds = Annotated[float, Field(ge=0, le=1e7, allow_inf_nan=False)]
Ratio = Annotated[float, Field(ge=0, le=1e6, allow_inf_nan=False)]
Pair = Annotated[list[Ratio], Field(min_length=2, max_length=2)]
Short = Annotated[str, Field(max_length=200)]
Text = Annotated[str, Field(max_length=MAX_TOKENS * 64)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True, frozen=True)

    @field_validator("*", mode="before")
    @classmethod
    def _finite(cls, value):  # strict ints reject 1.0; floats must be finite wherever they appear
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError("not a finite number")
        return value


class StepJSON(_Strict):
    start: Count
    tokens: Count
    accepted: Optional[Annotated[int, Field(ge=0, le=MAX_K)]] = None
    drafted: Optional[Annotated[int, Field(ge=0, le=MAX_K)]] = None
    proposed: Optional[Annotated[list[TokenId], Field(max_length=MAX_K)]] = None
    target_token: Optional[TokenId] = None
    seconds: Optional[Seconds] = None


class EngineJSON(_Strict):
    text: Text = ""
    token_ids: Ids = []
    ttft_s: Optional[Seconds] = None
    tokens_per_s: Optional[Ratio] = None
    steps: Count = 0
    steps_source: Short = ""
    step_sizes: Annotated[list[Count], Field(max_length=MAX_TOKENS)] = []
    step_seconds: Optional[Seconds] = None
    tokens_per_step: Optional[Ratio] = None
    finish_reason: Optional[Short] = None


class SpeculativeJSON(EngineJSON):
    accepted_per_position: Annotated[list[Count], Field(max_length=MAX_K)] = []
    drafted_per_position: Optional[Annotated[list[Count], Field(max_length=MAX_K)]] = None
    num_drafts: Count = 0
    num_draft_tokens: Count = 0
    num_accepted: Count = 0
    acceptance_source: Optional[Short] = None
    speedup_per_acceptance_length: Optional[Ratio] = None
    step_detail: Optional[Annotated[list[StepJSON], Field(max_length=MAX_TOKENS)]] = None
    step_detail_note: Optional[Annotated[str, Field(max_length=2000)]] = None
    step_detail_rejections_checked: Optional[bool] = None


class RequestJSON(_Strict):
    max_tokens: Annotated[int, Field(ge=1, le=MAX_TOKENS)]
    temperature: Annotated[float, Field(ge=0, le=10, allow_inf_nan=False)]


class RunJSON(_Strict):
    identical: bool
    first_divergence: Optional[Count] = None
    speedup: Optional[Ratio] = None
    tokens_per_step_ratio: Optional[Ratio] = None
    step_cost_ratio: Optional[Ratio] = None
    speedup_interval: Optional[Pair] = None
    tokens_per_step_ratio_interval: Optional[Pair] = None
    step_cost_ratio_interval: Optional[Pair] = None
    schedule: Optional[Short] = None
    prompt_tokens: Count = 0
    baseline: EngineJSON
    speculative: SpeculativeJSON
    divergence_context: Optional[dict[Short, Any]] = None
    divergence_candidates: Optional[dict[Short, Any]] = None
    error: Optional[Annotated[str, Field(max_length=4000)]] = None
    cancelled: bool = False
    run_id: Optional[Short] = None
    preset: Optional[Short] = None
    request: Optional[RequestJSON] = None
    load_seconds: Optional[dict[Short, Optional[Seconds]]] = None
    engines: dict[Short, dict[Short, Any]] = {}
    explanation: Optional[Annotated[str, Field(max_length=8000)]] = None
    verifier: Optional[Short] = None
    method_kind: Optional[Short] = None
    num_speculative_tokens: Optional[Annotated[int, Field(ge=0, le=MAX_K)]] = None


def validate(data) -> RunJSON:
    """The run JSON, checked; ValueError (one line, the first bad field) when it isn't one."""
    if not isinstance(data, dict):
        raise ValueError("a run JSON is an object")
    try:
        return RunJSON.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the run"
        raise ValueError(f"run JSON: {where}: {first['msg']}") from None


def counters(spec: SpeculativeJSON) -> SpecDecodeCounters:
    return SpecDecodeCounters(spec.num_drafts, spec.num_draft_tokens, spec.num_accepted,
                              tuple(spec.accepted_per_position),
                              tuple(spec.drafted_per_position) if spec.drafted_per_position is not None else None)


def noise(run: RunJSON):
    from specplay.run.noise import Interval, Noise

    pairs = (run.speedup_interval, run.tokens_per_step_ratio_interval, run.step_cost_ratio_interval)
    return Noise(*(Interval(*p) for p in pairs)) if all(pairs) else None


def step_detail(spec: SpeculativeJSON):
    from specplay.run.steps import Step, StepDetail

    if spec.step_detail is None:
        return None
    steps = tuple(Step(s.start, s.tokens, s.accepted, s.drafted, None if s.proposed is None else tuple(s.proposed),
                       s.target_token, s.seconds) for s in spec.step_detail)
    return StepDetail(steps, spec.step_detail_note, spec.step_detail_rejections_checked is not False)
