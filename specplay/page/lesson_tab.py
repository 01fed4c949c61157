"""The Lesson tab (Gradio): a presenter's guided walk through the operator's lesson (specplay.lesson): one
step at a time, its question, a button that runs the step on the engines (switching to its preset first
where the page allows it) through the Compare tab's own run machinery, and the answer once that run has
finished. A step that names a recording plays it instead, through the Compare tab's picker's own code
(recordings_view.play_recording), labelled as recorded, never as live; a live step may set a recording's
figures beside its own once it has run. Visitors pick steps only by their number; the lesson file (and the
recordings it names, read when it loaded) is the operator's (`--lesson`)."""

from __future__ import annotations

import time
from typing import Callable

import gradio as gr

from specplay.hosting.cancel import stops_first
from specplay.lesson.load import Lesson, LessonRecording
from specplay.page.compare_run import RunPlace, run_comparison, served
from specplay.page.compare_tab import RUN_OUTPUTS, wire_failed_runs, wire_run_views
from specplay.page.finished_run import FinishedRun
from specplay.page.recordings_view import play_recording, provenance_line, shelve
from specplay.page.follow import LESSON, lesson_part
from specplay.page.section import Section
from specplay.hosting.session import session_id
from specplay.page.views import esc, esc_message
from specplay.run.explain import beside_sentence

LOAD_WAIT_S = 900.0  # a step's preset loading (2-4 minutes on 2 CPU cores): then the step gives up
LESSON_OUTPUTS = ("progress", "result", "answer", "answered")
SHOWN = ("card", "progress", "result", "answer")  # what choosing a step draws
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
    if step.recording is not None or step.preset == current:  # a recording needs no engines
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
    if step.recording is not None:
        return _recording_step_html(lesson, index)
    settings = f"max tokens {step.max_tokens} · temperature {step.temperature:g}"
    beside = f' <span class="chip">beside: recording {esc(step.beside)}</span>' if step.beside else ""
    return _card(lesson, index, f'<span class="chip">preset {esc(step.preset)}</span> '
                                f'<span class="chip">{esc(settings)}</span>{beside}', step.prompt.strip(), note)


def _recording_step_html(lesson: Lesson, index: int) -> str:
    """A step that plays a recording: its preset, settings and prompt are the recording's, and it says so."""
    step = lesson.steps[index]
    entry = lesson.recordings[step.recording]
    recording, request = entry.recording, entry.recording.run.request
    settings = (f"max tokens {request.max_tokens} · temperature {request.temperature:g}" if request
                else "settings not recorded")
    prompt = recording.prompt if recording.prompt is not None else (
        f"({len(recording.prompt_token_ids or ())} prompt token ids: this preset is given token ids, not text)")
    chips = (f'<span class="chip">recording {esc(step.recording)}</span> '
             f'<span class="chip">preset {esc(entry.preset.name)}</span> <span class="chip">{esc(settings)}</span>')
    return _card(lesson, index, chips, prompt.strip(), provenance_line(recording.made))


def _card(lesson: Lesson, index: int, chips: str, prompt: str, note: str | None) -> str:
    step = lesson.steps[index]
    look = f'<div class="lesson-look"><b>Look at:</b> {esc(step.look_at)}</div>' if step.look_at else ""
    note_html = f'<div class="lesson-note">{esc(note)}</div>' if note else ""
    return (f'<div class="lesson-step"><div class="lesson-count">Step {index + 1} of {len(lesson.steps)}</div>'
            f'<div class="lesson-step-title">{esc(step.title)}</div><div class="lesson-meta">{chips}</div>'
            f'<pre class="lesson-prompt">{esc(prompt)}</pre>'
            f'<div class="lesson-question"><b>Question:</b> {esc(step.question.strip())}</div>{look}{note_html}</div>')


