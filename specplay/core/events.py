"""Plain data passed between the engine layer and everything above it (no vLLM, no Gradio)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

BASELINE = "baseline"
SPECULATIVE = "speculative"
ROLES = (BASELINE, SPECULATIVE)

# Where a run's acceptance counters came from: vLLM's per-request metrics of each request (exact whatever
# else the engine runs; vLLM >= 0.29), or the difference of the engine's stat-logger counters before and
# after the run (exact only while the run has the engine to itself).
PER_REQUEST, ENGINE_DELTA = "per-request", "engine delta"
# Where an engine's step count came from (`steps_source`): the speculative request's own counters
# (PER_REQUEST), its token count (one token a step without speculation), or the streamed chunks (the
# fallback: vLLM merges DELTA chunks a slow consumer hasn't taken, so chunks may undercount steps).
TOKENS, CHUNKS = "tokens", "chunks"


class Schedule(enum.StrEnum):
    """How a run uses the engines: both at once (the demo) or one after the other (clean timings)."""

    CONCURRENT = "concurrent"
    SEQUENTIAL = "sequential"


# The one default, for the pair, the run layer, the CLI and the page. Measured (docs/benchmarks.md, "The page's
# speedup"): on one GPU two engines at once slow each other, so the page's speedup fell to 0.76 of the
# sequential comparison's (EAGLE at 8B scale); one after the other it was 0.99. On the CPU both schedules came
# within 5% (0.97 and 0.95): sequential there too, as the one whose timings are clean by construction.
DEFAULT_SCHEDULE = Schedule.SEQUENTIAL


class PairState(enum.StrEnum):
    """An engine pair's life cycle (StrEnum: compares and serializes as its string)."""

    IDLE = "idle"
    LOADING = "loading"
    READY = "ready"
    ERROR = "error"
    STOPPED = "stopped"


@dataclass(frozen=True)
class SpecDecodeCounters:
    """vLLM's spec-decode counters (vllm:spec_decode_num_drafts, _num_draft_tokens, _num_accepted_tokens,
    _num_accepted_tokens_per_pos), kept per engine by its own stat logger, or one request's (from_histogram)."""

    num_drafts: int = 0
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    accepted_per_position: tuple[int, ...] = ()
    # Per position, the steps whose draft reached it (vLLM's num_draft_tokens_per_pos, or a request's
    # per_step_drafted): an n-gram draft may stop short of k. None: not reported (a /metrics page, an older vLLM).
    drafted_per_position: tuple[int, ...] | None = None

    @classmethod
    def from_histogram(cls, histogram, num_draft_tokens: int, per_step_drafted=None) -> "SpecDecodeCounters":
        """One request's counters from vLLM's per-request metrics (RequestSpecDecodeMetrics): `histogram[j]`
        verification steps accepted j drafted tokens. A step that accepted j accepted positions 0..j-1
        (acceptance stops at the first rejection), so position i was accepted by the steps with j > i.
        `per_step_drafted` (vLLM's "detailed" level): each step's drafted count, so position i was drafted by
        the steps with d > i; ignored unless it has one entry per step."""
        counts = [int(n) for n in histogram]
        k = max(0, len(counts) - 1)
        steps = [int(d) for d in per_step_drafted] if per_step_drafted else None
        return cls(
            num_drafts=sum(counts),
            num_draft_tokens=int(num_draft_tokens),
            num_accepted_tokens=sum(j * n for j, n in enumerate(counts)),
            accepted_per_position=tuple(sum(counts[i + 1:]) for i in range(k)),
            drafted_per_position=(tuple(sum(d > i for d in steps) for i in range(k))
                                  if steps is not None and len(steps) == sum(counts) else None),
        )

    def _combine(self, other: "SpecDecodeCounters", sign: int) -> "SpecDecodeCounters":
        def add(a, b):
            width = max(len(a), len(b))
            return tuple(x + sign * y for x, y in zip([*a] + [0] * (width - len(a)), [*b] + [0] * (width - len(b))))

        # a side with drafts but no per-position drafted counts makes the total's unknown
        known = all(c.drafted_per_position is not None or not c.num_drafts for c in (self, other))
        return SpecDecodeCounters(
            self.num_drafts + sign * other.num_drafts,
            self.num_draft_tokens + sign * other.num_draft_tokens,
            self.num_accepted_tokens + sign * other.num_accepted_tokens,
            add(self.accepted_per_position, other.accepted_per_position),
            add(self.drafted_per_position or (), other.drafted_per_position or ()) if known else None,
        )

    def minus(self, earlier: "SpecDecodeCounters") -> "SpecDecodeCounters":
        return self._combine(earlier, -1)

    def plus(self, other: "SpecDecodeCounters") -> "SpecDecodeCounters":
        return self._combine(other, 1)

    @property
    def acceptance_rate(self) -> float | None:
        """accepted / drafted tokens, as vLLM defines it."""
        return self.num_accepted_tokens / self.num_draft_tokens if self.num_draft_tokens else None

    @property
    def mean_acceptance_length(self) -> float | None:
        """1 + accepted / drafts: tokens emitted per verification step that had a draft."""
        return 1 + self.num_accepted_tokens / self.num_drafts if self.num_drafts else None

    def position_rates(self) -> tuple[list[float | None], bool]:
        return position_rates(self.accepted_per_position, self.drafted_per_position, self.num_drafts)


