"""What if, beside the speedup's factors: sliders for acceptance α (or the run's per-position rates), k and
the draft's cost per pass, starting at the finished run's measured values, and the speedup the standard
model predicts (specplay.run.whatif, the bench lab's function too) against the measured one, with the best
k. The run's values are read from the session's own finished run, kept on the server (its RunResult carries
the method's kind and k); what comes from the browser (the sliders) is only ever numbers, clamped, and
every number drawn is formatted, never markup."""

from __future__ import annotations

import math
from dataclasses import dataclass

import gradio as gr

from specplay.page import charts
from specplay.page.section import Section
from specplay.page.views import esc
from specplay.presets.methods import facts_of_kind
from specplay.run import whatif

K_SLIDER_MAX = whatif.K_MAX
COST_SLIDER_MAX = 2.0
MIN_VERIFY_COST = 0.05
WHATIF_SLIDERS = ("wi_alpha", "wi_k", "wi_cost", "wi_positions")
WHATIF_INPUTS = WHATIF_SLIDERS + ("run",)  # "run": the compare tab's State
WHATIF_OUTPUTS = ("wi_view", "wi_fig")
IDLE = '<div class="whatif idle">After a run: what the standard model predicts for other acceptance, k and draft cost.</div>'


@dataclass(frozen=True)
class Start:
    """A finished run's values (where the sliders start), and what the model needs about its method."""

    preset: str
    method: str
    lookup: bool  # no draft passes (n-gram, suffix): the cost slider is the verify step's own cost
    passes: tuple[int, ...]  # draft passes a step at k = 1..K_SLIDER_MAX (the method table's)
    measured: whatif.Measured
    interval: tuple[float, float] | None  # the measured speedup's 95% interval


def _number(value, low: float, high: float, default: float) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):
        return default
    return default if math.isnan(x) else min(high, max(low, x))


def start_from(result) -> Start | None:
    """The what-if's start from a finished RunResult (None for a failed or untimed run, or one made without a
    preset: its kind and k unknown)."""
    if (result is None or result.error or result.speedup is None or not result.method_kind
            or not result.num_speculative_tokens):
        return None
    facts, k = facts_of_kind(result.method_kind), min(result.num_speculative_tokens, K_SLIDER_MAX)
    interval = result.speedup_interval
    passes = tuple(facts.draft_passes(n) for n in range(1, K_SLIDER_MAX + 1))
    return Start(result.preset or "", facts.method, facts.draft_passes(k) == 0, passes,
                 whatif.measured(result, k, facts.draft_passes(k)),
                 (interval.low, interval.high) if interval is not None else None)


def start_of(finished) -> Start | None:
    """The what-if's start for the session's finished run (a FinishedRun; None: none), made once and kept on it."""
    if finished is None:
        return None
    if "whatif" not in finished.views:
        finished.views["whatif"] = start_from(finished.result)
    return finished.views["whatif"]


def whatif_values(finished) -> dict:
    """The what-if's outputs for the session's finished run (a FinishedRun; None: idle): sliders at its values."""
    start = start_of(finished)
    if start is None:
        return {"wi_view": IDLE}
    values = slider_values(start)
    m = start.measured
    p = predict(start, m.alpha, m.k, values["wi_cost"]["value"], False)
    return {**values, "wi_view": view_html(start, p),
            "wi_fig": charts.whatif_figure(p["curve"], p["k"], (m.k, m.speedup))}


def slider_values(start: Start | None) -> dict:
    """The sliders set to the run's own values (labels saying what the cost slider means for this method)."""
    if start is None:
        return {}
    m = start.measured
    cost = m.verify_cost if start.lookup else (m.draft_cost if m.draft_cost is not None else 0.0)
    label = ("verify step's cost (× a baseline step; n-gram lookup drafts for free)" if start.lookup
             else "draft cost per pass (× a baseline step)")
    return {"wi_alpha": gr.update(value=round(m.alpha or 0.0, 3)), "wi_k": gr.update(value=m.k),
            "wi_cost": gr.update(value=round(min(max(cost, 0.0), COST_SLIDER_MAX), 3), label=label),
            "wi_positions": gr.update(value=False, interactive=bool(m.rates))}


