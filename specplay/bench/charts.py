"""The bench lab's charts, pure functions from bench rows to plotly figures: speedup against k, acceptance
per draft position, speedup against temperature, throughput against concurrency (both engines), speedup
against the request rate (open loop), speedup and acceptance against context length (bench.context's
buckets), and for synthetic acceptance the predicted speedups (verify = one
pass; measured pass times) next to the measured.

Each chart holds the other settings at one value (the lowest temperature, the lowest concurrency, the
preset's k or the one measured nearest to it), so a line is a sweep of one setting and nothing else.
Open-loop rows (a `request_rate`) are drawn only in the request-rate chart: their concurrency is the cap,
not what was in flight, so they would land on the concurrency axis as if closed-loop.
"""

from __future__ import annotations

import plotly.graph_objects as go

from specplay.bench.context import context_of
from specplay.bench.report import BenchRow, accepted_shares, shares_exact
from specplay.bench.runner import predicted_speedup
from specplay.core import style
from specplay.core.style import COLORS, PALETTE
from specplay.core.events import BASELINE, SPECULATIVE

HEIGHT = 340
LEGEND_ABOVE_AT_MOST = 4  # lines whose legend fits in one row above the plot


def _layout(title: str, x_title: str, y_title: str, **x) -> dict:
    return style.layout(title, x_title, y_title, HEIGHT, {"l": 55, "r": 15, "t": 45, "b": 45}, x_axis=x)


def _even(y: float = 1.0) -> dict:
    """The 1× line: above it speculation pays."""
    return {"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": y, "y1": y,
            "line": {"color": "#888", "dash": "dot", "width": 1}}


def reference(rows: list[dict], preset_k: int | None = None) -> dict:
    """The value each chart holds the other settings at."""
    ks = sorted({r["k"] for r in rows})
    return {
        "temperature": min((r["temperature"] for r in rows), default=0.0),
        "concurrency": min((r["concurrency"] for r in rows), default=1),
        "k": min(ks, key=lambda k: (abs(k - (preset_k or k)), k)) if ks else None,
    }


def _where(rows: list[dict], **fixed) -> list[dict]:
    return [r for r in rows if all(r.get(k) == v for k, v in fixed.items())]


def _groups(rows: list[dict], keys: tuple[str, ...]) -> dict[tuple, list[dict]]:
    out: dict[tuple, list[dict]] = {}
    for row in rows:
        out.setdefault(tuple(row.get(k) for k in keys), []).append(row)
    return out


def _name(keys: tuple[str, ...], values: tuple, rows: list[dict]) -> str:
    """A line's name from the settings that vary between lines (a=0.7 for acceptance, c=8 ...)."""
    short = {"concurrency": "c", "acceptance": "a", "temperature": "T", "k": "k"}
    parts = []
    for key, value in zip(keys, values):
        if len({r.get(key) for r in rows}) > 1 or key == "workload":
            parts.append(str(value) if key == "workload" else f"{short[key]}={value:g}")
    return ", ".join(parts)


def _order(values: tuple) -> tuple:
    """Lines in the settings' natural order (c=8 before c=32), names alphabetically, unset last."""
    return tuple((0, v, "") if isinstance(v, (int, float)) else (1, 0, str(v)) if v is not None else (2, 0, "")
                 for v in values)


def _lines(rows: list[dict], x: str, y: str, keys: tuple[str, ...], dash: str | None = None,
           hover: str = "") -> list[dict]:
    data = []
    for i, (values, group) in enumerate(sorted(_groups(rows, keys).items(), key=lambda kv: _order(kv[0]))):
        group = sorted((r for r in group if r.get(y) is not None), key=lambda r: r[x])
        data.append({"type": "scatter", "mode": "lines+markers", "name": _name(keys, values, rows),
                     "x": [r[x] for r in group], "y": [r[y] for r in group],
                     "line": {"color": PALETTE[i % len(PALETTE)], "width": 2, **({"dash": dash} if dash else {})},
                     "hovertemplate": f"{x}=%{{x}}<br>{hover or y}=%{{y:.2f}}<extra>%{{fullData.name}}</extra>"})
    return data


def _figure(data: list[dict], layout: dict) -> go.Figure:
    if len(data) > LEGEND_ABOVE_AT_MOST:  # a long legend above the plot would cover the title: beside it
        layout["legend"] = {"orientation": "v", "x": 1.02, "xanchor": "left", "y": 1, "yanchor": "top"}
    return go.Figure({"data": data, "layout": layout}, _validate=False)  # dicts written to plotly's schema


def speedup_vs_k(rows: list[dict], preset_k: int | None = None) -> go.Figure:
    ref = reference(rows, preset_k)
    picked = _where(rows, temperature=ref["temperature"])
    layout = _layout(f"Speedup against k (T={ref['temperature']:g})", "k (num_speculative_tokens)", "speedup",
                     dtick=1)
    layout["shapes"] = [_even()]
    return _figure(_lines(picked, "k", "speedup", ("workload", "concurrency", "acceptance"), hover="speedup"), layout)


