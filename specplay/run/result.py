"""One finished run, typed: what a Comparison measured plus what the caller knows (preset, request, engines,
load times, run id), and the explanation, made in one place (`RunResult.of`). Readers (figures, the
explanation, the page's cards, the CLI report, the history CSV) read its fields.

One pydantic model per shape, and its dump is the run JSON (`model_dump(mode="json")`: `compare --json`, the
page's "result" and its download, the scripts), with the keys and rounding the README's field table
documents; `RunResult.model_validate` is its one reader, which checks every field (types, bounds, sizes:
run/fields.py) before anything reads it, a bad one raising a ValidationError that names the field. The JSON
leaves out each engine's per-step arrival times and rounds its figures; `model_dump(context=EXACT)` keeps
both (a recording of the run), and reads back equal.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, computed_field, model_serializer

from specplay.core.events import BASELINE, SPECULATIVE, SpecDecodeCounters
from specplay.core.trace import EngineTrace
from specplay.engine.base import EngineInfo
from specplay.presets.verifiers import verifier_named, verifier_of
from specplay.run.comparison import Comparison, divergence_candidates, divergence_context
from specplay.run.fields import (MAX_K, MAX_TOKENS, Count, Flag, Ids, Rounded2, Rounded3, Rounded4, Seconds,
                                 Seconds4, Seconds6, Short, SmallCount, Text, exact)
from specplay.run.noise import Interval, Noise, Pooled, noise_of
from specplay.run.steps import Step, StepDetail, acceptance_histogram, step_detail

PerPosition = Annotated[tuple[Count, ...], Field(max_length=MAX_K)]
# a run's optional keys: in its JSON only when known (see RunResult._json)
OPTIONAL_KEYS = ("divergence_context", "divergence_candidates", "run_id", "request", "load_seconds", "pooled")


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class EngineResult(_Model):
    """One engine's side of a run (`baseline` / `speculative` in the JSON)."""

    text: Text = ""
    token_ids: Ids = ()
    ttft_s: Seconds4 | None = None
    tokens_per_s: Rounded2 | None = None
    steps: Count = 0
    steps_source: Short = ""
    step_sizes: Annotated[tuple[Count, ...], Field(max_length=MAX_TOKENS)] = ()
    step_seconds: Seconds6 | None = None
    tokens_per_step: Rounded4 | None = None
    finish_reason: Short | None = None
    # each chunk's arrival (time.monotonic()): the per-step times noise, sharing and the step detail read;
    # in the JSON only under EXACT (a recording), as they say nothing without the run's clock
    step_times: Annotated[tuple[float, ...], Field(max_length=MAX_TOKENS)] = ()

    @classmethod
    def of(cls, trace: EngineTrace, **more) -> "EngineResult":
        """A trace's side, read off its attributes of the same names (with `more`: the speculative side's)."""
        return cls(**dict(EngineResult.model_validate(trace, from_attributes=True)), **more)

    @property
    def tokens(self) -> int:
        return len(self.token_ids)

    @model_serializer(mode="wrap")
    def _json(self, handler, info):
        out = handler(self)
        if not exact(info):
            out.pop("step_times", None)
        return out


class SpeculativeResult(EngineResult):
    """The speculative side: its engine's figures, its spec-decode counters, and its verification steps."""

    accepted_per_position: PerPosition = ()
    # the steps whose draft reached each position (None: vLLM didn't say): per-position acceptance's divisor
    drafted_per_position: PerPosition | None = None
    num_drafts: Count = 0
    num_draft_tokens: Count = 0
    num_accepted: Count = 0
    acceptance_source: Short | None = None
    speedup_per_acceptance_length: Rounded3 | None = None
    # per decode step (specplay.run.steps): {start, tokens, accepted, drafted, proposed, target_token, seconds}
    step_detail: Annotated[tuple[Step, ...], Field(max_length=MAX_TOKENS)] | None = None
    step_detail_note: Annotated[str, Field(max_length=2000)] | None = None
    step_detail_rejections_checked: Flag | None = None

    @property
    def counters(self) -> SpecDecodeCounters:
        return SpecDecodeCounters(self.num_drafts, self.num_draft_tokens, self.num_accepted,
                                  self.accepted_per_position, self.drafted_per_position)

    @computed_field
    def acceptance_rate(self) -> Rounded4 | None:
        return self.counters.acceptance_rate

    @computed_field
    def mean_acceptance_length(self) -> Rounded3 | None:
        return self.counters.mean_acceptance_length

    @computed_field
    def efficiency(self) -> Rounded3 | None:
        """The old name of speedup_per_acceptance_length, kept for one release (docs/metrics.md)."""
        return self.speedup_per_acceptance_length

    @computed_field
    def acceptance_histogram(self) -> list[int]:
        """vLLM's: [j] = verification steps that accepted exactly j drafts (specplay.run.steps)."""
        return acceptance_histogram(self.counters)

    def detail(self) -> StepDetail | None:
        if self.step_detail is None:
            return None
        return StepDetail(steps=self.step_detail, note=self.step_detail_note,
                          rejections_checked=self.step_detail_rejections_checked is not False)

    def with_detail(self, detail: StepDetail | None) -> "SpeculativeResult":
        return self.model_copy(update={
            "step_detail": detail.steps if detail else None, "step_detail_note": detail.note if detail else None,
            "step_detail_rejections_checked": detail.rejections_checked if detail else None})


