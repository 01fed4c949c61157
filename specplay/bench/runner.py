"""The bench lab's runner: where speculation pays, measured over workloads × temperature × concurrency × k
(× synthetic acceptance), one row per setting, on one engine pair. No Gradio, no vLLM: the engines are
reached through EnginePair only.

Each engine is measured alone: the baseline's batch, then the speculative one's (`EnginePair.run_batch`).
The baseline doesn't depend on k or acceptance, so it is measured once per (workload, temperature,
concurrency) and reused; another k (or acceptance) restarts only the speculative engine
(`swap_speculative`, which reuses the compile cache). Figures are pooled over the batch's requests
(sum of decode tokens / sum of decode seconds, ...), so speedup = tokens_per_step_ratio / step_cost_ratio
exactly, as for a single run.
"""

from __future__ import annotations

import dataclasses
import datetime
import itertools
import math
import threading
from dataclasses import dataclass
from typing import Generator, Iterator

from specplay.run import metrics, whatif
from specplay.bench.advice import advise
from specplay.bench.latency import latency_figures, poisson_arrivals, rate_sentences, vllm_bench_commands
from specplay.bench import context, schedule
from specplay.bench.passes import measured_prediction, preset_draft_passes
from specplay.bench.report import SETTING_KEYS, BenchReport, BenchRow, Environment
from specplay.bench.vllm_format import parse_goodput, serving
from specplay.bench.workloads import WorkloadError
from specplay.core.events import BASELINE, SPECULATIVE, GenerationRequest
from specplay.core.trace import pooled_decode_rate
from specplay.engine.base import engines_json
from specplay.presets.catalog import Preset, engine_settings
from specplay.bench.prompts import (  # noqa: F401 (load_prompts, TOKEN_IDS: the CLI's and tests' import path)
    TOKEN_IDS, BenchError, load_prompts, named_workloads,
)
from specplay.bench.settings import MAX_RUNS, BenchSettings, check  # noqa: F401 (the CLI's and tests' import path)

WARMUP_TOKENS = 8
# A short prompt of its own for warm-ups, so they leave nothing of a measured prompt in the prefix cache.
WARMUP_TEXT = "Count from one to twenty."
WARMUP_IDS = tuple(range(2000, 2064))


@dataclass(frozen=True)
class Variant:
    """One speculative engine to load: k, and for synthetic acceptance the per-draft acceptance a."""

    k: int
    acceptance: float | None = None

    @property
    def label(self) -> str:
        return f"k={self.k}" + (f", a={self.acceptance:g}" if self.acceptance is not None else "")


@dataclass(frozen=True)
class Setting:
    workload: str
    temperature: float
    concurrency: int
    k: int
    acceptance: float | None = None
    request_rate: float | None = None  # None: closed loop (concurrency in flight)

    @property
    def variant(self) -> Variant:
        return Variant(self.k, self.acceptance)


@dataclass(frozen=True)
class Plan:
    variants: tuple[Variant, ...]  # in run order: the loaded one first, so it needs no restart
    settings: tuple[Setting, ...]  # one row each, in run order
    baseline_batches: int  # every run's
    restarts: int  # speculative engine starts (the restore at the end included)
    runs: int = 1  # measurements of each setting (BenchSettings.num_runs)

    @property
    def batches(self) -> int:
        """Measured batches: the baselines' and each setting's, every run."""
        return self.baseline_batches + len(self.settings) * self.runs

    @property
    def units(self) -> int:
        """Progress units: one per measured batch and one per engine restart."""
        return self.batches + self.restarts


@dataclass(frozen=True)
class Progress:
    done: int
    total: int
    message: str
    row: BenchRow | None = None  # set when this step finished a row

    @property
    def fraction(self) -> float:
        return self.done / self.total if self.total else 1.0


# -- settings ---------------------------------------------------------------------------------------------
def is_synthetic(preset: Preset) -> bool:
    return preset.speculative_config.synthetic


def synthetic_rates(acceptance: float, k: int) -> list[float]:
    """Unconditional acceptance per draft position when each token is accepted with probability a given
    the ones before it: a, a², a³, ... (the dummy presets' 0.7, 0.49, 0.343)."""
    return [round(acceptance ** (i + 1), 6) for i in range(k)]


def predicted_speedup(acceptance: float, k: int) -> float:
    """Tokens per step expected from the rates, 1 + Σ a^(i+1): the speedup if a verify step cost exactly
    one plain forward pass and drafting were free (specplay.run.whatif's model, c = 0: the one place)."""
    return whatif.predicted_speedup(synthetic_rates(acceptance, k), k)


