"""Figures and tables of a run: pure functions from a Comparison (and telemetry samples) to plotly figures
and pandas DataFrames. Called several times a second while streaming, so they stay cheap: plain lists,
no per-token work beyond one pass.
"""

from __future__ import annotations

import html

import pandas as pd
import plotly.graph_objects as go

from specplay.run import metrics
from specplay.run.comparison import Comparison, EngineTrace
from specplay.run.steps import acceptance_histogram
from specplay.core import style
from specplay.core.trace import decode_rate
from specplay.core.style import COLORS
from specplay.core.events import BASELINE, SPECULATIVE

LABELS = {BASELINE: "baseline", SPECULATIVE: "speculative"}
HEIGHT = 300


# The page's charts sit on the page's own background, light or dark: transparent, with text and grid in
# greys that read on both (the bench's exported charts keep core.style's white).
THEME_NEUTRAL = {"paper_bgcolor": "rgba(0,0,0,0)", "plot_bgcolor": "rgba(0,0,0,0)", "font": {"color": "#7b8494"}}
NEUTRAL_AXIS = {"gridcolor": "rgba(128,128,128,0.22)", "zerolinecolor": "rgba(128,128,128,0.45)",
                "linecolor": "rgba(128,128,128,0.45)"}


def _layout(title: str, x_title: str, y_title: str, revision: str) -> dict:
    out = {**style.layout(title, x_title, y_title, HEIGHT, {"l": 50, "r": 10, "t": 40, "b": 40}),
           "uirevision": revision, **THEME_NEUTRAL}  # uirevision: keep zoom and hidden traces across updates
    for axis in ("xaxis", "yaxis"):
        out[axis] = {**out[axis], **NEUTRAL_AXIS}
    return out


def _figure(data: list[dict], layout: dict) -> go.Figure:
    # Built from plain dicts: plotly's add_trace/update_layout/make_subplots cost ~25 ms a figure, too much
    # to redraw several times a second on a CPU the engines are using. Unvalidated: the dicts are written
    # to plotly's schema here, and validation would triple the cost (2.2 ms vs 0.8 ms a figure).
    return go.Figure({"data": data, "layout": layout}, _validate=False)


def run_origin(comparison: Comparison) -> float | None:
    """Time zero of a run's charts: when the requests were submitted."""
    times = [t.submitted_at for t in comparison.traces.values() if t.submitted_at is not None]
    return min(times) if times else None


def rate_over_time(trace: EngineTrace, origin: float) -> tuple[list[float], list[float]]:
    """Decode tokens/s so far (the summary's definition: tokens after the first / time since the first),
    at each step's arrival, seconds after `origin`."""
    xs, ys = [], []
    if len(trace.step_times) < 2:
        return xs, ys
    first_time, first_size = trace.step_times[0], trace.step_sizes[0]
    produced = first_size
    for size, when in zip(trace.step_sizes[1:], trace.step_times[1:]):
        produced += size
        rate = decode_rate(produced - first_size, when - first_time)
        if rate is not None:
            xs.append(round(when - origin, 4))
            ys.append(round(rate, 3))
    return xs, ys


def _line(xs, ys, role: str, name: str | None = None, **extra) -> dict:
    return {"type": "scatter", "x": xs, "y": ys, "mode": "lines", "name": name or LABELS[role],
            "line": {"color": COLORS[role], "width": 2}, **extra}


SINCE_SUBMIT = "seconds since its request was submitted"  # each engine on its own clock: schedules compare


def tokens_per_s_figure(comparison: Comparison) -> go.Figure:
    data = []
    for role in (BASELINE, SPECULATIVE):
        trace = comparison.traces[role]
        origin = trace.submitted_at
        data.append(_line(*(rate_over_time(trace, origin) if origin is not None else ([], [])), role))
    return _figure(data, _layout("Decode tokens/s (running average)", SINCE_SUBMIT, "tokens/s", "rate"))


