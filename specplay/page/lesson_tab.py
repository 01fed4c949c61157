"""The Lesson tab (Gradio): a presenter's guided walk through the operator's lesson (specplay.lesson): one
step at a time, its question, a button that runs the step on the engines (switching to its preset first
where the page allows it) through the Compare tab's own run machinery, and the answer once that run has
finished. Visitors pick steps only by their number; the lesson file is the operator's (`--lesson`)."""

from __future__ import annotations

import time
from typing import Callable

import gradio as gr

from specplay.lesson.load import Lesson
from specplay.page.compare_run import RunPlace, run_comparison
from specplay.page.compare_tab import RUN_OUTPUTS, wire_failed_runs, wire_run_views
from specplay.page.live_run import exports
from specplay.page.section import Section
from specplay.hosting.session import session_id
from specplay.page.views import badge_html, esc, esc_message

LOAD_WAIT_S = 900.0  # a step's preset loading (2-4 minutes on 2 CPU cores): then the step gives up
LESSON_OUTPUTS = ("progress", "result", "answer", "answered")
CLOSED = ('<div class="lesson-answer closed">The answer opens once this step\'s run has finished: '
          'run the step first.</div>')


# -- HTML (escaped: the lesson is the operator's text, but text all the same) -------------------------------
def _paragraphs(text: str) -> str:
    return "".join(f"<p>{esc(p.strip())}</p>" for p in text.split("\n\n") if p.strip())


def header_html(lesson: Lesson) -> str:
    return (f'<div class="lesson-head"><div class="lesson-title">{esc(lesson.title)}</div>'
            f'{_paragraphs(lesson.intro)}</div>')


def step_note(lesson: Lesson, index: int, offered: dict, current: str, allow_switching: bool) -> str | None:
    """Why this step can't simply run here (or what running it will do), or None when its preset is loaded."""
    step = lesson.steps[index]
    if step.preset == current:
        return None
    if step.preset not in offered:
        return (f"This step needs the preset {step.preset}, which this page doesn't offer (it can't run on this "
                "machine, or the operator left it out): Run this step opens its answer without a run.")
    if not allow_switching:
        return (f"This step needs the preset {step.preset}; switching presets is off on this page (the operator's "
                f"choice), so it can't run while {current} is loaded: Run this step opens its answer without a run.")
    return f"Running this step first loads the preset {step.preset} (a minute or more on a CPU)."


def step_html(lesson: Lesson, index: int, note: str | None) -> str:
    step = lesson.steps[index]
    settings = f"max tokens {step.max_tokens} · temperature {step.temperature:g}"
    look = f'<div class="lesson-look"><b>Look at:</b> {esc(step.look_at)}</div>' if step.look_at else ""
    note_html = f'<div class="lesson-note">{esc(note)}</div>' if note else ""
    return (f'<div class="lesson-step"><div class="lesson-count">Step {index + 1} of {len(lesson.steps)}</div>'
            f'<div class="lesson-step-title">{esc(step.title)}</div>'
            f'<div class="lesson-meta"><span class="chip">preset {esc(step.preset)}</span> '
            f'<span class="chip">{esc(settings)}</span></div>'
            f'<pre class="lesson-prompt">{esc(step.prompt.strip())}</pre>'
            f'<div class="lesson-question"><b>Question:</b> {esc(step.question.strip())}</div>{look}{note_html}</div>')


def answer_html(lesson: Lesson, index: int, ran: bool = True) -> str:
    label = "Answer:" if ran else "Answer (this page can't run the step):"
    return (f'<div class="lesson-answer open" role="region"><b>{label}</b>'
            f'{_paragraphs(lesson.steps[index].answer)}</div>')


def progress_html(text: str, kind: str = "info") -> str:
    return f'<div class="lesson-progress {kind}">{esc_message(text)}</div>' if text else ""


# -- the tab -------------------------------------------------------------------------------------------
def lesson_tab(lesson: Lesson) -> Section:
    """Lay the tab out (inside the caller's gr.Tab); wire it with `wire_lesson` once the page is built."""
    tab = Section()
    tab.add("head", gr.HTML(header_html(lesson), elem_id="lesson-head"))
    with gr.Row():
        with gr.Column(scale=1, min_width=240):
            tab.add("steps", gr.Radio([(f"{i + 1}. {s.title}", i) for i, s in enumerate(lesson.steps)], value=0,
                                      label="Steps", elem_id="lesson-steps"))
        with gr.Column(scale=3):
            tab.add("card", gr.HTML(step_html(lesson, 0, None), elem_id="lesson-step"))
            with gr.Row():
                tab.add("prev", gr.Button("◀ Previous", size="sm", elem_id="lesson-prev"))
                tab.add("run", gr.Button("Run this step", variant="primary", elem_id="lesson-run"))
                tab.add("stop", gr.Button("Stop", variant="stop", size="sm", elem_id="lesson-stop"))
                tab.add("open", gr.Button("Open in Compare", size="sm", elem_id="lesson-open"))
                tab.add("next", gr.Button("Next ▶", size="sm", elem_id="lesson-next"))
            tab.add("progress", gr.HTML("", elem_id="lesson-progress"))
            tab.add("result", gr.HTML("", elem_id="lesson-result"))
            tab.add("answer", gr.HTML(CLOSED, elem_id="lesson-answer"))
    tab.add("answered", gr.State([]))  # the steps this session has run: their answers stay open
    return tab


def _result_html(values: dict) -> str:
    """The run's verdict and factors, as the Compare tab draws them, and where to see the rest."""
    parts = [values.get("error") or "", values.get("badge") or "", values.get("explain") or ""]
    return "".join(parts) + ('<div class="lesson-more">The panes, charts and tables of this run are on the '
                             'Compare tab.</div>' if values.get("explain") else "")


