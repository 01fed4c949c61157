"""The Bench tab's content without Gradio: its bounded choices, the visitor's picks checked into
BenchSettings, and what each step of a bench shows, keyed by output name (`bench_tab` maps the names onto
components). Visitors pick workloads by name from WORKLOADS only: nothing they send becomes a path.
"""

from __future__ import annotations

import pandas as pd

from specplay.bench import charts as bench_charts

from specplay.page import views
from specplay.bench.runner import BenchError, BenchSettings, Progress, is_synthetic, make_plan
from specplay.bench.outputs import markdown_table, table
from specplay.presets.catalog import Preset
from specplay.bench.workloads import WORKLOADS

K_CHOICES = (1, 2, 3, 4, 5, 6, 7, 8)
TEMPERATURE_CHOICES = (0.0, 0.5, 1.0)
CONCURRENCY_CHOICES = (1, 2, 4, 8, 16, 32)
ACCEPTANCE_CHOICES = (0.5, 0.7, 0.9)
N_MAX, MAX_TOKENS_MIN, MAX_TOKENS_MAX = 8, 8, 256
DEFAULT_N, DEFAULT_MAX_TOKENS = 2, 64
DEFAULT_WORKLOADS = ("code", "rewrite")
# A page bench holds the engines from everyone else: bounded in batches (and starts of the speculative engine)
MAX_BATCHES, MAX_RESTARTS = 48, 4
CHART_OUTPUTS = {f"bench_fig_{stem}": stem for stem in (*bench_charts.CHARTS, "predicted_vs_measured")}
OUTPUTS = ("bench_status", "bench_error", "bench_advice", "bench_table", *CHART_OUTPUTS, "bench_file",
           "bench_json", "bench_pngs", "bench_md")


def _pick(label: str, values, choices: tuple, cast) -> tuple:
    try:
        picked = tuple(sorted({cast(v) for v in values or ()}))
    except (TypeError, ValueError):
        raise BenchError(f"{label}: pick from the boxes offered") from None
    if any(v not in choices for v in picked):
        raise BenchError(f"{label}: pick from {', '.join(f'{c:g}' for c in choices)}")
    return picked


def settings_from_picks(preset: Preset, workloads, n, ks, temperatures, concurrency, acceptance, max_tokens) -> BenchSettings:
    """The visitor's picks as BenchSettings, or BenchError with a message to show."""
    names = tuple(w for w in WORKLOADS if w in set(workloads or ()))
    if set(workloads or ()) - set(names):
        raise BenchError("workloads: pick from the shipped workloads")
    token_ids = preset.prompt_input == "token_ids"
    if not names and not token_ids:
        raise BenchError("Pick at least one workload.")
    try:
        n, max_tokens = int(n), int(max_tokens)
    except (TypeError, ValueError):
        raise BenchError("n and max tokens must be whole numbers") from None
    if not 1 <= n <= N_MAX:
        raise BenchError(f"n: 1 to {N_MAX} prompts per workload on the page (the CLI takes more)")
    if not MAX_TOKENS_MIN <= max_tokens <= MAX_TOKENS_MAX:
        raise BenchError(f"max tokens: {MAX_TOKENS_MIN} to {MAX_TOKENS_MAX} on the page")
    ks = _pick("k", ks, K_CHOICES, int) or (preset.num_speculative_tokens,)
    accs = _pick("acceptance", acceptance, ACCEPTANCE_CHOICES, float)
    if accs and not is_synthetic(preset):
        raise BenchError(f"Acceptance is measured on {preset.name}; the acceptance boxes are for presets with "
                         "synthetic acceptance (dummy-*). Clear them to run.")
    settings = BenchSettings(
        preset=preset.name, workloads=() if token_ids else names, n=n, k=ks,
        temperature=_pick("temperature", temperatures, TEMPERATURE_CHOICES, float) or (0.0,),
        concurrency=_pick("concurrency", concurrency, CONCURRENCY_CHOICES, int) or (1,),
        acceptance=accs, max_tokens=max_tokens)
    plan = make_plan(settings, preset, ["token-ids"] if token_ids else list(names), restore=True)
    batches = plan.batches
    if batches > MAX_BATCHES or plan.restarts > MAX_RESTARTS:
        raise BenchError(f"That is {batches} batches and {plan.restarts} restarts of the speculative engine; the "
                         f"page runs at most {MAX_BATCHES} and {MAX_RESTARTS} (it holds the engines from everyone "
                         "else). Pick fewer values, or run `python -m specplay bench` for bigger sweeps.")
    return settings


def progress_html(step: Progress | None, note: str = "") -> str:
    if step is None:
        return '<div class="status idle">No bench yet: pick settings and press Run bench.</div>'
    pct = round(step.fraction * 100)
    return (f'<div class="status loading" id="bench-progress-line">{views.esc(step.message)} '
            f'<progress max="100" value="{pct}"></progress> {step.done}/{step.total} · {pct}%'
            f'{views.esc(note)}</div>')


def advice_html(advice: list) -> str:
    if not advice:
        return ""
    items = []
    for a in advice:
        where = f"{a.workload}, T={a.temperature:g}, c={a.concurrency}" + (
            f", a={a.acceptance:g}" if a.acceptance is not None else "")
        mark = "✓" if a.agree else "≠"
        items.append(f"<li><b>{views.esc(where)}</b> {mark} rule k={a.rule_k}, best k={a.best_k}: "
                     f"{views.esc(a.sentence)}</li>")
    return '<div class="explain"><b>Advice, measured</b><ul>' + "".join(items) + "</ul></div>"


def table_frame(rows: list) -> pd.DataFrame:
    headers, cells = table(rows)
    return pd.DataFrame(cells, columns=headers)


def chart_frame(rows: list, preset: Preset) -> dict:
    """Every chart slot: drawn from the rows so far (predicted vs measured only with synthetic acceptance)."""
    out = {}
    synthetic = any(r.acceptance is not None for r in rows)
    for name, stem in CHART_OUTPUTS.items():
        wanted = stem != "predicted_vs_measured" or synthetic
        out[name] = bench_charts.chart(stem, rows, preset.num_speculative_tokens) if wanted else None
    for fig in filter(None, out.values()):  # on the page's own background, light or dark (exports stay white)
        fig.update_layout(paper_bgcolor="rgba(0,0,0,0)", plot_bgcolor="rgba(0,0,0,0)", font_color="#7b8494")
    return out


def empty_frame() -> dict:
    return {"bench_status": progress_html(None), "bench_error": "", "bench_advice": "",
            "bench_table": table_frame([]), **{name: None for name in CHART_OUTPUTS}, "bench_file": None,
            "bench_json": None, "bench_pngs": None, "bench_md": ""}


def exports(written: dict, rows: list) -> dict:
    """The finished bench's downloads (write_results' files) and its table as Markdown."""
    headers, cells = table(rows)
    return {"bench_file": written["csv"], "bench_json": written["json"], "bench_pngs": written.get("png") or None,
            "bench_md": markdown_table(headers, cells)}