def acceptance_figure(comparison: Comparison) -> go.Figure:
    """Left: acceptance rate so far (accepted / drafted) over time. Middle: per draft position, the share of
    drafts whose token at that position was accepted. Right: vLLM's acceptance histogram, the steps by how
    many drafted tokens they accepted (0..k)."""
    history, counters = comparison.counter_history, comparison.counters
    k, origin = comparison.num_speculative_tokens, comparison.speculative.submitted_at
    xs, ys = [], []
    for when, snapshot in history:
        rate = snapshot.acceptance_rate
        if rate is not None and origin is not None:
            xs.append(round(when - origin, 4))
            ys.append(round(rate, 4))
    positions = max(k or 0, len(counters.accepted_per_position))
    per_pos = list(counters.accepted_per_position) + [0] * (positions - len(counters.accepted_per_position))
    drafts = counters.num_drafts
    rates, exact = counters.position_rates()  # ÷ the drafts that reached each position, where vLLM said
    shares = [round(r, 4) if r is not None else 0.0 for r in rates] + [0.0] * (positions - len(rates))
    of = list(counters.drafted_per_position or ()) if exact else [drafts] * positions
    of += [0] * (positions - len(of))
    data = [
        _line(xs, ys, SPECULATIVE, "acceptance rate", showlegend=False),
        {"type": "bar", "x": [str(i + 1) for i in range(positions)], "y": shares, "name": "accepted share",
         "marker": {"color": COLORS[SPECULATIVE]}, "showlegend": False, "xaxis": "x2", "yaxis": "y2",
         "customdata": list(zip(per_pos, of)), "text": [f"{s:.0%}" for s in shares], "textposition": "outside",
         "hovertemplate": "position %{x}: %{customdata[0]} of %{customdata[1]} drafts"
                          + (" that reached it" if exact else " (all: per-position drafted counts not reported)")
                          + "<extra></extra>"},
        _histogram_bars(acceptance_histogram(counters) if drafts else [], positions),
    ]
    layout = _layout("", "seconds", "accepted / drafted", "acceptance")
    layout["margin"] = {"l": 50, "r": 10, "t": 30, "b": 40}
    layout["xaxis"]["domain"] = [0, 0.3]
    layout["yaxis"].update(range=[0, 1.12], tickformat=".0%")
    for n, domain, title in ((2, [0.38, 0.66], "draft position"), (3, [0.74, 1], "accepted in a step")):
        layout[f"xaxis{n}"] = {**style.AXIS, **NEUTRAL_AXIS, "domain": domain, "anchor": f"y{n}", "type": "category",
                               "title": {"text": title}}
    layout["yaxis2"] = {**style.AXIS, **NEUTRAL_AXIS, "anchor": "x2", "range": [0, 1.12], "tickformat": ".0%"}
    layout["yaxis3"] = {**style.AXIS, **NEUTRAL_AXIS, "anchor": "x3", "rangemode": "tozero"}
    layout["annotations"] = [
        {"text": text, "x": x, "y": 1.0, "xref": "paper", "yref": "paper", "xanchor": "center",
         "yanchor": "bottom", "showarrow": False, "font": {"size": 12}}
        for text, x in (("rate so far", 0.15), ("per position", 0.52), ("steps by accepted", 0.87))]
    return _figure(data, layout)


def _histogram_bars(histogram: list[int], k: int) -> dict:
    """vLLM's acceptance_histogram as bars: [j] = verification steps that accepted exactly j drafts."""
    counts = list(histogram) + [0] * max(0, k + 1 - len(histogram))
    total = sum(counts)
    return {"type": "bar", "x": [str(j) for j in range(len(counts))], "y": counts, "name": "steps",
            "marker": {"color": COLORS[SPECULATIVE], "opacity": 0.75}, "showlegend": False, "xaxis": "x3",
            "yaxis": "y3", "text": [str(n) if n else "" for n in counts], "textposition": "outside",
            "hovertemplate": "%{y} of " + str(total) + " steps accepted %{x} drafts<extra></extra>"}