def loaded_variant(preset: Preset) -> Variant:
    rates = preset.speculative_config.synthetic_acceptance_rates if is_synthetic(preset) else None
    return Variant(preset.num_speculative_tokens, float(rates[0]) if rates else None)


def variant_preset(preset: Preset, variant: Variant) -> Preset:
    """A copy of the preset whose speculative_config has this k (and synthetic rates)."""
    if variant == loaded_variant(preset):
        return preset
    rates = {} if variant.acceptance is None else {"synthetic_acceptance_rates": synthetic_rates(variant.acceptance,
                                                                                                  variant.k)}
    spec = preset.speculative_config.replace(num_speculative_tokens=variant.k, **rates)
    return dataclasses.replace(preset, speculative_config=spec)


def make_plan(settings: BenchSettings, preset: Preset, workloads: list[str], restore: bool = False) -> Plan:
    """What runs, in order. The baseline batches count once per (workload, temperature, concurrency)."""
    check(settings, preset)
    loaded = loaded_variant(preset)
    ks = tuple(dict.fromkeys(settings.k)) or (loaded.k,)
    accs = (tuple(dict.fromkeys(settings.acceptance)) or (loaded.acceptance,)) if loaded.acceptance is not None else (None,)
    variants = [Variant(k, a) for k in ks for a in accs]
    variants.sort(key=lambda v: v != loaded)  # stable: the loaded one first, the rest as given
    temps, concs = tuple(dict.fromkeys(settings.temperature)), tuple(dict.fromkeys(settings.concurrency))
    loops = [(c, None) for c in concs] + [(settings.n, r) for r in dict.fromkeys(settings.request_rate)]
    rows = tuple(Setting(w, t, c, v.k, v.acceptance, r)
                 for v in variants for w, t, (c, r) in itertools.product(workloads, temps, loops))
    restarts = sum(v != loaded for v in variants)
    restarts += 1 if restore and variants[-1] != loaded else 0
    runs = settings.num_runs
    return Plan(tuple(variants), rows, len(workloads) * len(temps) * len(loops) * runs, restarts, runs)


# -- figures of a batch -------------------------------------------------------------------------------------
def engine_figures(batch) -> dict:
    """One engine's pooled figures over a BatchResult: decode rate, tokens per step and step time as sums
    over requests (so rate = tokens per step / step time exactly), the batch's throughput and latencies."""
    traces = [t for t in batch.traces if t.decode_seconds > 0]  # pooled_decode_rate's requests
    decode_tokens = sum(t.decode_tokens for t in traces)
    seconds = sum(t.decode_seconds for t in traces)
    steps = sum(t.decode_steps for t in traces)
    tokens = sum(len(t.token_ids) for t in batch.traces)
    return {
        "tokens_per_s": pooled_decode_rate(batch.traces),
        "tokens_per_step": decode_tokens / steps if steps else None,
        "step_seconds": seconds / steps if steps and seconds > 0 else None,
        "throughput": tokens / batch.wall_seconds if batch.wall_seconds > 0 else None,
        **latency_figures(batch.traces),  # TTFT, TPOT, ITL, end to end at p50/p90/p99 (vllm bench serve's)
        "tokens": tokens,
    }


def _ratio(a, b):
    return a / b if a is not None and b else None


