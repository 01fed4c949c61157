"""One engine's stream in one run, as plain data: token ids, text, chunk sizes and arrival times, and the
timings derived from them (definitions in specplay.run.comparison and the README)."""

from __future__ import annotations

from dataclasses import dataclass, field

from specplay.core.events import CHUNKS, PER_REQUEST, TOKENS, StepEvent


def decode_rate(decode_tokens: int, decode_seconds: float) -> float | None:
    """Decode tokens/s: the tokens after the first (prefill) one over the time from its arrival to the last
    token's. The one definition: a run's engine (EngineTrace.tokens_per_s) and a pooled batch (sums of both)."""
    return decode_tokens / decode_seconds if decode_seconds > 0 else None


@dataclass
class EngineTrace:
    """Everything one engine streamed in one run. Step counts: see `steps_source`; chunk sizes and times
    stay as streamed (a merged chunk holds several steps' tokens)."""

    engine: str
    token_ids: list[int] = field(default_factory=list)
    text: str = ""
    step_sizes: list[int] = field(default_factory=list)  # tokens per streamed step
    step_times: list[float] = field(default_factory=list)
    submitted_at: float | None = None
    finished: bool = False
    finish_reason: str | None = None
    # TOKENS: one token a step (no speculation); PER_REQUEST once verified_steps is known; else CHUNKS
    count_steps_from: str = CHUNKS
    verified_steps: int | None = None  # decode steps from the request's own counters (set_verified_steps)
    # per token, its top candidates ((text, logprob), ...) as the engine reported them; None per token not reported
    top_logprobs: list = field(default_factory=list)
    prompt_tokens: int | None = None  # prompt length in tokens where a batch knows it (vllm bench serve: input_lens)

    def add(self, event: StepEvent) -> None:
        self.submitted_at = event.submitted_at
        if event.token_ids:
            self.token_ids.extend(event.token_ids)
            reported = getattr(event, "logprobs", None)
            self.top_logprobs.extend(reported if reported is not None and len(reported) == len(event.token_ids)
                                     else [None] * len(event.token_ids))
            self.step_sizes.append(len(event.token_ids))
            self.step_times.append(event.time)
        self.text += event.text
        if event.finished:
            self.finished, self.finish_reason = True, event.finish_reason

    @property
    def ttft_s(self) -> float | None:
        if not self.step_times or self.submitted_at is None:
            return None
        return self.step_times[0] - self.submitted_at

    @property
    def decode_seconds(self) -> float:
        return self.step_times[-1] - self.step_times[0] if len(self.step_times) > 1 else 0.0

    @property
    def steps_source(self) -> str:
        if self.count_steps_from == PER_REQUEST and self.verified_steps is None:
            return CHUNKS
        return self.count_steps_from

    def set_verified_steps(self, num_drafts: int, num_accepted: int) -> None:
        """The speculative request's decode steps from its own counters: `num_drafts` steps verified a
        draft; a step without one (no n-gram match) emitted one token, so decode tokens - accepted counts
        every step; max_tokens or EOS may cut a last step's accepted drafts, so the decode chunks (each at least one
        step) and the drafts are floors too."""
        self.count_steps_from = PER_REQUEST
        # a decode chunk is at least one step: the floor where a cut last step made tokens - accepted short
        chunks = len(self.step_sizes) - 1
        self.verified_steps = (max(num_drafts, self.decode_tokens - num_accepted, chunks) if self.step_sizes
                               else None)

    @property
    def decode_tokens(self) -> int:
        """Tokens after the first chunk (prefill's)."""
        return len(self.token_ids) - self.step_sizes[0] if self.step_sizes else 0

    @property
    def decode_steps(self) -> int:
        """Steps after the first (prefill) one, counted as `steps_source` says."""
        source = self.steps_source
        if source == TOKENS:
            return self.decode_tokens
        if source == PER_REQUEST:
            return self.verified_steps
        return max(0, len(self.step_sizes) - 1)

    @property
    def steps(self) -> int:
        return self.decode_steps + 1 if self.step_sizes else 0

    @property
    def tokens_per_s(self) -> float | None:
        return decode_rate(self.decode_tokens, self.decode_seconds)

    @property
    def step_seconds(self) -> float | None:
        return self.decode_seconds / self.decode_steps if self.decode_steps and self.decode_seconds > 0 else None

    @property
    def tokens_per_step(self) -> float | None:
        return self.decode_tokens / self.decode_steps if self.decode_steps else None

    @property
    def total_seconds(self) -> float | None:
        """Submission to last token: how long this engine's pane takes to fill."""
        return self.step_times[-1] - self.submitted_at if self.step_times and self.submitted_at is not None else None

    def until(self, seconds: float) -> "EngineTrace":
        """This trace as it stood `seconds` after its own submission (the replay of a sequential run)."""
        if self.submitted_at is None:
            return self
        cut = self.submitted_at + seconds
        n = sum(1 for t in self.step_times if t <= cut)
        out = EngineTrace(self.engine, submitted_at=self.submitted_at, count_steps_from=self.count_steps_from)
        out.step_sizes, out.step_times = self.step_sizes[:n], self.step_times[:n]
        out.token_ids = self.token_ids[:sum(out.step_sizes)]
        out.top_logprobs = self.top_logprobs[:len(out.token_ids)]
        out.finished = n == len(self.step_times) and self.finished
        out.finish_reason = self.finish_reason if out.finished else None
        return out

    def accepted_per_step(self) -> list[int]:
        """Drafted tokens each decode step accepted, read off the chunk sizes (size - 1; the first step is
        prefill and accepts nothing). Per chunk: a merged chunk shows as one step (the panes' colors only)."""
        return [0] + [size - 1 for size in self.step_sizes[1:]] if self.step_sizes else []


def pooled_decode_rate(traces) -> float | None:
    """Decode tokens/s over requests: their decode tokens over their decode seconds, summed (one trace:
    its tokens_per_s). Requests without a timed decode step count in neither sum."""
    timed = [t for t in traces if t.decode_seconds > 0]
    return decode_rate(sum(t.decode_tokens for t in timed), sum(t.decode_seconds for t in timed))


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)
