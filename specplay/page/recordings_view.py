"""Recorded runs on the Compare tab (issue 42, 2): the operator's folder of recordings (app.py --recordings,
by default the project's own, made on a GPU) offered in a picker; a recording picked becomes the session's
finished run (a FinishedRun, its Comparison rebuilt by run.recorded) and plays as a race at its recorded
times, then shows its verdict, explanation, table and charts, and the stepper and what-if read it, as they
do a run streamed here. Every frame of it says where it was made ("recorded on <device>, vLLM <version>,
<date>"), and a recording made with dummy weights says its acceptance is synthetic.

No visitor's input becomes a path: the folder is read once, at start, each file through the recording's own
validated reader (run/recording.py), a bad one skipped with one log line; the picker offers the names found
then, and a pick is looked up among them."""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass
from datetime import timezone

import gradio as gr

from specplay.core.events import BASELINE, GenerationRequest, ROLES
from specplay.hosting.session import session_id
from specplay.hosting.settings import scrub
from specplay.page import views
from specplay.page.compare_run import RunPlace, replay_run, served
from specplay.page.finished_run import FinishedRun
from specplay.page.live_run import LiveRun
from specplay.page.section import Section
from specplay.presets.catalog import Preset
from specplay.run.recorded import comparison_of
from specplay.run.recording import Provenance, Recording, RecordingError, read_playable, recording_paths

# What playing a recording writes: a run's outputs but the session's history (a recording isn't a run of
# this session), the buttons, and the session's finished run
PLAY_OUTPUTS = ("error", "badge", "explain", "pane_b", "pane_s", "summary", "fig_rate", "fig_accept", "fig_mem",
                "result", "result_file", "summary_md", "share_link", "run_btn", "runs_btn", "replay_btn", "run")
UNKNOWN = "Pick one of the recordings this page offers."


@dataclass(frozen=True)
class Shelved:
    """One recording the page offers: the file read and checked at start, its preset, and its labels."""

    name: str  # its file's name without .json: what the picker sends
    recording: Recording
    preset: Preset
    label: str  # the provenance line shown with everything it draws
    choice: str  # the picker's entry


def provenance_line(made: Provenance) -> str:
    """"A recording, not a live run: recorded on <device>, vLLM <version>, <date> (<preset>)." and, for dummy
    weights, that its acceptance is synthetic."""
    version = made.vllm("vLLM version not recorded")
    line = (f"A recording, not a live run: recorded on {made.device_name}, {version}, "
            f"{_date(made)} ({made.preset}).")
    if made.dummy_weights:
        line += (" Made with dummy weights: its acceptance is synthetic (the preset's set rates, not a model's), "
                 "so its speed is real and its text is not.")
    return line


def _date(made: Provenance) -> str:
    return made.made_at.astimezone(timezone.utc).strftime("%Y-%m-%d")


def _choice(made: Provenance) -> str:
    version = made.vllm("vLLM ?")
    synthetic = " · synthetic acceptance" if made.dummy_weights else ""
    return f"{made.preset} · {made.device_name} · {version} · {_date(made)}{synthetic}"


def load_shelf(folder, log=None) -> dict[str, Shelved]:
    """The recordings of `folder` (None or "": none), by file name without .json, each read and checked now;
    a file that isn't one, or whose preset this version doesn't know, is skipped with one line on `log`."""
    log = log or (lambda line: print(line, file=sys.stderr, flush=True))
    if not folder:
        return {}
    from specplay.presets.catalog import load_presets

    presets, shelf = load_presets(), {}
    for path in recording_paths(folder):
        try:
            recording, preset = read_playable(path, presets)
        except RecordingError as exc:
            log(f"app.py: --recordings: skipped {exc}")
            continue
        shelf[path.stem] = shelve(path.stem, recording, preset)
    return shelf


def shelve(name: str, recording: Recording, preset: Preset) -> Shelved:
    """One recording as the page offers it (the picker's, or a lesson step's: played the same way)."""
    return Shelved(name, recording, preset, provenance_line(recording.made), _choice(recording.made))


_TOKENIZERS: dict = {}
_TOKENIZERS_LOCK = threading.Lock()


