"""The bench's typed report (in the manner of GuideLLM's GenerativeBenchmarksReport): its rows, advice,
settings and environment as frozen pydantic models, whose dump is bench.json and whose `model_validate` reads
it back (`save` / `load`; the CLI's `--replot` and the page read it; nothing reads a bench result as a loose
dict).

The JSON keeps the bench's flat rows (one column per figure of `run.metrics.BENCH_FIGURES`, per-engine ones
suffixed _baseline/_speculative, as the CSV), plus each row's `serving`: per engine, the figures in
`vllm bench serve --save-result`'s keys and units (bench.vllm_format). Files of earlier versions load too
(the environment at the top level, `command` as one string, no `serving`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, model_serializer, model_validator

from specplay.bench.advice import Advice
from specplay.bench.schedule import DynamicKReport
from specplay.core.events import BASELINE, ROLES, SPECULATIVE, position_rates
from specplay.core.reading import BENCH_MAX_BYTES, UnreadableInput, first_error, load_json
from specplay.presets.schema import Published
from specplay.run import metrics

# 2: environment nested, command a list, rows carry `serving` (vllm bench serve's keys); rows measured several
# times (--num-runs) carry `runs` and their speedup's spread (an earlier file has none: one run each)
SCHEMA_VERSION = 2
SETTING_KEYS = ("workload", "temperature", "concurrency", "k", "acceptance", "request_rate")
# a row's figures for the run (not per engine): its declared fields, the same keys as metrics.BENCH_FIGURES'
RUN_FIGURES = tuple(column for column, _, role in metrics.bench_columns() if role is None)


class RunFigures(BaseModel):
    """One run of a setting measured several times (--num-runs): its speedup and what makes it, and each
    engine's decode rate. bench.json's row keeps one per run under `runs`."""

    model_config = ConfigDict(frozen=True, extra="ignore")
    speedup: float | None = None
    tokens_per_step_ratio: float | None = None
    step_cost_ratio: float | None = None
    acceptance_rate: float | None = None
    mean_acceptance_length: float | None = None
    throughput_ratio: float | None = None
    tokens_per_s_baseline: float | None = None
    tokens_per_s_speculative: float | None = None

    @classmethod
    def of(cls, row: "BenchRow") -> "RunFigures":
        return cls(**{key: getattr(row, key) for key in cls.model_fields if hasattr(row, key)},
                   tokens_per_s_baseline=row.engine("tokens_per_s", BASELINE),
                   tokens_per_s_speculative=row.engine("tokens_per_s", SPECULATIVE))


class BenchRow(BaseModel):
    """One setting's measurement: the setting, the speculative engine's counters, the run figures, each
    engine's figures ({role: {figure key: value}}, keys as metrics.BENCH_FIGURES) and its serving figures
    ({role: {vllm bench serve key: value}}). Its dump is bench.json's flat row (one column per figure, per
    engine key_role, as the CSV); `model_validate` reads one back (a figure missing from an older file: None)."""

    model_config = ConfigDict(frozen=True, extra="ignore")
    workload: str
    temperature: float
    concurrency: int
    k: int
    acceptance: float | None = None
    request_rate: float | str | None = None  # None: closed loop; "inf": all at once (vllm bench serve's JSON)
    requests: int = 0
    num_drafts: int = 0
    num_draft_tokens: int = 0
    num_accepted: int = 0
    accepted_per_position: tuple[int, ...] = ()
    drafted_per_position: tuple[int, ...] | None = None  # None: vLLM didn't say (core.events.position_rates)
    acceptance_source: str | None = None
    draft_passes: int | None = None
    speedup: float | None = None
    tokens_per_step_ratio: float | None = None
    step_cost_ratio: float | None = None
    acceptance_rate: float | None = None
    mean_acceptance_length: float | None = None
    predicted_speedup: float | None = None
    predicted_speedup_measured: float | None = None
    draft_pass_cost: float | None = None
    throughput_ratio: float | None = None
    identical: int | None = None
    tokens_baseline: int = 0
    tokens_speculative: int = 0
    engines: dict[str, dict[str, float | None]] = {}
    serving: dict[str, dict[str, Any]] = {}
    runs: tuple[RunFigures, ...] = ()  # each run's figures when measured several times (--num-runs); else none

    @classmethod
    def of_runs(cls, rows: list["BenchRow"]) -> "BenchRow":
        """One setting measured len(rows) times as one row: the median run's (by speedup; the lower middle
        of an even count) with every run's figures in `runs`, so the spread is kept; a lone run as it is."""
        if len(rows) == 1:
            return rows[0]
        ranked = sorted(rows, key=lambda r: (r.speedup is None, r.speedup or 0.0))
        timed = [r for r in ranked if r.speedup is not None] or ranked
        return timed[(len(timed) - 1) // 2].model_copy(update={"runs": tuple(RunFigures.of(r) for r in rows)})

    @property
    def speedups(self) -> list[float]:
        """The speedup's measurements: one per run (--num-runs), else the row's own; none where untimed."""
        values = [r.speedup for r in self.runs] if self.runs else [self.speedup]
        return [float(v) for v in values if v]

    @model_validator(mode="before")
    @classmethod
    def _from_flat_row(cls, data):
        """bench.json's flat row: the per-engine columns gathered into `engines`; an empty value (None) is
        the field's default (an older file's missing figure)."""
        if not isinstance(data, dict) or "engines" in data:
            return data
        engines: dict[str, dict] = {role: {} for role in ROLES}
        for column, figure, role in metrics.bench_columns():
            if role is not None:
                engines[role][figure.key] = data.get(column)
        return {**{k: v for k, v in data.items() if v is not None}, "engines": engines,
                "serving": data.get("serving") or {}}

    @model_serializer(mode="plain")
    def _as_flat_row(self) -> dict:
        """The flat row of bench.json and the CSV: every figure one column (per engine: key_role)."""
        out = {key: getattr(self, key) for key in SETTING_KEYS}
        out.update(requests=self.requests, num_drafts=self.num_drafts, num_draft_tokens=self.num_draft_tokens,
                   num_accepted=self.num_accepted, accepted_per_position=list(self.accepted_per_position),
                   drafted_per_position=(list(self.drafted_per_position)
                                         if self.drafted_per_position is not None else None),
                   acceptance_source=self.acceptance_source, draft_passes=self.draft_passes)
        for column, figure, role in metrics.bench_columns():
            out[column] = getattr(self, column) if role is None else self.engine(figure.key, role)
        out.update(tokens_baseline=self.tokens_baseline, tokens_speculative=self.tokens_speculative)
        if self.serving:
            out["serving"] = {role: dict(values) for role, values in self.serving.items()}
        if self.runs:  # the spread of the repeats, and each run (read back into `runs`)
            out.update(num_runs=len(self.runs), speedup_min=min(self.speedups, default=None),
                       speedup_max=max(self.speedups, default=None), runs=[r.model_dump() for r in self.runs])
        return out

    @property
    def setting(self) -> tuple:
        return tuple(getattr(self, key) for key in SETTING_KEYS)

    def engine(self, key: str, role: str) -> float | None:
        return self.engines.get(role, {}).get(key)

    def accepted_shares(self) -> list[float | None]:
        """Per draft position, the share accepted of the drafts that reached it (see `accepted_shares`)."""
        return accepted_shares(self.model_dump())


class RateAdvice(BaseModel):
    """Open-loop rows of one (workload, temperature, k, acceptance): where speculation stops paying."""

    model_config = ConfigDict(frozen=True)
    workload: str
    temperature: float
    k: int
    acceptance: float | None
    stops_paying_at: float | str | None
    sentence: str


class Environment(BaseModel):
    """Where the bench ran: the machine, its device, and each speculative variant's engines as vLLM
    resolved them ({variant label: {role: engine info as JSON}}, engine.base.engines_json)."""

    model_config = ConfigDict(frozen=True)
    machine: str = ""
    device: str = ""
    engines: dict[str, dict[str, dict[str, Any]]] = {}


class BenchReport(BaseModel):
    """The bench's report. Its dump (`model_dump`, what `save` writes) is bench.json; `model_validate` (and
    `load`) reads one back, this version's or an earlier one's (environment at the top level, `command` one
    string, no `serving`, no `kind`)."""

    model_config = ConfigDict(frozen=True, extra="ignore")
    preset: str
    method: str | None = None  # vLLM's, as the preset names it
    kind: str | None = None  # the method table's (presets.methods; PARD: "pard"), which the advice reads
    model: str | None = None  # the target as serve lines name it (vllm bench serve's model_id)
    loaded_k: int | None = None
    synthetic: bool = False
    settings: dict[str, Any] = {}  # BenchSettings as run (workload names, max tokens)
    environment: Environment = Environment()
    started_utc: str | None = None
    finished_utc: str | None = None
    cancelled: bool = False
    command: tuple[str, ...] = ()  # the command line(s) that measured it (several after a merge)
    rows: tuple[BenchRow, ...] = ()
    advice: tuple[Advice, ...] = ()
    rate_advice: tuple[RateAdvice, ...] = ()
    dynamic_k: DynamicKReport | None = None  # the k to run per batch size (bench.schedule)
    vllm_bench_serve: dict[str, dict[str, str]] = {}  # workload -> role -> line
    published: Published | None = None  # the preset's published acceptance, if it cites one

    @model_validator(mode="before")
    @classmethod
    def _from_older_versions(cls, data):
        if not isinstance(data, dict):
            return data
        data = {k: v for k, v in data.items() if v is not None or k in ("dynamic_k", "published")}
        if "environment" not in data:  # before schema 2: at the top level
            data["environment"] = {key: data.get(key) or default for key, default in
                                   (("machine", ""), ("device", ""), ("engines", {}))}
        if isinstance(data.get("command"), str):  # before schema 2: one line
            data["command"] = (data["command"],)
        data.setdefault("kind", data.get("method"))  # before kinds: the method was the kind
        return data

    @model_serializer(mode="wrap")
    def _as_bench_json(self, handler) -> dict:
        """Lists for tuples, "inf" for an infinite request rate: what JSON holds."""
        return _plain({**handler(self), "schema_version": SCHEMA_VERSION})

    def save(self, path, files: Mapping | None = None) -> Path:
        """bench.json at `path`, with the files written beside it (paths relative to its folder)."""
        path = Path(path)
        data = self.model_dump()
        if files is not None:
            data["files"] = dict(files)
        path.write_text(json.dumps(data, indent=1, allow_nan=False) + "\n")
        return path

    @classmethod
    def load(cls, path) -> "BenchReport":
        """A bench.json (or the folder holding one) back, read bounded (core.reading: a regular file of at most
        BENCH_MAX_BYTES, its nesting and numbers bounded); UnreadableInput, one line naming the file and why
        (or its first bad field), when it isn't one. The one reader of a bench result (--replot, diff)."""
        path = Path(path)
        path = path / "bench.json" if path.is_dir() else path
        data = load_json(path, BENCH_MAX_BYTES, str(path))
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise UnreadableInput(first_error(str(path), exc)) from None


def accepted_shares(row: Mapping) -> list[float | None]:
    """Per draft position of a flat row (bench.json's, the charts'), the share accepted: of the drafts that
    reached that position where the row has `drafted_per_position`, else of all drafts (`shares_exact`)."""
    return position_rates(row.get("accepted_per_position"), row.get("drafted_per_position"),
                          row.get("num_drafts") or 0)[0]


def shares_exact(row: Mapping) -> bool:
    """Whether `accepted_shares` divides by the drafts that reached each position (False: by all drafts,
    which reads later positions low where drafts stop short, as n-gram's do)."""
    return position_rates(row.get("accepted_per_position"), row.get("drafted_per_position"),
                          row.get("num_drafts") or 0)[1]


ALL_DRAFTS_NOTE = ("per-position drafted counts not reported (vLLM's /metrics page, or a vLLM before 0.32): "
                   "divided by all drafts, so positions after a short draft read low")


def _plain(value):
    """As JSON holds it: tuples as lists, and a request rate of inf as "inf" (JSON has no infinity; vllm
    bench serve writes "inf" too)."""
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
