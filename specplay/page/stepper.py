"""The stepper: after a run (and after its replay), the speculative engine's verification steps one at a
time: the text so far, the k drafted tokens (the accepted ones, the first rejected one beside the target's
own token, the rest greyed), and the step's time against the baseline's time per token. It reads the run's
`step_detail` (specplay.run.steps) from the session's own finished run, kept on the server (a FinishedRun in the
page's "run" State): nothing the browser sends is decoded. A step whose drafts aren't known says "unknown",
and the method's note says why (EAGLE, MTP: vLLM doesn't return its drafts).

The output's text is the pieces the run's panes already decoded; each drafted token is decoded once per
distinct id by the run's own tokenizer (not whichever pair is loaded now), so the work is linear in the
run. The slider and arrows send only a step number, clamped; every piece of text is escaped."""

from __future__ import annotations

import math
from dataclasses import dataclass

import gradio as gr

from specplay.core.events import SPECULATIVE
from specplay.page.section import Section
from specplay.page.views import esc

CONTEXT_CHARS = 400  # the text so far: its tail
MAX_K = 16  # the presets' largest k
IDLE = '<div class="stepper idle">After a run: step through the speculative engine\'s verification steps.</div>'
STEPPER_OUTPUTS = ("st_step", "st_view")
OWN_TOKEN = "the target's own token"


@dataclass(frozen=True)
class StepperRun:
    """What the stepper shows of one run: its output's token texts and its steps (dicts from step_detail)."""

    pieces: tuple[str, ...]
    steps: tuple[dict, ...]
    note: str | None
    k: int
    baseline_s: float | None  # the baseline's seconds a token (a step)
    rejections_checked: bool = True  # False: a replayed draft's rejected token is a recomputation (run.steps)


def _int(value, default=None, low=0, high=10 ** 9):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (isinstance(value, float) and not math.isfinite(value)):
        return default
    return min(high, max(low, int(value)))


def _texts(decode):
    """One token's text by id, each distinct id decoded once (its id where there is no tokenizer: the
    dummy-weight presets; "?" for an id the tokenizer refuses)."""
    known: dict[int, str] = {}

    def text(token: int) -> str:
        if token not in known:
            if decode is None:
                known[token] = f"{token} "
            else:
                try:
                    known[token] = decode([token])
                except Exception:
                    known[token] = "?"
        return known[token]
    return text


def _step(step, text) -> dict:
    """A typed Step with its drafted and target tokens' texts (decoded once, at the run's end)."""
    return {"start": step.start, "tokens": step.tokens,
            "accepted": None if step.accepted is None else min(step.accepted, MAX_K),
            "drafted": None if step.drafted is None else min(step.drafted, MAX_K),
            "proposed": None if step.proposed is None else tuple(text(t) for t in step.proposed[:MAX_K]),
            "target": None if step.target_token is None else text(step.target_token),
            "seconds": step.seconds}


def run_from(result, pieces, decode=None) -> StepperRun | None:
    """The stepper's view of a finished RunResult (None for a failed run or one without steps). `pieces`:
    its speculative output's token texts, as its pane decoded them; `decode`: the run's own tokenizer."""
    if result is None or result.error:
        return None
    detail = result.step_detail
    if detail is None or not detail.steps:
        return None
    text = _texts(decode)
    steps = tuple(_step(s, text) for s in detail.steps[:len(result.speculative.token_ids)])  # a step emits 1+
    base_s = result.baseline.step_seconds
    return StepperRun(tuple(pieces), steps, detail.note, result.num_speculative_tokens or 0,
                      base_s if base_s and base_s > 0 else None, detail.rejections_checked)


def stepper_of(finished) -> StepperRun | None:
    """The stepper's view of the session's finished run (a FinishedRun; None: none), made once and kept on it."""
    if finished is None:
        return None
    if "stepper" not in finished.views:
        result, live = finished.result, finished.live
        pieces = live.pieces[SPECULATIVE].update(list(result.speculative.token_ids))
        finished.views["stepper"] = run_from(result, pieces, live.decoders.get(SPECULATIVE))
    return finished.views["stepper"]


def stepper_values(finished) -> dict:
    """The stepper's outputs for the session's finished run (a FinishedRun; None: idle), at its first rejection."""
    run = stepper_of(finished)
    if run is None:
        return {"st_view": IDLE, "st_step": gr.update(maximum=2, value=1)}
    at = first_rejection(run) + 1
    return {"st_view": step_html(run, at), "st_step": gr.update(maximum=max(2, len(run.steps)), value=at)}


def first_rejection(run: StepperRun) -> int:
    """The first step with a known draft that the target rejected part of (the stepper opens there)."""
    return next((i for i, s in enumerate(run.steps) if s["proposed"] and s["target"] is not None), 0)


def _chip(text: str, cls: str, title: str) -> str:
    return f'<span class="st-tok {cls}" title="{esc(title)}">{esc(text)}</span>'