def _decoders(preset: Preset) -> dict:
    """Per role, the recording's target's tokenizer's decode (loaded once per preset; none for token-id
    presets, or where it can't be had here: the panes then show token ids)."""
    if preset.prompt_input != "text":
        return {}
    with _TOKENIZERS_LOCK:
        if preset.name not in _TOKENIZERS:
            try:
                from specplay.bench.context import target_tokenizer

                tokenizer = target_tokenizer(preset)
                _TOKENIZERS[preset.name] = lambda ids: tokenizer.decode(list(ids))
            except Exception as exc:  # a model folder not on this machine: ids rather than no recording
                print(f"app.py: --recordings: no tokenizer for {preset.name}: {scrub(str(exc), 200)}",
                      file=sys.stderr)
                _TOKENIZERS[preset.name] = None
        decode = _TOKENIZERS[preset.name]
    return {role: decode for role in ROLES} if decode else {}


def recorded_live(shelved: Shelved) -> LiveRun:
    """The recording as the page shows a run: its request, its streams on their recorded clock, its result."""
    recording, preset = shelved.recording, shelved.preset
    run = recording.run  # its run id names it on this page ("Link to this run" keys a link by it)
    run = run.model_copy(update={"run_id": f"recording-{shelved.name}"}) if run.run_id is None else run
    ids = recording.prompt_token_ids
    request = GenerationRequest(prompt=recording.prompt or "", prompt_token_ids=ids,
                                max_tokens=run.request.max_tokens if run.request else max(1, run.speculative.tokens),
                                temperature=run.request.temperature if run.request else 0.0)
    decoders = _decoders(preset)
    comparison = comparison_of(run, decoders.get(BASELINE), ids)
    memory = {track.role: track for track in recording.memory}
    return LiveRun.recorded(preset, request, run, comparison, decoders, recording.made.device or "cpu",
                            shelved.label, memory)


def play_recording(place: RunPlace, shelf: dict, name, session: str):
    """The picker's handler: the recording `name` (one the page offers) as the session's finished run, played
    at its recorded times, then its verdict and figures; {output name: value} frames. Never raises."""
    idle = {"run_btn": gr.update(interactive=place.manager.pair is not None)}
    shelved = shelf.get(name) if isinstance(name, str) else None
    if shelved is None:
        yield {"error": views.error_html(UNKNOWN), **idle}
        return
    try:
        live = recorded_live(shelved)
        finished = FinishedRun(live, live.result(), session)
        yield {"error": "", "share_link": "", "run": None, "result": {},
               "explain": views.recorded_html(shelved.label) + views.explain_html(None)}
        if live.replayable:  # a sequential run: both panes race on one clock, as the Replay button plays it
            yield from replay_run(place.manager, finished)
        final = {key: value for key, value in live.final().items() if key not in ("history_df", "history_file")}
        final["summary"] = labelled_table(final["summary"], shelved.label)  # and so its Markdown
        yield {**final, **idle, "run": finished, "replay_btn": gr.update(interactive=live.replayable)}
    except GeneratorExit:
        raise
    except Exception as exc:  # the page stays up; the message says what broke
        yield {"error": views.error_html(scrub(f"The recording failed to play: {type(exc).__name__}: {exc}")),
               **idle, "run": None}


def labelled_table(summary, label: str):
    """The run's table under a first row saying it is a recording, and where it was made."""
    import pandas as pd

    columns = list(summary.columns)
    row = pd.DataFrame([[label] + [""] * (len(columns) - 1)], columns=columns)
    return pd.concat([row, summary], ignore_index=True)


def recordings_panel(tab: Section, shelf: dict) -> None:
    """The picker (only where the page offers recordings)."""
    if not shelf:
        return
    tab.add("recording", gr.Dropdown(
        choices=[(shelved.choice, name) for name, shelved in shelf.items()], value=None, interactive=True,
        label="Or play a recorded run, made elsewhere (a GPU): it races at its recorded times",
        elem_id="recording"))


def wire_recordings(tab: Section, place: RunPlace):
    """Picking a recording plays it (not holding the engines: the replays' group); returns the event, or None
    where the page offers none."""
    if "recording" not in tab.c:
        return None

    def play_recording_event(name, request: gr.Request):
        session = session_id(request)
        for values in served(play_recording(place, place.recordings, name, session), place, session):
            yield tab.out({**values, "runs_btn": values["run_btn"]} if "run_btn" in values else values)

    # select, not input: Gradio 6.31's dropdown sent `input` twice for one pick (seen in headless chromium:
    # two joins, the second refused by the guard's one pending event a session, as an error toast)
    return tab["recording"].select(play_recording_event, inputs=tab["recording"], outputs=tab.list(PLAY_OUTPUTS),
                                   api_name="play_recording", concurrency_id="replay", show_progress="hidden")
