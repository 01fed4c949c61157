"""One finished run, typed: what a Comparison measured plus what the caller knows (preset, request, engines,
load times, run id), and the explanation, made in one place (`RunResult.of`). Readers (figures, the
explanation, the page's cards, the CLI report, the history CSV) read its fields; JSON exists only at the
edges (`to_json()`: `compare --json`, the page's "result" output, the scripts), with the keys and rounding
the README's field table documents.

Frozen dataclasses, built from typed values in-process: they cost nothing per live redraw. A run JSON read
back from outside (a file, another tool) goes through `RunResult.from_json`, which validates every field
(run/result_json.py, pydantic) before anything reads it: the page never decodes or links what it didn't make.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from specplay.core.events import BASELINE, SPECULATIVE, SpecDecodeCounters
from specplay.core.trace import EngineTrace, _round
from specplay.engine.base import EngineInfo, engines_json
from specplay.presets.verifiers import verifier_named, verifier_of
from specplay.run.comparison import Comparison, divergence_candidates, divergence_context
from specplay.run.noise import Noise, noise_of
from specplay.run.steps import StepDetail, acceptance_histogram, step_detail


INTERVAL_KEYS = ("speedup_interval", "tokens_per_step_ratio_interval", "step_cost_ratio_interval")


@dataclass(frozen=True)
class EngineResult:
    """One engine's side of a run (`baseline` / `speculative` in the JSON), unrounded."""

    text: str
    token_ids: tuple[int, ...]
    ttft_s: float | None
    tokens_per_s: float | None
    steps: int
    steps_source: str
    step_sizes: tuple[int, ...]
    step_seconds: float | None
    tokens_per_step: float | None
    finish_reason: str | None
    step_times: tuple[float, ...] = ()  # each chunk's arrival (time.monotonic()): the per-step times noise reads

    @classmethod
    def of(cls, trace: EngineTrace) -> "EngineResult":
        return cls(trace.text, tuple(trace.token_ids), trace.ttft_s, trace.tokens_per_s, trace.steps,
                   trace.steps_source, tuple(trace.step_sizes), trace.step_seconds, trace.tokens_per_step,
                   trace.finish_reason, tuple(trace.step_times))

    @classmethod
    def from_json(cls, side) -> "EngineResult":
        """From a validated side of a run JSON (result_json.EngineJSON)."""
        return cls(side.text, tuple(side.token_ids), side.ttft_s, side.tokens_per_s, side.steps, side.steps_source,
                   tuple(side.step_sizes), side.step_seconds, side.tokens_per_step, side.finish_reason)

    @property
    def tokens(self) -> int:
        return len(self.token_ids)

    def to_json(self) -> dict:
        return {
            "text": self.text, "token_ids": list(self.token_ids), "ttft_s": _round(self.ttft_s),
            "tokens_per_s": _round(self.tokens_per_s, 2), "steps": self.steps, "steps_source": self.steps_source,
            "step_sizes": list(self.step_sizes), "step_seconds": _round(self.step_seconds, 6),
            "tokens_per_step": _round(self.tokens_per_step, 4), "finish_reason": self.finish_reason,
        }


@dataclass(frozen=True)
class RequestInfo:
    max_tokens: int
    temperature: float


