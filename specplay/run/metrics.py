"""One run's figures, each defined once: its label, its format, and whether it is per engine or for the
run. The CLI report, the page's table and the history CSV read a RunResult through here (the benchmarks
take the figures' labels and digits), so a figure reads the same everywhere.
Definitions are in `comparison.py` and the README.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from specplay.core.events import ROLES, SPECULATIVE

ENGINE, RUN, SPEC_ONLY = "engine", "run", "speculative"


@dataclass(frozen=True)
class Figure:
    key: str  # the RunResult field and JSON key (per engine or top level); the CSV column stem
    label: str
    fmt: str  # format spec for people
    scope: str  # ENGINE: one value per engine; SPEC_ONLY: the speculative engine's; RUN: one for the run
    scale: float = 1.0  # shown value = raw value * scale (e.g. seconds shown as ms)
    suffix: str = ""
    digits: int = 4  # rounding for the CSV and the benchmarks' JSON


FIGURES = (
    Figure("ttft_s", "time to first token (s)", ".3f", ENGINE),
    Figure("tokens_per_s", "decode tokens/s", ".1f", ENGINE, digits=2),
    Figure("tokens", "tokens", "d", ENGINE),
    Figure("steps", "steps", "d", ENGINE),
    Figure("tokens_per_step", "tokens per decode step", ".2f", ENGINE),
    Figure("step_seconds", "decode step (ms)", ".2f", ENGINE, scale=1000.0, digits=6),
    Figure("speedup", "speedup", ".2f", RUN, suffix="×", digits=3),
    Figure("tokens_per_step_ratio", "tokens per step, spec ÷ baseline", ".2f", RUN, suffix="×"),
    Figure("step_cost_ratio", "step time, spec ÷ baseline", ".2f", RUN, suffix="×"),
    Figure("acceptance_rate", "acceptance rate", ".1%", SPEC_ONLY),
    Figure("mean_acceptance_length", "mean acceptance length", ".2f", SPEC_ONLY, digits=3),
    # was "efficiency" (the JSON keeps that key too until the next release): vLLM's old "system efficiency"
    # meant something else, so the name says what it is
    Figure("speedup_per_acceptance_length", "speedup ÷ mean acceptance length", ".2f", SPEC_ONLY, digits=3),
)
BY_KEY = {f.key: f for f in FIGURES}


def value(result, figure: Figure, role: str = SPECULATIVE):
    """The raw value of `figure` in a RunResult (for `role` when per engine); None where it has none."""
    if figure.scope == ENGINE:
        return getattr(result.side(role), figure.key, None)
    return getattr(result, figure.key, None)


def fmt(raw, figure: Figure, none: str = "—") -> str:
    if raw is None or (isinstance(raw, float) and math.isnan(raw)):
        return none
    return format(raw * figure.scale if figure.scale != 1.0 else raw, figure.fmt) + figure.suffix


def table_rows(result, keys: tuple[str, ...] | None = None) -> list[tuple[str, str, str]]:
    """(label, baseline, speculative) per figure: the CLI report and the page's table."""
    rows = []
    for figure in (BY_KEY[k] for k in keys) if keys else FIGURES:
        if figure.scope == ENGINE:
            cells = [fmt(value(result, figure, role), figure) for role in ROLES]
        else:
            cells = ["", fmt(value(result, figure), figure)]
        rows.append((figure.label, *cells))
    return rows


# The 95% intervals of the speedup and its factors (specplay.run.noise): RunResult property and JSON key, label
INTERVAL_FIGURES = (
    ("speedup_interval", "speedup, 95% interval"),
    ("tokens_per_step_ratio_interval", "tokens per step ratio, 95% interval"),
    ("step_cost_ratio_interval", "step time ratio, 95% interval"),
)


def interval_rows(result) -> list[tuple[str, str, str]]:
    """(label, "", "low–high×") per interval, "—" where the run has too few steps: the CLI report's rows
    under the figures (the page's too)."""
    rows = []
    for key, label in INTERVAL_FIGURES:
        interval = getattr(result, key, None)
        rows.append((label, "", str(interval) if interval is not None else "—"))
    return rows


def flat_row(result) -> dict:
    """Every figure of a RunResult as a number, one column each (per-engine figures suffixed
    _baseline/_speculative): the history CSV's row."""
    row = {}
    for column, figure, role in figure_columns(FIGURES):
        raw = value(result, figure, role or SPECULATIVE) if result is not None else None
        row[column] = rounded(raw, figure)
    return row


def figure_columns(figures) -> list[tuple[str, Figure, str | None]]:
    """(column, figure, role or None) for each figure, per-engine ones once per engine."""
    return [(f.key if role is None else f"{f.key}_{role}", f, role)
            for f in figures for role in (ROLES if f.scope == ENGINE else (None,))]


FLAT_COLUMNS = tuple(column for column, _, _ in figure_columns(FIGURES))


# -- a bench row (playground.bench): the figures above pooled over a batch of requests, plus the batch's own.
# Pooled: sums over the batch's requests (decode tokens / decode seconds, ...), so speedup is still exactly
# tokens_per_step_ratio / step_cost_ratio. Per-engine columns are suffixed _baseline/_speculative as above.
BENCH_FIGURES = (
    BY_KEY["speedup"], BY_KEY["tokens_per_step_ratio"], BY_KEY["step_cost_ratio"],
    BY_KEY["acceptance_rate"], BY_KEY["mean_acceptance_length"],
    Figure("predicted_speedup", "predicted speedup (verify = one pass)", ".2f", RUN, suffix="×", digits=3),
    # specplay.bench.passes: the speculative step as a verify pass (t_b) plus the method's draft passes
    Figure("predicted_speedup_measured", "predicted speedup (measured pass times)", ".2f", RUN, suffix="×", digits=3),
    Figure("draft_pass_cost", "one draft pass, in baseline steps", ".2f", RUN, digits=3),
    Figure("throughput_ratio", "batch throughput, spec ÷ baseline", ".2f", RUN, suffix="×", digits=3),
    BY_KEY["tokens_per_s"], BY_KEY["tokens_per_step"], BY_KEY["step_seconds"],
    Figure("throughput", "batch output tokens/s", ".1f", ENGINE, digits=2),
    Figure("latency_p50_s", "request latency p50 (s)", ".2f", ENGINE, digits=3),
    Figure("latency_p90_s", "request latency p90 (s)", ".2f", ENGINE, digits=3),
    Figure("latency_p99_s", "request latency p99 (s)", ".2f", ENGINE, digits=3),
    # vllm bench serve's per-request metrics (specplay.bench.latency): TTFT, TPOT = (e2e − TTFT)/(tokens − 1),
    # ITL = every gap between two streamed chunks
    *(Figure(f"{m}_{q}_s", f"{label} {q} (ms)", ".1f", ENGINE, scale=1000.0, digits=6)
      for m, label in (("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL")) for q in ("p50", "p90", "p99")),
    Figure("identical", "identical outputs at T=0 (requests)", "d", RUN),
)


def bench_columns(figures=BENCH_FIGURES) -> list[tuple[str, Figure, str | None]]:
    """(column, figure, role or None) for each figure of a bench row, per-engine ones once per engine."""
    return figure_columns(figures)


def rounded(raw, figure: Figure):
    """The stored value: floats rounded to the figure's digits (the CSV and JSON)."""
    return round(raw, figure.digits) if isinstance(raw, float) else raw