def run_step(place: RunPlace, lesson: Lesson, switch: Callable, index, schedule, history: list, answered: list,
             session: str):
    """The step's run, as the page shows it: {compare output name: value} for the Compare tab's run outputs
    and {"lesson:" name: value} for this tab's. Switches to the step's preset first (where allowed) and
    waits for it to load; the answer opens when the run finished without error or stop."""
    i, step = lesson.step(index)
    manager = place.manager
    status = manager.status()
    note = step_note(lesson, i, manager.presets, status.preset, place.settings.allow_switching)
    if step.preset != status.preset and (step.preset not in manager.presets or not place.settings.allow_switching):
        # a step this page can't run: the presenter still gets the answer, marked as read without a run
        yield {"lesson:progress": progress_html(note, "refused"), "lesson:answer": answer_html(lesson, i, ran=False)}
        return
    if step.preset != status.preset:
        refusal = switch(step.preset)
        if refusal:
            yield {"lesson:progress": progress_html(refusal, "refused")}
            return
    waited = yield from _wait_ready(manager, step.preset)
    if waited is not None:
        yield {"lesson:progress": progress_html(waited, "refused")}
        return
    last = {}
    yield {"lesson:progress": progress_html(f"Running step {i + 1} on {step.preset}…"), "lesson:result": ""}
    for values in run_comparison(place, step.prompt, step.max_tokens, step.temperature, schedule, history, session):
        last = {**values, **exports(values)}
        yield {**last, "lesson:result": _result_html(last)}
    result = last.get("result") if isinstance(last.get("result"), dict) else {}
    if "explain" in last and not result.get("error") and not result.get("cancelled"):
        answered = sorted(set(answered) | {i})
        yield {"lesson:progress": "", "lesson:answer": answer_html(lesson, i), "lesson:answered": answered}
    else:
        yield {"lesson:progress": progress_html("The run didn't finish, so the answer stays closed: run the "
                                                "step again.", "refused")}


def _wait_ready(manager, preset: str):
    """Yield progress while `preset` loads; None once it is ready, else why not."""
    deadline = time.monotonic() + LOAD_WAIT_S
    while True:
        status = manager.status()
        if status.preset == preset and status.state == "ready":
            return None
        if status.preset != preset:
            return f"The page loaded {status.preset} meanwhile (another visitor's switch): run the step again."
        if status.state == "error":
            return f"{preset} failed to load: {status.message}"
        if time.monotonic() > deadline:
            return f"{preset} took longer than {LOAD_WAIT_S:g} s to load; run the step again later."
        pct = round(100 * status.progress)
        yield {"lesson:progress": progress_html(f"Loading {preset} for this step: {status.message} ({pct}%)")}
        time.sleep(1.0)


def wire_lesson(tab: Section, compare: Section, tabs, place: RunPlace, lesson: Lesson, switch: Callable) -> None:
    """Step choice, Previous/Next, Run this step (in the runs' concurrency group), Stop, Open in Compare.
    `switch(name)`: start loading a preset, or the reason it can't be (the header's switch)."""
    settings, manager = place.settings, place.manager

    def show(index, answered):
        i, _ = lesson.step(index)
        note = step_note(lesson, i, manager.presets, manager.status().preset, settings.allow_switching)
        return {tab["card"]: step_html(lesson, i, note), tab["progress"]: "", tab["result"]: "",
                tab["answer"]: answer_html(lesson, i) if i in (answered or []) else CLOSED}

    def move(by: int):
        return lambda index: gr.update(value=lesson.step(lesson.step(index)[0] + by)[0])

    shown = [tab[n] for n in ("card", "progress", "result", "answer")]
    tab["steps"].change(show, inputs=[tab["steps"], tab["answered"]], outputs=shown, api_visibility="private",
                        show_progress="hidden", queue=False)
    for name, by in (("prev", -1), ("next", 1)):
        tab[name].click(move(by), inputs=tab["steps"], outputs=tab["steps"], api_visibility="private",
                        show_progress="hidden", queue=False)

    def run(index, schedule, history, answered, request: gr.Request):
        for values in run_step(place, lesson, switch, index, schedule, history, answered, session_id(request)):
            mine = {tab[k.split(":", 1)[1]]: v for k, v in values.items() if k.startswith("lesson:")}
            yield {**compare.out({k: v for k, v in values.items() if not k.startswith("lesson:")}), **mine}

    stepped = tab["run"].click(run, inputs=[tab["steps"], compare["schedule"], compare["history"], tab["answered"]],
                               outputs=compare.list(RUN_OUTPUTS) + tab.list(LESSON_OUTPUTS), api_name="lesson_step",
                               concurrency_limit=1, concurrency_id="engines", show_progress="hidden")
    wire_failed_runs(compare, place, (stepped,))  # its last frame lost: the Compare tab's buttons come back
    wire_run_views(compare, stepped)

    def stop(request: gr.Request):
        place.registry.cancel(session_id(request))

    tab["stop"].click(stop, api_visibility="private", queue=False, show_progress="hidden")

    def open_in_compare(index):
        _, step = lesson.step(index)
        refusal = switch(step.preset) if step.preset != manager.status().preset else None
        return {compare["prompt"]: step.prompt, compare["max_tokens"]: step.max_tokens,
                compare["temperature"]: step.temperature, tab["progress"]: progress_html(refusal or "", "refused"),
                tabs: gr.Tabs(selected="compare") if not refusal else gr.update()}

    tab["open"].click(open_in_compare, inputs=tab["steps"], api_visibility="private", show_progress="hidden",
                      outputs=[compare["prompt"], compare["max_tokens"], compare["temperature"], tab["progress"],
                               tabs], concurrency_limit=1, concurrency_id="engines")