def memory_figure(series: dict, label: str, origin: float | None, plan_note: str | None = None) -> go.Figure:
    """`series`: {role: MemorySeries} from telemetry; shown in GiB against the run's clock, with each engine's
    KV cache in use (vLLM's scheduler stats, 0-100%) as a dotted line on a right-hand axis where reported.
    `plan_note`: what the memory plan says each engine holds (weights, draft, KV cache reserved)."""
    data, kv_seen = [], False
    for role in (BASELINE, SPECULATIVE):
        s = series.get(role)
        if s is None or origin is None:
            xs, ys, kv = [], [], []
        else:
            xs = [round(t - origin, 3) for t in s.times]
            ys = [round(v / 1024 ** 3, 3) for v in s.values]
            kv = list(s.kv_cache_usage) if len(s.kv_cache_usage) == len(xs) else []
        data.append(_line(xs, ys, role))
        if any(u is not None for u in kv):
            kv_seen = True
            data.append(_line(xs, [None if u is None else round(100 * u, 2) for u in kv], role,
                              f"{LABELS[role]}: KV cache in use", yaxis="y2",
                              line={"color": COLORS[role], "width": 1.5, "dash": "dot"}))
    layout = _layout(f"Memory per engine: {label}", "seconds since the run started", "GiB", "memory")
    layout["xaxis"]["rangemode"] = "normal"
    if kv_seen:
        layout["yaxis2"] = {**style.AXIS, **NEUTRAL_AXIS, "overlaying": "y", "side": "right", "range": [0, 100],
                            "title": {"text": "KV cache in use (%)"}, "showgrid": False}
        # four lines: the legend below the plot, clear of the title
        layout["legend"] = {**layout["legend"], "y": -0.32, "yanchor": "top", "x": 0, "xanchor": "left"}
        layout["margin"] = {**layout["margin"], "r": 50, "b": 110}
        layout["height"] = HEIGHT + 70
    if plan_note:
        # one line per engine under the title (<br><sup>: every plotly.js draws it; title.subtitle needs a
        # recent one)
        lines = "".join(f"<br><sup>{html.escape(line)}</sup>" for line in plan_note.split(" · "))
        layout["title"] = {**layout["title"], "text": f"{layout['title']['text']}{lines}"}
        layout["margin"] = {**layout["margin"], "t": 40 + 14 * plan_note.count(" · ") + 14}
        layout["height"] = layout["height"] + 14 * (plan_note.count(" · ") + 1)
    return _figure(data, layout)


def _gib(n: int) -> str:
    return f"{n / 1024 ** 3:.2f} GiB"


# the reserved KV cache and the plan's estimate differ enough to say by how much
KV_GAP_SHOWN = 0.05


def kv_note(reserved: int | None, planned: int | None) -> str | None:
    """"KV cache 15.12 GiB reserved (planned 14.65 GiB, +3%)": what vLLM reserved (the engine's own figure,
    EngineInfo.kv_cache_bytes) beside the memory plan's estimate, the gap said when over KV_GAP_SHOWN; the
    plan's alone ("planned") before the engine has said."""
    if not reserved:
        return f"KV cache {_gib(planned)} planned" if planned else None
    if not planned:
        return f"KV cache {_gib(reserved)} reserved"
    gap = reserved / planned - 1
    said = f", {gap:+.0%}" if abs(gap) > KV_GAP_SHOWN else ""
    return f"KV cache {_gib(reserved)} reserved (planned {_gib(planned)}{said})"


def plan_note(memory_plan, reserved: dict | None = None) -> str | None:
    """One line: per engine, the weights it holds (target, draft or head, by the memory plan) and its KV
    cache: what vLLM reserved (`reserved`: role -> bytes, the engines' own figures) beside the plan's."""
    parts = []
    for row in memory_plan.engines:
        held = [f"{'weights' if p.kind == 'target' else p.kind} {_gib(p.weight_bytes)}"
                for p in row.parts if p.weight_bytes]
        kv = kv_note((reserved or {}).get(row.role), row.kv_capacity_bytes)
        if kv:
            held.append(kv)
        if held:
            parts.append(f"{LABELS.get(row.role, row.role)}: {' + '.join(held)}")
    return " · ".join(parts) or None