def beside_html(run, entry: LessonRecording, here: str, prompt: str) -> str:
    """The live run's figures (`run`, a RunResult made on `here`) beside a recording's, the sentence on which
    factor makes the difference, and what the recording is (its provenance line; a prompt other than this
    step's said as such)."""
    there = entry.recording.run

    def row(label: str, figure) -> str:
        return f"<tr><th>{esc(label)}</th><td>{esc(figure(run))}</td><td>{esc(figure(there))}</td></tr>"

    times = lambda value: "–" if value is None else f"{value:.2f}×"  # noqa: E731
    rows = (row("speedup", lambda r: times(r.speedup))
            + row("tokens per step (speculative ÷ baseline)", lambda r: times(r.tokens_per_step_ratio))
            + row("step time (speculative ÷ baseline)", lambda r: times(r.step_cost_ratio))
            + row("drafted tokens accepted", lambda r: "–" if r.speculative.acceptance_rate is None
                  else f"{r.speculative.acceptance_rate:.0%} (k={r.num_speculative_tokens})")
            + row("tokens generated", lambda r: str(r.speculative.tokens)))
    made = entry.recording.made
    head = (f"<tr><th></th><th>this run, live: {esc(run.preset or '')} on {esc(here)}</th>"
            f"<th>recorded: {esc(made.preset)} on {esc(made.device_name)}</th></tr>")
    same = entry.recording.prompt is not None and entry.recording.prompt.strip() == prompt.strip()
    prompt_note = "" if same else (
        "Not the same prompt: the recording was given "
        + (f"{len(entry.recording.prompt_token_ids or ())} token ids" if entry.recording.prompt is None
           else "another prompt") + ", so its tokens per step are its own workload's.")
    sentence = beside_sentence(run, there, "this run", "the recording") or ""
    return (f'<div class="lesson-beside" id="lesson-beside"><table>{head}{rows}</table>'
            f'<div class="why-sentence">{esc(sentence)}</div>'
            f'<div class="recorded" role="note">{esc(provenance_line(made))} {esc(prompt_note)}</div></div>')


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
    if step.recording is not None:
        yield from _play_step(place, lesson, i, answered, session)
        return
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
    # the Compare tab's run, served as it serves it (its files' names, its exports)
    frames = run_comparison(place, step.prompt, step.max_tokens, step.temperature, schedule, history, session)
    for values in served(frames, place, session):
        last = values
        yield {**last, "lesson:result": _result_html(last)}
    run = _ran(last)
    if step.beside and run is not None:
        beside = beside_html(run.result, lesson.recordings[step.beside], manager.hardware.describe(), step.prompt)
        yield {"lesson:result": _result_html(last) + beside}
    yield _finished(lesson, i, last, answered)


def _play_step(place: RunPlace, lesson: Lesson, i: int, answered: list, session: str):
    """A step that names a recording: played by the picker's own handler (the same frames, label and figures,
    served as the picker's are), then the answer as after a live run."""
    entry = lesson.recordings[lesson.steps[i].recording]
    shelf = {entry.stem: shelve(entry.stem, entry.recording, entry.preset)}  # read when the lesson loaded
    last = {}
    yield {"lesson:progress": progress_html(f"Playing step {i + 1}'s recording at its recorded times (not a live "
                                            "run: no engines)…"), "lesson:result": ""}
    for values in served(play_recording(place, shelf, entry.stem, session), place, session):
        last = {**values, "runs_btn": values["run_btn"]} if "run_btn" in values else values
        yield {**last, "lesson:result": _result_html(last)}
    yield _finished(lesson, i, last, answered)


def _ran(last: dict) -> FinishedRun | None:
    """The step's run (or recording) from its last frame, where it finished without error or stop."""
    run = last.get("run")  # the session's finished run, typed (None: the run failed)
    return run if isinstance(run, FinishedRun) and "explain" in last and not run.result.stopped else None