def bench_row(setting: Setting, baseline, speculative, synthetic: bool = False, passes: int | None = None,
              goodput: dict[str, float] | None = None) -> BenchRow:
    """The row of one setting from its two BatchResults (baseline and speculative); `passes`: the draft
    passes of one speculative step (`passes.draft_passes`), for the prediction from measured times."""
    figs = {BASELINE: engine_figures(baseline), SPECULATIVE: engine_figures(speculative)}
    b, s, c = figs[BASELINE], figs[SPECULATIVE], speculative.counters
    same = None
    if setting.temperature == 0 and not synthetic:  # synthetic acceptance keeps random drafts: no identity
        same = sum(x.token_ids == y.token_ids for x, y in zip(baseline.traces, speculative.traces))
    predicted = predicted_speedup(setting.acceptance, setting.k) if setting.acceptance is not None else None
    raw = {
        "speedup": _ratio(s["tokens_per_s"], b["tokens_per_s"]),
        "tokens_per_step_ratio": _ratio(s["tokens_per_step"], b["tokens_per_step"]),
        "step_cost_ratio": _ratio(s["step_seconds"], b["step_seconds"]),
        "acceptance_rate": c.acceptance_rate,
        "mean_acceptance_length": c.mean_acceptance_length,
        "predicted_speedup": predicted,
        # tokens a step yields: the synthetic acceptance's expectation where there is one, else measured
        **measured_prediction(b["step_seconds"], s["step_seconds"], passes,
                              predicted if predicted is not None else c.mean_acceptance_length),
        "throughput_ratio": _ratio(s["throughput"], b["throughput"]),
        "identical": same,
    }
    run_figures = {column: metrics.rounded(raw[figure.key], figure)
                   for column, figure, role in metrics.bench_columns() if role is None}
    engines = {role: {figure.key: metrics.rounded(figs[role][figure.key], figure)
                      for _, figure, r in metrics.bench_columns() if r == role} for role in (BASELINE, SPECULATIVE)}
    rate = setting.request_rate
    return BenchRow(
        workload=setting.workload, temperature=setting.temperature, concurrency=setting.concurrency, k=setting.k,
        acceptance=setting.acceptance,
        request_rate="inf" if rate is not None and math.isinf(rate) else rate,  # JSON has no infinity
        requests=len(speculative.traces), num_drafts=c.num_drafts, num_draft_tokens=c.num_draft_tokens,
        num_accepted=c.num_accepted_tokens, accepted_per_position=tuple(c.accepted_per_position),
        drafted_per_position=c.drafted_per_position,
        acceptance_source=getattr(speculative, "counters_source", None), draft_passes=passes, **run_figures,
        tokens_baseline=b["tokens"], tokens_speculative=s["tokens"], engines=engines,
        serving=serving(baseline, speculative, goodput))