# -- tables ----------------------------------------------------------------------------------------------
SUMMARY_COLUMNS = ["figure", "baseline", "speculative"]


def summary_table(result) -> pd.DataFrame:
    """A RunResult's figures, one row each, then the 95% intervals of the speedup and its factors (the CLI
    report's rows, from specplay.run.metrics)."""
    rows = metrics.table_rows(result) + metrics.interval_rows(result) if result else []
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


RUN_COLUMNS = ("run", "preset", "prompt", "max_tokens", "temperature", "schedule", "outcome", "identical",
               "first_divergence")
HISTORY_COLUMNS = list(RUN_COLUMNS + metrics.FLAT_COLUMNS)


def csv_safe(text: str) -> str:
    """Text a spreadsheet shows as text: a leading =, +, -, @ (or tab, CR) would make it a formula."""
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def history_row(result, number: int, prompt: str) -> dict:
    """One finished RunResult as a row of the session history (numbers kept numeric, for the CSV); the
    result carries its preset and request (max tokens, temperature)."""
    prompt = csv_safe(prompt)
    outcome = "error" if result.error else "stopped" if result.cancelled else "done"
    request = result.request
    return {
        "run": number, "preset": result.preset, "prompt": prompt if len(prompt) <= 60 else prompt[:57] + "...",
        "max_tokens": request.max_tokens if request else None, "temperature": request.temperature if request else None,
        "schedule": result.schedule, "outcome": outcome, "identical": result.identical,
        "first_divergence": result.first_divergence, **metrics.flat_row(result),
    }


def history_table(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=HISTORY_COLUMNS)


# -- what if ---------------------------------------------------------------------------------------------
def whatif_figure(curve: list[tuple[int, float]], k: int | None, measured: tuple[int, float] | None) -> go.Figure:
    """The standard model's speedup against k at the sliders' acceptance and cost (`curve`: (k, speedup)),
    the sliders' k marked, and the run's measured speedup at its own k as a point."""
    xs, ys = [n for n, _ in curve], [round(s, 4) for _, s in curve]
    data = [_line(xs, ys, SPECULATIVE, "predicted", mode="lines+markers", showlegend=False,
                  hovertemplate="k=%{x}: %{y:.2f}× predicted<extra></extra>")]
    if k is not None and curve:
        at = dict(curve).get(k)
        if at is not None:
            data.append({"type": "scatter", "x": [k], "y": [round(at, 4)], "mode": "markers", "name": "sliders' k",
                         "marker": {"size": 12, "color": COLORS[SPECULATIVE], "symbol": "circle-open",
                                    "line": {"width": 2}}, "showlegend": False,
                         "hovertemplate": "sliders: k=%{x}, %{y:.2f}×<extra></extra>"})
    if measured is not None and measured[1] is not None:
        data.append({"type": "scatter", "x": [measured[0]], "y": [round(measured[1], 4)], "mode": "markers",
                     "name": "measured", "marker": {"size": 11, "color": COLORS[BASELINE], "symbol": "diamond"},
                     "showlegend": False, "hovertemplate": "measured at k=%{x}: %{y:.2f}×<extra></extra>"})
    layout = _layout("", "k (drafted tokens a step)", "speedup (×)", "whatif")
    layout["height"] = 240
    layout["margin"] = {"l": 50, "r": 10, "t": 10, "b": 40}
    layout["xaxis"]["dtick"] = 1 if len(xs) <= 8 else 2
    layout["shapes"] = [{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": 1, "y1": 1,
                         "line": {"color": "rgba(128,128,128,0.6)", "dash": "dot", "width": 1}}]
    return _figure(data, layout)