def _finished(lesson: Lesson, i: int, last: dict, answered: list) -> dict:
    """The answer opens when the step's run (or recording) finished."""
    if _ran(last) is not None:
        answered = sorted(set(answered) | {i})
        return {"lesson:progress": "", "lesson:answer": answer_html(lesson, i), "lesson:answered": answered}
    return {"lesson:progress": progress_html("The run didn't finish, so the answer stays closed: run the step "
                                             "again.", "refused")}


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

    def show(index, answered, request: gr.Request):
        room = place.room
        shown = room.current([LESSON + n for n in SHOWN]) if room.follows(request) else {}
        if shown:  # a follower's page, its step set by the room: the presenter's step as the presenter sees it
            return {tab[name[len(LESSON):]]: value for name, value in shown.items()}
        i, _ = lesson.step(index)
        note = step_note(lesson, i, manager.presets, manager.status().preset, settings.allow_switching)
        values = {"card": step_html(lesson, i, note), "progress": "", "result": "",
                  "answer": answer_html(lesson, i) if i in (answered or []) else CLOSED}
        if room.presents(request):
            room.publish({LESSON + "steps": i, **{LESSON + name: value for name, value in values.items()}})
        return tab.out(values)

    def move(by: int):
        return lambda index: gr.update(value=lesson.step(lesson.step(index)[0] + by)[0])

    tab["steps"].change(show, inputs=[tab["steps"], tab["answered"]], outputs=tab.list(SHOWN), api_visibility="private",
                        show_progress="hidden", queue=False)
    for name, by in (("prev", -1), ("next", 1)):
        tab[name].click(move(by), inputs=tab["steps"], outputs=tab["steps"], api_visibility="private",
                        show_progress="hidden", queue=False)

    def run(index, schedule, history, answered, request: gr.Request):
        place.room.publish({LESSON + "steps": lesson.step(index)[0]})
        for values in run_step(place, lesson, switch, index, schedule, history, answered, session_id(request)):
            place.room.publish(lesson_part(values))  # its Compare frames are in the room already (served)
            mine = {tab[k.split(":", 1)[1]]: v for k, v in values.items() if k.startswith("lesson:")}
            yield {**compare.out({k: v for k, v in values.items() if not k.startswith("lesson:")}), **mine}

    stepped = tab["run"].click(run, inputs=[tab["steps"], compare["schedule"], compare["history"], tab["answered"]],
                               outputs=compare.list(RUN_OUTPUTS) + tab.list(LESSON_OUTPUTS), api_name="lesson_step",
                               concurrency_limit=1, concurrency_id="engines", show_progress="hidden")
    wire_failed_runs(compare, place, (stepped,))  # its last frame lost: the Compare tab's buttons come back
    wire_run_views(compare, stepped)

    def stop(request: gr.Request):
        place.registry.cancel(session_id(request))

    tab["stop"].click(stops_first(stop, place.registry), api_visibility="private", queue=False,
                      show_progress="hidden")  # answered before Gradio's thread pool (hosting/answered_first.py)

    def open_in_compare(index):
        _, step = lesson.step(index)
        if step.recording is not None:  # nothing to fill in: the recording, once played, is on the Compare tab
            return {compare["prompt"]: gr.update(), compare["max_tokens"]: gr.update(),
                    compare["temperature"]: gr.update(), tab["progress"]: "", tabs: gr.Tabs(selected="compare")}
        refusal = switch(step.preset) if step.preset != manager.status().preset else None
        return {compare["prompt"]: step.prompt, compare["max_tokens"]: step.max_tokens,
                compare["temperature"]: step.temperature, tab["progress"]: progress_html(refusal or "", "refused"),
                tabs: gr.Tabs(selected="compare") if not refusal else gr.update()}

    tab["open"].click(open_in_compare, inputs=tab["steps"], api_visibility="private", show_progress="hidden",
                      outputs=[compare["prompt"], compare["max_tokens"], compare["temperature"], tab["progress"],
                               tabs], concurrency_limit=1, concurrency_id="engines")
