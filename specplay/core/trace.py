"""One engine's stream in one run, as plain data: token ids, text, chunk sizes and arrival times, and the
timings derived from them (definitions in specplay.run.comparison and the README)."""

from __future__ import annotations

from dataclasses import dataclass, field

from specplay.core.events import StepEvent


@dataclass
class EngineTrace:
    """Everything one engine streamed in one run."""

    engine: str
    token_ids: list[int] = field(default_factory=list)
    text: str = ""
    step_sizes: list[int] = field(default_factory=list)  # tokens per streamed step
    step_times: list[float] = field(default_factory=list)
    submitted_at: float | None = None
    finished: bool = False
    finish_reason: str | None = None

    def add(self, event: StepEvent) -> None:
        self.submitted_at = event.submitted_at
        if event.token_ids:
            self.token_ids.extend(event.token_ids)
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
    def decode_steps(self) -> int:
        """Steps after the first (prefill) one."""
        return max(0, len(self.step_sizes) - 1)

    @property
    def decode_tokens(self) -> int:
        """Tokens after the first step's (prefill's): what the decode rate counts."""
        return len(self.token_ids) - self.step_sizes[0] if self.step_sizes else 0

    @property
    def tokens_per_s(self) -> float | None:
        return pooled_decode_rate([self])

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
        out = EngineTrace(self.engine, submitted_at=self.submitted_at)
        out.step_sizes, out.step_times = self.step_sizes[:n], self.step_times[:n]
        out.token_ids = self.token_ids[:sum(out.step_sizes)]
        out.finished = n == len(self.step_times) and self.finished
        out.finish_reason = self.finish_reason if out.finished else None
        return out

    def accepted_per_step(self) -> list[int]:
        """Drafted tokens each decode step accepted, read off the chunk sizes (size - 1; the first step is
        prefill and accepts nothing). Exact with vLLM's DELTA streaming, one chunk per step."""
        return [0] + [size - 1 for size in self.step_sizes[1:]] if self.step_sizes else []

    def as_dict(self) -> dict:
        return {
            "text": self.text,
            "token_ids": list(self.token_ids),
            "ttft_s": _round(self.ttft_s),
            "tokens_per_s": _round(self.tokens_per_s, 2),
            "steps": len(self.step_sizes),
            "step_sizes": list(self.step_sizes),
            "step_seconds": _round(self.step_seconds, 6),
            "tokens_per_step": _round(self.tokens_per_step, 4),
            "finish_reason": self.finish_reason,
        }


def pooled_decode_rate(traces) -> float | None:
    """Decode tokens/s over requests: their decode tokens over their decode seconds, summed (one trace:
    its tokens_per_s). Requests without a timed decode step count in neither sum."""
    timed = [t for t in traces if t.decode_seconds > 0]
    seconds = sum(t.decode_seconds for t in timed)
    return sum(t.decode_tokens for t in timed) / seconds if seconds > 0 else None


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)
