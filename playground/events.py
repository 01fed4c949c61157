"""Plain data passed between the engine layer and everything above it (no vLLM, no Gradio)."""

from __future__ import annotations

from dataclasses import dataclass, field

BASELINE = "baseline"
SPECULATIVE = "speculative"
ROLES = (BASELINE, SPECULATIVE)


@dataclass(frozen=True)
class SpecDecodeCounters:
    """vLLM's spec-decode counters (vllm:spec_decode_num_drafts, _num_draft_tokens, _num_accepted_tokens,
    _num_accepted_tokens_per_pos), kept per engine by its own stat logger."""

    num_drafts: int = 0
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    accepted_per_position: tuple[int, ...] = ()

    def minus(self, earlier: "SpecDecodeCounters") -> "SpecDecodeCounters":
        width = max(len(self.accepted_per_position), len(earlier.accepted_per_position))
        mine = list(self.accepted_per_position) + [0] * (width - len(self.accepted_per_position))
        theirs = list(earlier.accepted_per_position) + [0] * (width - len(earlier.accepted_per_position))
        return SpecDecodeCounters(
            self.num_drafts - earlier.num_drafts,
            self.num_draft_tokens - earlier.num_draft_tokens,
            self.num_accepted_tokens - earlier.num_accepted_tokens,
            tuple(a - b for a, b in zip(mine, theirs)),
        )

    @property
    def acceptance_rate(self) -> float | None:
        """accepted / drafted tokens, as vLLM defines it."""
        return self.num_accepted_tokens / self.num_draft_tokens if self.num_draft_tokens else None

    @property
    def mean_acceptance_length(self) -> float | None:
        """1 + accepted / drafts: tokens emitted per verification step that had a draft."""
        return 1 + self.num_accepted_tokens / self.num_drafts if self.num_drafts else None


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


@dataclass(frozen=True)
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
    # Speculative engine only: its counters since this run started, read as this chunk arrived.
    counters: SpecDecodeCounters | None = None


@dataclass(frozen=True)
class RunStarted:
    """First event of a run: the prompt both engines got and how they run it ("concurrent": both at once,
    as in the demo; "sequential": one after the other, so neither slows the other, as in benchmarks)."""

    run_id: str
    prompt_token_ids: tuple[int, ...]
    schedule: str


@dataclass(frozen=True)
class RunFinished:
    """Last event of a run; `error` is set if it failed, `cancelled` if Stop was pressed."""

    run_id: str
    finished_at: float
    counters: SpecDecodeCounters = field(default_factory=SpecDecodeCounters)
    cancelled: bool = False
    error: str | None = None