def _drafts_html(run: StepperRun, step: dict) -> str:
    proposed, accepted = step["proposed"], step["accepted"] or 0
    if proposed is None or step["accepted"] is None:
        known = f"{accepted} of {step['drafted'] or run.k} accepted" if step["accepted"] is not None else "unknown"
        emitted = "".join(run.pieces[step["start"]:step["start"] + step["tokens"]])
        return (f'<div class="st-drafts"><span class="st-unknown">drafts unknown ({esc(known)})</span> '
                f'emitted: {_chip(emitted, "st-emitted", "what this step emitted")}</div>')
    if not proposed:
        target = "".join(run.pieces[step["start"]:step["start"] + 1])
        return (f'<div class="st-drafts"><span class="st-none">no draft (the lookup found no match)</span> '
                f'{_chip(target, "st-target", OWN_TOKEN)}</div>')
    chips = []
    for j, text in enumerate(proposed):
        if j < accepted:
            chips.append(_chip(text, "st-accepted", f"draft {j + 1}: accepted"))
        elif j == accepted:
            chips.append(_chip(text, "st-rejected", f"draft {j + 1}: rejected") if run.rejections_checked else
                         _chip(text, "st-rejected st-unchecked", f"draft {j + 1}: rejected here; the token is "
                               "recomputed by the draft alone, not checked (vLLM doesn't return its drafts)")
                         + '<span class="st-unchecked-mark">not checked</span>')
            if step["target"] is not None:
                chips.append('<span class="st-arrow">→</span>' + _chip(
                    step["target"], "st-target", "the target's own token, emitted instead"))
        else:
            chips.append(_chip(text, "st-greyed", f"draft {j + 1}: never checked (after a rejection)"))
    if accepted == len(proposed) and step["tokens"] > accepted:  # all accepted: the target adds its own token
        bonus = run.pieces[step["start"] + accepted] if step["start"] + accepted < len(run.pieces) else ""
        chips.append('<span class="st-plus">+</span>' + _chip(bonus, "st-target", "the target's own next token"))
    return f'<div class="st-drafts">{"".join(chips)}</div>'


def _time_html(run: StepperRun, step: dict) -> str:
    if step["seconds"] is None:
        return '<span class="st-time">time unknown (the stream merged this step with others)</span>'
    text = f"{step['seconds'] * 1000:.1f} ms"
    if run.baseline_s:
        text += (f" against the baseline's {run.baseline_s * 1000:.1f} ms a token ({step['seconds'] / run.baseline_s:.2f}×"
                 f" for {step['tokens']} token{'s' if step['tokens'] != 1 else ''})")
    return f'<span class="st-time">{esc(text)}</span>'


def step_html(run: StepperRun | None, index) -> str:
    if run is None or not run.steps:
        return IDLE
    i = _int(index, 1, 1, len(run.steps)) - 1
    step = run.steps[i]
    accepted = ("unknown" if step["accepted"] is None else "nothing: no draft" if step["drafted"] == 0
                else f"{step['accepted']} of {step['drafted'] or run.k}")  # drafted 0: the lookup found no match
    so_far = "".join(run.pieces[:step["start"]])
    tail = ("…" + so_far[-CONTEXT_CHARS:]) if len(so_far) > CONTEXT_CHARS else so_far
    note = f'<div class="st-note">{esc(run.note)}</div>' if run.note else ""
    return (f'<div class="stepper"><div class="st-head"><b>Step {i + 1} of {len(run.steps)}</b> · accepted '
            f'{esc(accepted)} · {_time_html(run, step)}</div>'
            f'<div class="st-text"><span class="st-sofar">{esc(tail)}</span>{_drafts_html(run, step)}</div>'
            f'<div class="st-legend">{_chip("accepted", "st-accepted", "")} {_chip("rejected", "st-rejected", "")} '
            f'{_chip("target token", "st-target", "")} {_chip("not checked", "st-greyed", "")}</div>{note}</div>')


def stepper_panel(tab: Section) -> None:
    """The stepper's components (inside the caller's layout, under the panes)."""
    with gr.Accordion("Step through the verification steps", open=True, elem_id="stepper"):
        with gr.Row(equal_height=True):
            tab.add("st_prev", gr.Button("◀ step", size="sm", scale=0, min_width=80, elem_id="st-prev"))
            tab.add("st_step", gr.Slider(1, 2, value=1, step=1, label="verification step", scale=4,
                                         elem_id="st-step"))
            tab.add("st_next", gr.Button("step ▶", size="sm", scale=0, min_width=80, elem_id="st-next"))
        tab.add("st_view", gr.HTML(IDLE, elem_id="stepper-view"))


def wire_stepper(tab: Section) -> None:
    """The slider and the arrows move the stepper over the session's run (the page's "run" State, a FinishedRun
    on the server; loaded after a run by `stepper_values`)."""

    def show(finished, index):
        return step_html(stepper_of(finished), index)

    tab["st_step"].input(show, inputs=[tab["run"], tab["st_step"]], outputs=tab["st_view"],
                         api_visibility="private", show_progress="hidden", queue=False)

    def move(by: int):
        def go(finished, index):
            run = stepper_of(finished)
            if run is None:
                return {tab["st_view"]: IDLE}
            i = _int(index, 1, 1, len(run.steps)) + by
            i = min(len(run.steps), max(1, i))
            return {tab["st_step"]: gr.update(value=i), tab["st_view"]: step_html(run, i)}
        return go

    for name, by in (("st_prev", -1), ("st_next", 1)):
        tab[name].click(move(by), inputs=[tab["run"], tab["st_step"]], outputs=[tab["st_step"], tab["st_view"]],
                        api_visibility="private", show_progress="hidden", queue=False)