# -- the run ------------------------------------------------------------------------------------------------
def _where(setting: Setting) -> str:
    return f"{setting.workload} · T={setting.temperature:g} · " + (
        f"c={setting.concurrency}" if setting.request_rate is None else f"{setting.request_rate:g} req/s")


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class BenchRun:
    """A bench on a started pair. Iterate `run()` for progress (rows as they finish); `result()` any time."""

    def __init__(self, pair, preset: Preset, settings: BenchSettings, prompts: dict[str, list], hardware,
                 cancel: threading.Event | None = None, restore: bool = False, warmup: bool = True):
        self.pair, self.preset, self.settings, self.prompts = pair, preset, settings, prompts
        self.hardware, self.cancel, self.restore, self.warmup = hardware, cancel, restore, warmup
        self.plan = make_plan(settings, preset, list(prompts), restore)
        if self.plan.restarts and not getattr(pair, "can_swap_speculative", True):
            raise BenchError("k and acceptance: the speculative server runs what it was started with; sweep them "
                             "with one server per setting (specplay launch), or on in-process engines")
        self.max_tokens = settings.max_tokens or preset.default_max_tokens
        self.rows: list[BenchRow] = []
        self.engines: dict[str, dict] = {}  # variant label -> pair.engine_info() (as JSON) while it was loaded
        self.started, self.finished = _now(), None
        self._loaded = loaded_variant(preset)
        self._warm: set = set()
        self._done = 0  # progress units done (run() counts them)

    @property
    def cancelled(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()

    def run(self) -> Iterator[Progress]:
        plan, self._done = self.plan, 0
        baselines: dict[tuple, object] = {}
        original = loaded_variant(self.preset)
        try:
            for variant in plan.variants:
                if self.cancelled:
                    break
                if variant != self._loaded:
                    yield Progress(self._done, plan.units, f"loading the speculative engine with {variant.label}")
                    self._swap(variant)
                    self._done += 1
                self.engines[variant.label] = engines_json(self.pair.engine_info())  # the report keeps JSON
                for setting in (s for s in plan.settings if s.variant == variant):
                    row = yield from self._cell(setting, baselines)
                    if row is not None:  # None: stopped before one run of it was measured
                        self.rows.append(row)
                        yield Progress(self._done, plan.units, f"done: speculative {variant.label} · {_where(setting)}",
                                       row=row)
                    if self.cancelled or row is None:
                        break
            if self.restore and self._loaded != original:
                yield Progress(self._done, plan.units, "loading the preset's own speculative engine back")
                self._swap(original)
                self._done += 1
        finally:
            if self.restore and self._loaded != original:  # stopped or failed half-way: put it back anyway
                self._swap(original)
            self.finished = _now()
        yield Progress(plan.units if not self.cancelled else self._done, plan.units,
                       "stopped" if self.cancelled else "finished")

    def _cell(self, setting: Setting, baselines: dict) -> Generator[Progress, None, BenchRow | None]:
        """One setting measured plan.runs times: each run its own baseline batch (shared by every k of the same
        workload, temperature and loop) and speculative batch, so each run's speedup compares engines measured
        back to back; the row of the runs (BenchRow.of_runs), None when stopped before the first."""
        key = (setting.workload, setting.temperature, setting.concurrency, setting.request_rate)
        runs, n, units = [], self.plan.runs, self.plan.units
        for i in range(n):
            where = _where(setting) + (f" · run {i + 1}/{n}" if n > 1 else "")
            if (key, i) not in baselines:
                yield Progress(self._done, units, f"baseline · {where}")
                baselines[key, i] = self._measure(BASELINE, setting)
                self._done += 1
            yield Progress(self._done, units, f"speculative {setting.variant.label} · {where}")
            spec = self._measure(SPECULATIVE, setting)
            if self.cancelled or spec.cancelled or baselines[key, i].cancelled:
                break
            self._done += 1
            runs.append(bench_row(setting, baselines[key, i], spec, synthetic=is_synthetic(self.preset),
                                  passes=preset_draft_passes(self.preset.speculative_config, setting.k),
                                  goodput=parse_goodput(self.settings.goodput)))
        return BenchRow.of_runs(runs) if runs else None

    def _swap(self, variant: Variant) -> None:
        preset = variant_preset(self.preset, variant)
        _, speculative = engine_settings(preset, self.hardware)
        self.pair.swap_speculative(speculative, tag=preset)
        self._loaded = variant

    def _requests(self, setting: Setting) -> list[GenerationRequest]:
        """The workload's prompts, cycled up to the concurrency when it is higher, so that c are in flight."""
        prompts = self.prompts[setting.workload]
        count = max(len(prompts), setting.concurrency)
        return [p.request(max_tokens=self.max_tokens, temperature=setting.temperature,
                          seed=self.settings.seed + i, ignore_eos=self.preset.ignore_eos)
                for i, p in zip(range(count), itertools.cycle(prompts))]

    def _measure(self, role: str, setting: Setting):
        c = setting.concurrency
        engine_key = (role, id(self.pair.engines[role]), c)
        if self.warmup and engine_key not in self._warm:  # first batch of this shape on this engine
            ids = WARMUP_IDS if self.preset.prompt_input == "token_ids" else None
            warm = GenerationRequest(prompt=WARMUP_TEXT, prompt_token_ids=ids, max_tokens=WARMUP_TOKENS,
                                     ignore_eos=True)
            self.pair.run_batch(role, [warm] * c, c, cancel=self.cancel)
            self._warm.add(engine_key)
        requests = self._requests(setting)
        if setting.request_rate is None:
            return self.pair.run_batch(role, requests, c, cancel=self.cancel)
        arrivals = poisson_arrivals(len(requests), setting.request_rate, self.settings.seed)
        return self.pair.run_batch(role, requests, c, cancel=self.cancel, arrival_times=arrivals)

    def result(self, command: tuple[str, ...] = ()) -> BenchReport:
        """Everything the bench measured, typed (bench.report); `command`: the line that ran it."""
        from specplay.presets.engines import serve_model

        spec_info = next(iter(self.engines.values()), {}).get(SPECULATIVE, {})
        settings = dataclasses.replace(self.settings, workloads=tuple(self.prompts), max_tokens=self.max_tokens)
        return BenchReport(
            preset=self.preset.name, method=self.preset.method, kind=self.preset.kind,
            model=serve_model(self.preset.target.model), loaded_k=self.preset.num_speculative_tokens,
            synthetic=is_synthetic(self.preset),
            settings=dataclasses.asdict(settings),
            environment=Environment(machine=self.hardware.describe(), device=self.hardware.device,
                                    engines=dict(self.engines)),
            started_utc=self.started, finished_utc=self.finished, cancelled=self.cancelled, command=tuple(command),
            rows=tuple(self.rows),
            advice=tuple(advise(self.rows, self.preset.num_speculative_tokens, self.preset.kind,
                                spec_info.get("async_scheduling"))),
            rate_advice=tuple(rate_sentences(self.rows)),
            # num_speculative_tokens_per_batch_size from k × concurrency, with the runner caveat for this kind
            dynamic_k=schedule.dynamic_k_report(self.rows, self.preset.kind),
            # a line per workload: the files', and the dataset categories' and context buckets' (bench.vllm_datasets)
            vllm_bench_serve=vllm_bench_commands(self.preset, self.settings, self.max_tokens,
                                                 named_workloads(self.settings, self.preset), tuple(self.prompts)),
            published=self.preset.published,
        )