def acceptance_per_position(rows: list[dict], preset_k: int | None = None) -> go.Figure:
    """Per workload, at the largest k measured: at each position, the share accepted of the drafts that
    reached it (of all drafts where vLLM didn't report per-position drafted counts: the title says so)."""
    ref = reference(rows, preset_k)
    k = max((r["k"] for r in rows), default=0)
    picked = _where(rows, temperature=ref["temperature"], concurrency=ref["concurrency"], k=k)
    data = []
    for i, row in enumerate(sorted(picked, key=lambda r: (r["workload"], r.get("acceptance") or 0))):
        shares = accepted_shares(row)
        name = row["workload"] + (f", a={row['acceptance']:g}" if row.get("acceptance") is not None else "")
        data.append({"type": "bar", "name": name, "x": [str(p + 1) for p in range(len(shares))], "y": shares,
                     "marker": {"color": PALETTE[i % len(PALETTE)]},
                     "hovertemplate": "position %{x}: %{y:.0%} accepted<extra>%{fullData.name}</extra>"})
    exact = all(shares_exact(row) for row in picked)
    layout = _layout(f"Accepted per draft position (k={k}, T={ref['temperature']:g}, c={ref['concurrency']})"
                     + ("" if exact else "<br><sup>÷ all drafts: per-position drafted counts not reported</sup>"),
                     "draft position", "accepted ÷ drafted there" if exact else "share of all drafts accepted",
                     type="category")
    layout["yaxis"].update(range=[0, 1.05], tickformat=".0%")
    layout["barmode"] = "group"
    return _figure(data, layout)


def speedup_vs_temperature(rows: list[dict], preset_k: int | None = None) -> go.Figure:
    ref = reference(rows, preset_k)
    picked = _where(rows, concurrency=ref["concurrency"], k=ref["k"])
    layout = _layout(f"Speedup against temperature (k={ref['k']}, c={ref['concurrency']})", "temperature", "speedup")
    layout["shapes"] = [_even()]
    return _figure(_lines(picked, "temperature", "speedup", ("workload", "acceptance"), hover="speedup"), layout)


def throughput_vs_concurrency(rows: list[dict], preset_k: int | None = None) -> go.Figure:
    """Output tokens/s of the whole batch against requests in flight: baseline dashed, speculative solid."""
    ref = reference(rows, preset_k)
    picked = _where(rows, temperature=ref["temperature"], k=ref["k"])
    data = []
    for role, dash in ((BASELINE, "dash"), (SPECULATIVE, None)):
        lines = _lines(picked, "concurrency", f"throughput_{role}", ("workload", "acceptance"), dash=dash,
                       hover="tokens/s")
        for line in lines:
            line["name"] = f"{line['name']} · {role}"
            if len(lines) == 1:
                line["line"]["color"] = COLORS[role]
        data += lines
    levels = sorted({r["concurrency"] for r in picked})
    layout = _layout(f"Throughput against concurrency (k={ref['k']}, T={ref['temperature']:g})",
                     "requests in flight (concurrency)", "output tokens/s (batch)", type="log",
                     tickvals=levels, ticktext=[str(c) for c in levels])
    return _figure(data, layout)


def _rate(rate) -> float:
    return float("inf") if rate == "inf" else float(rate)  # rows say "inf" (JSON has no infinity)


def rate_label(rate) -> str:
    return "all at once" if _rate(rate) == float("inf") else f"{_rate(rate):g}/s"


def speedup_vs_request_rate(rows: list[dict], preset_k: int | None = None) -> go.Figure:
    """Open loop (Poisson arrivals): per-request speedup (solid) and batch-throughput ratio (dashed) against
    the offered rate; below the 1× line speculation has stopped paying."""
    ref = reference(rows, preset_k)
    picked = [dict(r, request_rate=_rate(r["request_rate"])) for r in _where(rows, temperature=ref["temperature"], k=ref["k"])]
    data = []
    for y, label, dash in (("speedup", "per request", None), ("throughput_ratio", "throughput", "dash")):
        for line in _lines(picked, "request_rate", y, ("workload", "acceptance"), dash=dash, hover=label):
            line["name"] = f"{line['name']} · {label}"
            line["x"] = [rate_label(r) for r in line["x"]]
            data.append(line)
    layout = _layout(f"Speedup against request rate (open loop, k={ref['k']}, T={ref['temperature']:g})",
                     "requests per second (Poisson arrivals)", "speculative ÷ baseline", type="category")
    layout["shapes"] = [_even()]
    return _figure(data, layout)


