"""`specplay diff A B` (issue 42, 4): two recordings (per prompt) or two bench results (per workload, k,
concurrency, ... row) side by side, for instance the same preset on vLLM 0.33 and 0.34, or two drafts: the
speedup and its two factors (tokens per step, step cost) on each side, the change, and whether it is beyond
noise by one rule (`beyond_noise`), so a script can fail a build when speculation got slower.

A recording is a file written by `compare --record` (or a folder of them, paired by prompt); a bench result
is a bench.json (or the folder holding one). Both are read through their one reader (`read_recording`,
`BenchReport.load`: bounded by core.reading) and their models only.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, computed_field

from specplay.bench.report import BenchReport, BenchRow
from specplay.bench.schedule import TIE_MARGIN
from specplay.run.noise import Interval
from specplay.run.recording import Recording, RecordingError, read_recording, recording_paths

# The figures compared, each with the direction that is better for speculation (+1: higher is better).
FIGURES = (("speedup", "speedup", 1), ("tokens_per_step_ratio", "tokens/step", 1),
           ("step_cost_ratio", "step cost", -1))
NOISE_RULE = (f"beyond noise: 95% intervals apart where both have one, else the larger less {TIE_MARGIN:.0%} above "
              "the smaller (bench tie margin)")


def beyond_noise(a: float | None, b: float | None, a_interval: Interval | None, b_interval: Interval | None) -> bool:
    """The one rule (NOISE_RULE): non-overlapping intervals where both sides have one, else the larger value
    less the bench's tie margin still above the smaller, as its dynamic-k rule takes a lone measurement's low
    end (bench.schedule); either way symmetric, so `diff A B` and `diff B A` agree on what moved."""
    if a is None or b is None or a <= 0 or b <= 0:
        return False
    if a_interval is not None and b_interval is not None:
        return a_interval.high < b_interval.low or b_interval.high < a_interval.low
    return max(a, b) * (1 - TIE_MARGIN) > min(a, b)


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True)


class Figure(_Model):
    """One figure of one row on both sides."""

    name: str
    a: float | None = None
    b: float | None = None
    a_interval: Interval | None = None
    b_interval: Interval | None = None
    change: float | None = None  # b ÷ a − 1
    beyond_noise: bool = False
    better: bool | None = None  # for speculation, where beyond noise

    @classmethod
    def of(cls, name: str, sign: int, a, b, a_interval=None, b_interval=None) -> "Figure":
        moved = beyond_noise(a, b, a_interval, b_interval)
        return cls(name=name, a=a, b=b, a_interval=a_interval, b_interval=b_interval,
                   change=b / a - 1 if a and b is not None else None, beyond_noise=moved,
                   better=((b - a) * sign > 0) if moved else None)


class DiffRow(_Model):
    key: str  # the prompt, or the bench row's setting
    figures: tuple[Figure, ...]
    note: str | None = None

    def figure(self, name: str) -> Figure:
        return next(f for f in self.figures if f.name == name)

    @computed_field
    @property
    def slower(self) -> bool:
        """Speculation's speedup fell beyond noise."""
        return self.figure("speedup").better is False

    @computed_field
    @property
    def moved(self) -> list[str]:
        """The factors beyond noise, each with its direction for speculation ("step cost worse")."""
        labels = dict((name, label) for name, label, _ in FIGURES)
        return [f"{labels[f.name]} {'better' if f.better else 'worse'}" for f in self.figures
                if f.beyond_noise and f.name != "speedup"]


class Side(_Model):
    path: str
    about: str  # what it is of: preset, vLLM, device, date


class Diff(_Model):
    kind: Literal["recordings", "bench"]
    a: Side
    b: Side
    rule: str = NOISE_RULE
    rows: tuple[DiffRow, ...] = ()
    only_a: tuple[str, ...] = ()  # keys measured on one side only
    only_b: tuple[str, ...] = ()

    @computed_field
    @property
    def slower(self) -> bool:
        return any(row.slower for row in self.rows)


def run_figures(recording: Recording) -> dict:
    run = recording.run
    return {name: (getattr(run, name), getattr(run, f"{name}_interval")) for name, _, _ in FIGURES}


def row_of(key: str, a: dict, b: dict, note: str | None = None) -> DiffRow:
    """A row from each side's {figure: (value, interval or None)}."""
    return DiffRow(key=key, note=note, figures=tuple(
        Figure.of(name, sign, a[name][0], b[name][0], a[name][1], b[name][1]) for name, _, sign in FIGURES))


def about_recording(recording: Recording) -> str:
    m = recording.made
    vllm = m.vllm("vLLM of the servers")
    dummy = ", dummy weights (acceptance synthetic)" if m.dummy_weights else ""
    return f"{m.preset}, {vllm}, {m.device_name}, {m.made_at:%Y-%m-%d %H:%M} UTC{dummy}"