def predict(start: Start, alpha, k, cost, per_position) -> dict:
    """The model at the sliders' values, at the run's own values, and its best k; all clamped numbers."""
    m = start.measured
    k = int(_number(k, 1, K_SLIDER_MAX, m.k))
    cost = _number(cost, 0.0, COST_SLIDER_MAX, 0.0)
    acceptance = list(m.rates) if per_position and m.rates else _number(alpha, 0.0, 1.0, m.alpha or 0.0)

    def passes_for(n: int) -> int:
        return start.passes[n - 1]

    # a lookup method's slider is its verify step's cost: never 0 (a step always costs something)
    draft_cost, verify = (0.0, max(cost, MIN_VERIFY_COST)) if start.lookup else (cost, 1.0)
    if not isinstance(acceptance, float):
        k = min(k, len(acceptance))
    predicted = whatif.predicted_speedup(acceptance, k, draft_cost, passes_for(k), verify)
    best, best_speedup = whatif.best_k(acceptance, draft_cost, passes_for, verify)
    curve = [(n, whatif.predicted_speedup(acceptance, n, draft_cost, passes_for(n), verify))
             for n in range(1, (K_SLIDER_MAX if isinstance(acceptance, float) else len(acceptance)) + 1)]
    return {"k": k, "predicted": predicted, "best_k": best, "best": best_speedup, "curve": curve,
            "at_run": m.predicted, "measured": m.speedup, "per_position": not isinstance(acceptance, float)}


def view_html(start: Start | None, p: dict | None) -> str:
    if start is None or p is None:
        return IDLE
    m = start.measured
    interval = f" (95%: {start.interval[0]:.2f}–{start.interval[1]:.2f}×)" if start.interval else ""
    formula = ("(1 − α^(k+1)) / (1 − α) ÷ verify cost" if start.lookup else
               "(1 − α^(k+1)) / ((1 − α)(1 + passes·c))")
    at_run = f"{p['at_run']:.2f}×" if p["at_run"] is not None else "—"
    alpha_text = "the run's per-position rates" if p["per_position"] else "this α"
    return (f'<div class="whatif"><div class="wi-cards">'
            f'<div class="wi-card"><div class="f-label">predicted at these values</div>'
            f'<div class="f-value" id="whatif-predicted">{p["predicted"]:.2f}×</div></div>'
            f'<div class="wi-card"><div class="f-label">measured</div><div class="f-value">{m.speedup:.2f}×</div>'
            f'<div class="f-note">{esc(interval.strip())}</div></div>'
            f'<div class="wi-card"><div class="f-label">model at the run\'s values</div><div class="f-value">{at_run}</div>'
            f'<div class="f-note">α {m.alpha or 0:.2f}, k {m.k}</div></div>'
            f'<div class="wi-card"><div class="f-label">best k for {esc(alpha_text)}</div>'
            f'<div class="f-value" id="whatif-best-k">k = {p["best_k"]}</div>'
            f'<div class="f-note">{p["best"]:.2f}× predicted</div></div></div>'
            f'<div class="f-note">The standard model ({esc(start.method)}): speedup = {esc(formula)}. It assumes '
            'each drafted token is accepted with probability α given the ones before it; the gap between the '
            'model at the run\'s values and the measured speedup is what it leaves out (overheads, noise).</div>'
            + (f'<div class="f-note" id="whatif-cost-note">{esc(m.cost_note)}.</div>' if m.cost_note else '')
            + '</div>')


def whatif_panel(tab: Section) -> None:
    """The sliders and the prediction (inside the caller's layout, under the factors)."""
    with gr.Accordion("What if: acceptance, k and the draft's cost in the standard model", open=False,
                      elem_id="whatif"):
        with gr.Row():
            tab.add("wi_alpha", gr.Slider(0.0, 1.0, value=0.5, step=0.01, label="acceptance α", elem_id="wi-alpha"))
            tab.add("wi_k", gr.Slider(1, K_SLIDER_MAX, value=4, step=1, label="k (drafted tokens a step)",
                                      elem_id="wi-k"))
            tab.add("wi_cost", gr.Slider(0.0, COST_SLIDER_MAX, value=0.0, step=0.01,
                                         label="draft cost per pass (× a baseline step)", elem_id="wi-cost"))
            tab.add("wi_positions", gr.Checkbox(False, label="the run's per-position acceptance instead of one α",
                                                interactive=False, elem_id="wi-positions"))
        with gr.Row():
            with gr.Column(scale=3):
                tab.add("wi_view", gr.HTML(IDLE, elem_id="whatif-view"))
            with gr.Column(scale=2, min_width=280):
                tab.add("wi_fig", gr.Plot(charts.whatif_figure([], None, None), label="predicted speedup against k",
                                          elem_id="chart-whatif"))


def wire_whatif(tab: Section) -> None:
    """Moving a slider redraws the prediction for the session's run (loaded by the run's last frame:
    `whatif_values`)."""

    def redraw(alpha, k, cost, per_position, finished):
        start = start_of(finished)
        if start is None:
            return {tab["wi_view"]: IDLE}
        p = predict(start, alpha, k, cost, per_position)
        return {tab["wi_view"]: view_html(start, p),
                tab["wi_fig"]: charts.whatif_figure(p["curve"], p["k"], (start.measured.k, start.measured.speedup))}

    for name in WHATIF_SLIDERS:
        tab[name].input(redraw, inputs=tab.list(WHATIF_INPUTS), outputs=tab.list(WHATIF_OUTPUTS),
                        api_visibility="private", show_progress="hidden", queue=False)