def position_rates(accepted, drafted, num_drafts: int) -> tuple[list[float | None], bool]:
    """(acceptance per draft position, whether each is ÷ the steps that drafted that position). Where the
    drafted counts are known: accepted[i] ÷ drafted[i] (None where no step drafted that far). Else ÷ every
    step with a draft (vLLM's own per-position rate), which reads later positions low wherever drafts are
    cut short (n-gram), so callers say which denominator they show."""
    accepted = list(accepted or ())
    if drafted is not None and len(drafted) >= len(accepted):
        return [a / d if d else None for a, d in zip(accepted, drafted)], True
    return [a / num_drafts if num_drafts else None for a in accepted], False


@dataclass(frozen=True)
class GenerationRequest:
    """What to run through both engines. `prompt_token_ids` bypasses the tokenizer (dummy-weight presets);
    otherwise `prompt` is wrapped in the model's chat template when it has one."""

    prompt: str = ""
    prompt_token_ids: tuple[int, ...] | None = None
    max_tokens: int = 128
    temperature: float = 0.0
    seed: int = 0
    ignore_eos: bool = False
    cache_salt: str | None = None  # vLLM's prefix-cache salt: requests share cached blocks only within one salt


@dataclass(frozen=True, kw_only=True)
class StepEvent:
    """One engine step as streamed (vLLM RequestOutputKind.DELTA): on the speculative engine a decode step
    emits accepted drafts + 1 tokens. `time` is time.monotonic() when the chunk arrived."""

    engine: str
    step: int
    token_ids: tuple[int, ...]
    text: str
    time: float
    submitted_at: float
    finished: bool = False
    finish_reason: str | None = None
    # Speculative engine only: its counters since this run started, read as this chunk arrived (on the
    # last chunk, the request's own counters where vLLM reports them: see RunFinished.counters_source).
    counters: SpecDecodeCounters | None = None
    logprobs: tuple | None = None  # per token, its top candidates ((text, logprob), ...) where reported


@dataclass(frozen=True)
class RunStarted:
    """First event of a run: the prompt both engines got and how they run it ("concurrent": both at once,
    as in the demo; "sequential": one after the other, so neither slows the other, as in benchmarks)."""

    run_id: str
    prompt_token_ids: tuple[int, ...]
    schedule: str


@dataclass(frozen=True)
class RunFinished:
    """Last event of a run; `error` is set if it failed, `cancelled` if Stop was pressed. `counters` are the
    speculative request's, from PER_REQUEST or ENGINE_DELTA (`counters_source`)."""

    run_id: str
    finished_at: float
    counters: SpecDecodeCounters = field(default_factory=SpecDecodeCounters)
    cancelled: bool = False
    error: str | None = None
    counters_source: str = ENGINE_DELTA


@dataclass(frozen=True)
class EngineSettings:
    """Everything needed to start one engine: AsyncEngineArgs keyword arguments and the environment its
    engine-core process must see (vLLM's CPU backend reads its core binding and KV size from there)."""

    role: str
    engine_args: dict
    env: dict = field(default_factory=dict)
    # CPU: the cores this process and the engine-core process keep to (core/hardware.core_layout); None: any
    host_cores: tuple[int, ...] | None = None