def predicted_vs_measured(rows: list[dict]) -> go.Figure:
    """Synthetic acceptance: measured speedup (solid) against k, next to two predictions: 1 + Σ a^(i+1)
    (dotted), what a verify step costing one plain forward pass would give, and the same tokens per step
    over the measured step cost (dashed, `predicted_speedup_measured`): the gap between the dotted line and
    the others is what the draft passes and verification cost."""
    ref = reference(rows)
    picked = [r for r in _where(rows, temperature=ref["temperature"], concurrency=ref["concurrency"])
              if r.get("acceptance") is not None]
    data = []
    for y, label, dash in (("speedup", "measured", None), ("predicted_speedup_measured", "predicted (pass times)", "dash")):
        lines = _lines(picked, "k", y, ("workload", "acceptance"), dash=dash, hover=label)
        for line in lines:
            line["name"] = f"{line['name']} {label}"
        data += [line for line in lines if line["y"]]
    for i, a in enumerate(sorted({r["acceptance"] for r in picked})):
        ks = sorted({r["k"] for r in picked if r["acceptance"] == a})
        data.append({"type": "scatter", "mode": "lines", "name": f"a={a:g} predicted",
                     "x": ks, "y": [round(predicted_speedup(a, k), 3) for k in ks],
                     "line": {"color": PALETTE[i % len(PALETTE)], "dash": "dot", "width": 2},
                     "hovertemplate": "k=%{x}<br>1 + Σ a^i = %{y:.2f}<extra>%{fullData.name}</extra>"})
    layout = _layout(f"Predicted (verify = one pass; measured pass times) and measured speedup "
                     f"(c={ref['concurrency']})", "k (num_speculative_tokens)", "speedup", dtick=1)
    layout["shapes"] = [_even()]
    return _figure(data, layout)


def speedup_vs_context(rows: list[dict], preset_k: int | None = None) -> go.Figure:
    """Context-length buckets (bench.context): speedup (solid, left axis) and acceptance rate (dotted, right
    axis) against the prompt's length in the target's tokens."""
    ref = reference(rows, preset_k)
    picked = [dict(r, context_tokens=context_of(r["workload"])) for r in rows if context_of(r["workload"]) is not None]
    picked = _where(picked, temperature=ref["temperature"], concurrency=ref["concurrency"], k=ref["k"])
    data = _lines(picked, "context_tokens", "speedup", ("k",), hover="speedup")
    for line in _lines(picked, "context_tokens", "acceptance_rate", ("k",), dash="dot", hover="acceptance"):
        data.append({**line, "yaxis": "y2"})
    data[0]["name"], data[-1]["name"] = "speedup", "acceptance rate"
    lengths = sorted({r["context_tokens"] for r in picked})
    layout = _layout(f"Speedup and acceptance against context length (k={ref['k']}, T={ref['temperature']:g}, "
                     f"c={ref['concurrency']})", "prompt tokens (target's tokenizer)", "speedup", type="log",
                     tickvals=lengths, ticktext=[str(n) for n in lengths])
    layout["yaxis2"] = {"overlaying": "y", "side": "right", "range": [0, 1.05], "tickformat": ".0%",
                        "title": {"text": "acceptance rate"}, "showgrid": False}
    layout["shapes"] = [_even()]
    return _figure(data, layout)


CHARTS = {  # file stem -> (figure function, the setting it sweeps: drawn only when that takes 2+ values)
    "speedup_vs_k": (speedup_vs_k, "k"),
    "acceptance_per_position": (acceptance_per_position, None),
    "speedup_vs_temperature": (speedup_vs_temperature, "temperature"),
    "throughput_vs_concurrency": (throughput_vs_concurrency, "concurrency"),
    "speedup_vs_request_rate": (speedup_vs_request_rate, "request_rate"),
}


def rows_for(stem: str, rows: list[dict]) -> list[dict]:
    """The rows a chart draws: open-loop rows for the request-rate chart, closed-loop rows for the others."""
    open_loop = stem == "speedup_vs_request_rate"
    return [r for r in rows if (r.get("request_rate") is not None) == open_loop]


def flat_rows(rows) -> list[dict]:
    """The rows as flat dicts (a BenchRow's dump, bench.json's row): the charts pick columns by name, as the
    CSV has them."""
    return [r.model_dump() if isinstance(r, BenchRow) else r for r in rows]


def chart(stem: str, rows: list, preset_k: int | None = None) -> go.Figure | None:
    """One chart from all the rows (None when it has none to draw)."""
    rows = flat_rows(rows)
    picked = rows_for(stem, rows)
    if not picked:
        return None
    return predicted_vs_measured(picked) if stem == "predicted_vs_measured" else CHARTS[stem][0](picked, preset_k)


def figures(rows: list, preset_k: int | None = None, synthetic: bool = False) -> dict[str, go.Figure]:
    """Every chart the rows support: a sweep chart only when its setting took two or more values."""
    rows = flat_rows(rows)
    out = {}
    for stem, (_, swept) in CHARTS.items():
        picked = rows_for(stem, rows)
        if picked and (swept is None or len({r[swept] for r in picked}) > 1):
            out[stem] = chart(stem, rows, preset_k)
    buckets = {context_of(r["workload"]) for r in rows_for("speedup_vs_context", rows)} - {None}
    if len(buckets) > 1:
        out["speedup_vs_context"] = speedup_vs_context(rows_for("speedup_vs_context", rows), preset_k)
    if synthetic and any(r.get("acceptance") is not None for r in rows_for("predicted_vs_measured", rows)):
        out["predicted_vs_measured"] = chart("predicted_vs_measured", rows)
    return out