@dataclass(frozen=True)
class RunResult:
    """A finished (or stopped, or failed) run. Ratios are speculative ÷ baseline; None when untimeable."""

    identical: bool
    first_divergence: int | None
    speedup: float | None
    tokens_per_step_ratio: float | None
    step_cost_ratio: float | None
    schedule: str | None
    prompt_tokens: int
    baseline: EngineResult
    speculative: EngineResult
    counters: SpecDecodeCounters
    acceptance_source: str | None
    speedup_per_acceptance_length: float | None
    divergence_context: dict | None = None
    # at the first divergence, per role: [[token text, logprob], ...], most likely first (where reported)
    divergence_candidates: dict | None = None
    error: str | None = None
    cancelled: bool = False
    # what the caller knows
    preset: str | None = None
    # per role: how vLLM resolved it (EnginePair.engine_info); a JSON object given is read as an EngineInfo
    engines: dict[str, EngineInfo] = dataclasses.field(default_factory=dict)
    load_seconds: dict | None = None  # the CLI's: per role, seconds its engine took to start
    run_id: str | None = None  # the page's: numbered on the pair in the order runs start
    request: RequestInfo | None = None  # the page's
    explanation: str | None = None
    # 95% bootstrap intervals of speedup and both factors from the per-step times (specplay.run.noise)
    noise: Noise | None = None
    # the speculative engine's verification steps, reconstructed (specplay.run.steps); needs the preset
    step_detail: StepDetail | None = None
    # the speculative config's rejection_sample_method (presets.verifiers; None: no preset given)
    verifier: str | None = None
    # the method's kind (presets.methods: vLLM's method, or "pard", "mtp") and k: what the run's readers (the
    # stepper, the what-if) need of its preset, carried so they never look the preset up again
    kind: str | None = None
    k: int | None = None

    def __post_init__(self):
        typed = {role: info if isinstance(info, EngineInfo) else EngineInfo.from_json(info)
                 for role, info in (self.engines or {}).items()}
        object.__setattr__(self, "engines", typed)

    @classmethod
    def of(cls, comparison: Comparison, preset=None, *, device: str = "cpu", engines: dict | None = None,
           load_seconds: dict | None = None, run_id: str | None = None, request=None,
           step_floor_s: float | None = None) -> "RunResult":
        """The one way to make a RunResult. `preset`: a Preset (its name, method and k feed the explanation);
        `request`: a GenerationRequest (the page's result carries its max tokens and temperature);
        `step_floor_s`: the baseline step's bandwidth floor (weights ÷ memory bandwidth) when known."""
        from specplay.run.explain import explain

        c = comparison
        index = c.first_divergence
        finished = c.finished
        stopped = finished is not None and bool(finished.error or finished.cancelled)
        result = cls(
            identical=c.identical, first_divergence=index, speedup=c.speedup,
            tokens_per_step_ratio=c.tokens_per_step_ratio, step_cost_ratio=c.step_cost_ratio,
            schedule=None if c.schedule is None else str(c.schedule), prompt_tokens=len(c.prompt_token_ids),
            baseline=EngineResult.of(c.baseline), speculative=EngineResult.of(c.speculative),
            counters=c.counters, acceptance_source=c.counters_source, speedup_per_acceptance_length=c.speedup_per_acceptance_length,
            divergence_context=(divergence_context(c.baseline.token_ids, c.speculative.token_ids, index, c.decode)
                                if index is not None and c.decode is not None else None),
            divergence_candidates=divergence_candidates(c.baseline, c.speculative, index),
            error=finished.error if stopped else None, cancelled=bool(stopped and finished.cancelled),
            preset=getattr(preset, "name", preset), engines=dict(engines or {}), load_seconds=load_seconds,
            run_id=run_id,
            request=RequestInfo(request.max_tokens, request.temperature) if request is not None else None,
            noise=noise_of(c.baseline, c.speculative),
        )
        if preset is None or not hasattr(preset, "method"):
            return result
        sentence = explain(result, preset.facts.kind, preset.num_speculative_tokens, device, step_floor_s)
        detail = step_detail(c.prompt_token_ids, c.speculative, preset.speculative_config, preset.facts.kind,
                             preset.target.max_model_len)
        return dataclasses.replace(result, explanation=sentence, step_detail=detail,
                                   verifier=verifier_of(preset.speculative_config).name, kind=preset.facts.kind,
                                   k=preset.num_speculative_tokens)

    @classmethod
    def from_json(cls, data) -> "RunResult":
        """A run from its `to_json()` object, every field checked first (types, bounds, sizes: run/result_json);
        ValueError naming the first bad field otherwise. Per-step arrival times aren't in the JSON."""
        from specplay.run import result_json

        run = result_json.validate(data)
        spec = run.speculative
        return cls(
            identical=run.identical, first_divergence=run.first_divergence, speedup=run.speedup,
            tokens_per_step_ratio=run.tokens_per_step_ratio, step_cost_ratio=run.step_cost_ratio,
            schedule=run.schedule, prompt_tokens=run.prompt_tokens,
            baseline=EngineResult.from_json(run.baseline), speculative=EngineResult.from_json(spec),
            counters=result_json.counters(spec), acceptance_source=spec.acceptance_source,
            speedup_per_acceptance_length=spec.speedup_per_acceptance_length,
            divergence_context=run.divergence_context, divergence_candidates=run.divergence_candidates,
            error=run.error, cancelled=run.cancelled, preset=run.preset, engines=run.engines,
            load_seconds=run.load_seconds, run_id=run.run_id,
            request=RequestInfo(run.request.max_tokens, run.request.temperature) if run.request else None,
            explanation=run.explanation, noise=result_json.noise(run), step_detail=result_json.step_detail(spec),
            verifier=run.verifier, kind=run.method_kind, k=run.num_speculative_tokens)

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

    @property
    def acceptance_rate(self) -> float | None:
        return self.counters.acceptance_rate

    @property
    def mean_acceptance_length(self) -> float | None:
        return self.counters.mean_acceptance_length

    @property
    def acceptance_histogram(self) -> list[int]:
        """vLLM's acceptance_histogram of this run: [j] = verification steps that accepted exactly j drafts
        (the chart beside accepted-per-position; specplay.run.steps)."""
        return acceptance_histogram(self.counters)

    @property
    def speedup_interval(self):
        """The speedup's 95% interval (a noise.Interval: low, high, holds(x)); None when untimeable."""
        return self.noise.speedup if self.noise else None

    @property
    def tokens_per_step_ratio_interval(self):
        return self.noise.tokens_per_step_ratio if self.noise else None

    @property
    def step_cost_ratio_interval(self):
        return self.noise.step_cost_ratio if self.noise else None

    def to_json(self) -> dict:
        """The `compare --json` object (the page's "result" adds run_id and request). Optional keys appear only
        when known: divergence_context (outputs differ and a tokenizer decodes), error and cancelled (a
        stopped run), load_seconds, run_id and request (where the caller has them)."""
        c = self.counters
        spec = self.speculative.to_json()
        spec.update({
            "acceptance_rate": _round(c.acceptance_rate, 4),
            "mean_acceptance_length": _round(c.mean_acceptance_length, 3),
            "accepted_per_position": list(c.accepted_per_position),
            # the steps whose draft reached each position (None: vLLM didn't say): per-position acceptance's divisor
            "drafted_per_position": list(c.drafted_per_position) if c.drafted_per_position is not None else None,
            "num_drafts": c.num_drafts, "num_draft_tokens": c.num_draft_tokens, "num_accepted": c.num_accepted_tokens,
            "acceptance_source": self.acceptance_source,
            "speedup_per_acceptance_length": _round(self.speedup_per_acceptance_length, 3),
            # the old name, kept for one release (docs/metrics.md); read speedup_per_acceptance_length
            "efficiency": _round(self.speedup_per_acceptance_length, 3),
            "acceptance_histogram": self.acceptance_histogram,  # vLLM's: [j] = steps that accepted j drafts
            # per decode step: {start, tokens, accepted, drafted, proposed, target_token, seconds} (None: unknown)
            "step_detail": [s.to_json() for s in self.step_detail.steps] if self.step_detail else None,
            "step_detail_note": self.step_detail.note if self.step_detail else None,
            "step_detail_rejections_checked": self.step_detail.rejections_checked if self.step_detail else None,
        })
        out = {
            "identical": self.identical, "first_divergence": self.first_divergence,
            "speedup": _round(self.speedup, 3), "tokens_per_step_ratio": _round(self.tokens_per_step_ratio, 4),
            "step_cost_ratio": _round(self.step_cost_ratio, 4), "schedule": self.schedule,
            "prompt_tokens": self.prompt_tokens, BASELINE: self.baseline.to_json(), SPECULATIVE: spec,
        }
        for key in INTERVAL_KEYS:  # [low, high] or None: docs/metrics.md, "Noise"
            interval = getattr(self, key)
            out[key] = interval.as_list() if interval is not None else None
        if self.divergence_context is not None:
            out["divergence_context"] = dict(self.divergence_context)
        if self.divergence_candidates is not None:
            out["divergence_candidates"] = self.divergence_candidates
        if self.stopped:
            out["error"], out["cancelled"] = self.error, self.cancelled
        if self.run_id is not None:
            out["run_id"] = self.run_id
        out["preset"] = self.preset
        if self.request is not None:
            out["request"] = dataclasses.asdict(self.request)
        if self.load_seconds is not None:
            out["load_seconds"] = self.load_seconds
        out["engines"] = engines_json(self.engines)
        out["explanation"] = self.explanation
        if self.verifier is not None:  # whether T=0 promises identical outputs, and why not (docs/cli.md)
            verifier = verifier_named(self.verifier)
            out["verifier"], out["verifier_exact"] = verifier.name, verifier.exact
            out["verifier_why_different"] = verifier.why_different  # the text report's "Why: ..."; None if exact
        if self.kind is not None:
            out["method_kind"], out["num_speculative_tokens"] = self.kind, self.k
        return out