class RequestInfo(_Model):
    max_tokens: Annotated[int, Field(strict=True, ge=1, le=MAX_TOKENS)]
    temperature: Annotated[float, Field(strict=True, ge=0, le=10, allow_inf_nan=False)]


class RunResult(_Model):
    """A finished (or stopped, or failed) run. Ratios are speculative ÷ baseline; None when untimeable."""

    identical: Flag
    first_divergence: Count | None = None
    speedup: Rounded3 | None = None
    tokens_per_step_ratio: Rounded4 | None = None
    step_cost_ratio: Rounded4 | None = None
    # 95% bootstrap intervals of speedup and both factors from the per-step times (specplay.run.noise)
    speedup_interval: Interval | None = None
    tokens_per_step_ratio_interval: Interval | None = None
    step_cost_ratio_interval: Interval | None = None
    schedule: Short | None = None
    prompt_tokens: Count = 0
    baseline: EngineResult
    speculative: SpeculativeResult
    divergence_context: dict[Short, Any] | None = None
    # at the first divergence, per role: [[token text, logprob], ...], most likely first (where reported)
    divergence_candidates: dict[Short, Any] | None = None
    error: Annotated[str, Field(max_length=4000)] | None = None
    cancelled: Flag = False
    run_id: Short | None = None  # the page's: numbered on the pair in the order runs start
    preset: Short | None = None
    request: RequestInfo | None = None  # the page's
    load_seconds: dict[Short, Seconds | None] | None = None  # the CLI's: per role, seconds its engine took to start
    # per role: how vLLM resolved it (EnginePair.engine_info)
    engines: dict[Short, EngineInfo] = {}
    explanation: Annotated[str, Field(max_length=8000)] | None = None
    # the speculative config's rejection_sample_method (presets.verifiers; None: no preset given)
    verifier: Short | None = None
    # the method's kind (presets.methods: vLLM's method, or "pard", "mtp") and k: what the run's readers (the
    # stepper, the what-if) need of its preset, carried so they never look the preset up again
    method_kind: Short | None = None
    num_speculative_tokens: SmallCount | None = None
    # "Run 3×": this run (the series' last) with all the series' runs pooled (run.noise.pooled_runs)
    pooled: Pooled | None = None

    @classmethod
    def of(cls, comparison: Comparison, preset=None, *, device: str = "cpu", engines: dict | None = None,
           load_seconds: dict | None = None, run_id: str | None = None, request=None,
           step_floor_s: float | None = None) -> "RunResult":
        """The one way to make a RunResult from a run. `preset`: a Preset (its name, method and k feed the
        explanation); `request`: a GenerationRequest (the page's result carries its max tokens and
        temperature); `step_floor_s`: the baseline step's bandwidth floor (weights ÷ memory bandwidth)."""
        from specplay.run.explain import explain

        c = comparison
        index, finished = c.first_divergence, c.finished
        stopped = finished is not None and bool(finished.error or finished.cancelled)
        typed = hasattr(preset, "method")
        counters = c.counters
        detail = (step_detail(c.prompt_token_ids, c.speculative, preset.speculative_config, preset.facts.kind,
                              preset.target.max_model_len) if typed else None)
        speculative = SpeculativeResult.of(
            c.speculative, accepted_per_position=counters.accepted_per_position,
            drafted_per_position=counters.drafted_per_position, num_drafts=counters.num_drafts,
            num_draft_tokens=counters.num_draft_tokens, num_accepted=counters.num_accepted_tokens,
            acceptance_source=c.counters_source, speedup_per_acceptance_length=c.speedup_per_acceptance_length)
        noise = noise_of(c.baseline, c.speculative)
        result = cls(
            identical=c.identical, first_divergence=index, speedup=c.speedup,
            tokens_per_step_ratio=c.tokens_per_step_ratio, step_cost_ratio=c.step_cost_ratio,
            speedup_interval=noise.speedup if noise else None,
            tokens_per_step_ratio_interval=noise.tokens_per_step_ratio if noise else None,
            step_cost_ratio_interval=noise.step_cost_ratio if noise else None,
            schedule=None if c.schedule is None else str(c.schedule), prompt_tokens=len(c.prompt_token_ids),
            baseline=EngineResult.of(c.baseline), speculative=speculative.with_detail(detail),
            divergence_context=(divergence_context(c.baseline.token_ids, c.speculative.token_ids, index, c.decode)
                                if index is not None and c.decode is not None else None),
            divergence_candidates=divergence_candidates(c.baseline, c.speculative, index),
            error=finished.error if stopped else None, cancelled=bool(stopped and finished.cancelled),
            preset=getattr(preset, "name", preset), engines=dict(engines or {}), load_seconds=load_seconds,
            run_id=run_id,
            request=(RequestInfo(max_tokens=request.max_tokens, temperature=request.temperature)
                     if request is not None else None),
            verifier=verifier_of(preset.speculative_config).name if typed else None,
            method_kind=preset.facts.kind if typed else None,
            num_speculative_tokens=preset.num_speculative_tokens if typed else None)
        if not typed:
            return result
        sentence = explain(result, preset.facts.kind, preset.num_speculative_tokens, device, step_floor_s)
        return result.model_copy(update={"explanation": sentence})

    @computed_field
    def verifier_exact(self) -> bool | None:
        """Whether T=0 promises identical outputs (docs/cli.md); in the JSON where the verifier is known."""
        return verifier_named(self.verifier).exact if self.verifier is not None else None

    @computed_field
    def verifier_why_different(self) -> str | None:
        """The text report's "Why: ..."; None where the verifier is exact."""
        return verifier_named(self.verifier).why_different if self.verifier is not None else None

    @model_serializer(mode="wrap")
    def _json(self, handler):
        """Optional keys appear only when known: divergence_context (outputs differ and a tokenizer decodes),
        divergence_candidates, error and cancelled (a stopped run), run_id and request (the page's),
        load_seconds (the CLI's), the verifier's keys and the method's (a preset given), pooled (a series)."""
        out = handler(self)
        for key in OPTIONAL_KEYS:
            if out.get(key) is None:
                out.pop(key, None)
        if not self.stopped:
            out.pop("error", None), out.pop("cancelled", None)
        if self.verifier is None:
            for key in ("verifier", "verifier_exact", "verifier_why_different"):
                out.pop(key, None)
        if self.method_kind is None:
            out.pop("method_kind", None), out.pop("num_speculative_tokens", None)
        return out

    @property
    def stopped(self) -> bool:
        """Failed or cancelled: the JSON then carries `error` and `cancelled`."""
        return bool(self.error or self.cancelled)

    def side(self, role: str) -> EngineResult:
        return self.baseline if role == BASELINE else self.speculative

    def engine(self, role: str) -> EngineInfo:
        return self.engines.get(role) or EngineInfo()

    def model_runner(self, role: str) -> str | None:
        return self.engine(role).model_runner

    def async_scheduling(self, role: str) -> bool | None:
        return self.engine(role).async_scheduling

    def with_step_detail(self, detail: StepDetail | None) -> "RunResult":
        return self.model_copy(update={"speculative": self.speculative.with_detail(detail)})

    # -- the speculative side's, read at the run's level (the figures table: run.metrics SPEC_ONLY) ---------
    @property
    def counters(self) -> SpecDecodeCounters:
        return self.speculative.counters

    @property
    def acceptance_source(self) -> str | None:
        return self.speculative.acceptance_source

    @property
    def speedup_per_acceptance_length(self) -> float | None:
        return self.speculative.speedup_per_acceptance_length

    @property
    def acceptance_rate(self) -> float | None:
        return self.counters.acceptance_rate

    @property
    def mean_acceptance_length(self) -> float | None:
        return self.counters.mean_acceptance_length

    @property
    def step_detail(self) -> StepDetail | None:
        """The speculative engine's verification steps, reconstructed (specplay.run.steps); needs the preset."""
        return self.speculative.detail()

    @property
    def noise(self) -> Noise | None:
        intervals = (self.speedup_interval, self.tokens_per_step_ratio_interval, self.step_cost_ratio_interval)
        if not all(intervals):
            return None
        return Noise(speedup=intervals[0], tokens_per_step_ratio=intervals[1], step_cost_ratio=intervals[2])