def short(text: str, width: int = 40) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def prompt_label(recording: Recording) -> str:
    return short(recording.prompt) if recording.prompt is not None else short(recording.prompt_key)


def recordings_by_prompt(path) -> dict[str, Recording]:
    out: dict[str, tuple[Path, Recording]] = {}
    for file in recording_paths(path):
        recording = read_recording(file)
        if recording.prompt_key in out:
            raise RecordingError(f"{path}: {out[recording.prompt_key][0].name} and {file.name} record one prompt")
        out[recording.prompt_key] = (file, recording)
    if not out:
        raise RecordingError(f"{path}: no recordings (*.json) in it")
    return {key: recording for key, (_, recording) in out.items()}


def diff_recordings(a_path, b_path) -> Diff:
    """Two recordings (one row; a note where their prompts differ), or two folders paired by prompt."""
    a, b = recordings_by_prompt(a_path), recordings_by_prompt(b_path)
    sides = [Side(path=str(p), about="; ".join(sorted({about_recording(r) for r in side.values()})))
             for p, side in ((a_path, a), (b_path, b))]
    if not Path(a_path).is_dir() and not Path(b_path).is_dir():
        (ra,), (rb,) = a.values(), b.values()
        note = None if ra.prompt_key == rb.prompt_key else f"different prompts: B's is {prompt_label(rb)!r}"
        return Diff(kind="recordings", a=sides[0], b=sides[1],
                    rows=(row_of(prompt_label(ra), run_figures(ra), run_figures(rb), note),))
    rows = tuple(row_of(prompt_label(a[key]), run_figures(a[key]), run_figures(b[key])) for key in a if key in b)
    return Diff(kind="recordings", a=sides[0], b=sides[1], rows=rows,
                only_a=tuple(prompt_label(a[k]) for k in a if k not in b),
                only_b=tuple(prompt_label(b[k]) for k in b if k not in a))


def bench_path(path) -> Path:
    path = Path(path)
    return path / "bench.json" if path.is_dir() else path


def read_bench(path) -> BenchReport:
    """A bench result through its one reader (BenchReport.load: bounded); UnreadableInput (one line) if not one."""
    return BenchReport.load(bench_path(path))


def row_key(row: BenchRow) -> str:
    key = f"{row.workload} k={row.k} c={row.concurrency} T={row.temperature:g}"
    if row.acceptance is not None:
        key += f" acc={row.acceptance:g}"
    if row.request_rate is not None:
        key += f" rate={row.request_rate}"
    return key


def bench_figures(rows: list[BenchRow]) -> dict:
    """A setting's figures (no intervals in a bench row); several rows of one setting (repeats merged by
    --replot): their geometric mean, as the bench's dynamic-k rule takes them."""
    out = {}
    for name, _, _ in FIGURES:
        values = [v for v in (getattr(row, name) for row in rows) if v is not None and v > 0]
        out[name] = (math.exp(sum(map(math.log, values)) / len(values)) if values else None, None)
    return out


def by_setting(report: BenchReport) -> dict[tuple, list[BenchRow]]:
    out: dict[tuple, list[BenchRow]] = {}
    for row in report.rows:
        out.setdefault(row.setting, []).append(row)
    return out


def about_bench(report: BenchReport) -> str:
    env = report.environment
    when = f", {report.started_utc}" if report.started_utc else ""
    synthetic = ", synthetic acceptance" if report.synthetic else ""
    return f"{report.preset}, {env.machine or env.device or 'machine not stated'}{when}{synthetic}"


def diff_bench(a_path, b_path) -> Diff:
    """Two bench results, row by row of the same setting (workload, temperature, concurrency, k, ...)."""
    a, b = read_bench(a_path), read_bench(b_path)
    rows_a, rows_b = by_setting(a), by_setting(b)
    key = {s: row_key(rows[0]) for side in (rows_a, rows_b) for s, rows in side.items()}
    return Diff(kind="bench", a=Side(path=str(bench_path(a_path)), about=about_bench(a)),
                b=Side(path=str(bench_path(b_path)), about=about_bench(b)),
                rows=tuple(row_of(key[s], bench_figures(rows), bench_figures(rows_b[s]))
                           for s, rows in rows_a.items() if s in rows_b),
                only_a=tuple(key[s] for s in rows_a if s not in rows_b),
                only_b=tuple(key[s] for s in rows_b if s not in rows_a))


def is_bench(path) -> bool:
    path = Path(path)
    return (path / "bench.json").is_file() if path.is_dir() else path.name == "bench.json"


def diff(a_path, b_path) -> Diff:
    """Recordings or bench results, as the paths say (both the same kind); UnreadableInput (RecordingError
    for recordings) if not."""
    if is_bench(a_path) != is_bench(b_path):
        raise RecordingError(f"{a_path} and {b_path}: one is a bench result (bench.json), the other not")
    return diff_bench(a_path, b_path) if is_bench(a_path) else diff_recordings(a_path, b_path)
