"""The Compare tab (Gradio): the preset's `vllm serve` lines, prompt and controls, the two streaming panes,
the identity badge, the speedup's factors, live charts and tables; it builds its own components into a
Section (output names from `live_run`) and wires Run, Stop, Replay and the examples. What a run shows is
computed by `compare_run`; what the status poll changes here, by `status_update`."""

from __future__ import annotations

import gradio as gr

from specplay.core.events import BASELINE, SPECULATIVE
from specplay.page import views
from specplay.page.charts import history_table
from specplay.hosting.cancel import stops_first
from specplay.hosting.guard import address_key, client_address
from specplay.page.compare_run import MAX_RUNS, RunPlace, compare_series, replay_run, run_comparison, served
from specplay.page.follow import published
from specplay.page.inputs import (DEFAULT_SCHEDULE, EXAMPLES, SCHEDULE_INFO, SCHEDULES, TEMPERATURE_MAX,
                                  TOKEN_EXAMPLES, max_tokens_limit, token_examples, workload_examples)
from specplay.page.live_run import API_OUTPUTS, REPLAY_OUTPUTS, empty_frame
from specplay.page.recordings_view import recordings_panel, wire_recordings
from specplay.hosting.manager import ManagerStatus, PairManager
from specplay.page.section import Section
from specplay.hosting.session import session_id
from specplay.page.share import NO_RUN, run_link
from specplay.page.stepper import STEPPER_OUTPUTS, stepper_panel, stepper_values, wire_stepper
from specplay.page.whatif_view import WHATIF_OUTPUTS, WHATIF_SLIDERS, whatif_panel, whatif_values, wire_whatif
from specplay.presets.catalog import Preset
from specplay.presets.engines import serve_texts

# Page-only outputs of a run, after API_OUTPUTS: buttons, the stepper's and what-if's views and per-session
# State aren't part of the API.
RUN_INPUTS = ("prompt", "max_tokens", "temperature", "schedule", "history")
RUN_OUTPUTS = API_OUTPUTS + ("run_btn", "stop_btn", "replay_btn", "history", "run", "runs_btn")
# What a finished run loads after its last frame (`wire_run_views`): the stepper and the what-if
VIEW_OUTPUTS = STEPPER_OUTPUTS + WHATIF_SLIDERS + WHATIF_OUTPUTS
# What a failed run event sets back (its last frame never came)
IDLE_BUTTONS = ("run_btn", "runs_btn", "stop_btn", "replay_btn")
# What the status poll redraws on this tab when the engines' state or the preset changes.
STATUS_OUTPUTS = ("run_btn", "runs_btn", "serve_b", "serve_s", "max_tokens", "legend", "prompt", "examples_text",
                  "examples_ids")


def compare_tab(manager: PairManager, recordings: dict | None = None) -> Section:
    """Lay the tab out (inside the caller's gr.Tab); wire it with `wire_compare` once the page is built.
    `recordings`: the recorded runs the page offers (recordings_view.load_shelf), in a picker under the prompt."""
    tab, start = Section(), empty_frame(manager.preset)
    _serve_panel(tab)  # near the top: the preset's lesson in vLLM's own terms
    _prompt_panel(tab, manager)
    recordings_panel(tab, recordings or {})
    _panes(tab, start, manager.preset.num_speculative_tokens)
    _stats(tab, start)
    return tab


def _serve_panel(tab: Section) -> None:
    with gr.Accordion("Run it yourself: the `vllm serve` lines for this preset", open=False):
        tab.add("serve_b", gr.Code(language="shell", label="baseline", interactive=False, elem_id="serve-baseline"))
        tab.add("serve_s", gr.Code(language="shell", label="speculative", interactive=False,
                                   elem_id="serve-speculative"))


def _prompt_panel(tab: Section, manager: PairManager) -> None:
    limit = max(max_tokens_limit(p) for p in manager.presets.values())
    token_mode = manager.preset.prompt_input == "token_ids"  # a dummy-weight preset has no tokenizer
    with gr.Row():
        with gr.Column(scale=4):
            # Gradio's Textbox with lines > 1 submits on Shift+Enter (wired to Run in wire_compare)
            tab.add("prompt", gr.Textbox(label="Prompt (Shift+Enter runs)", lines=5, max_lines=14,
                                         value=(TOKEN_EXAMPLES if token_mode else EXAMPLES)["rewrite"],
                                         elem_id="prompt"))
            _examples(tab, token_mode)
        with gr.Column(scale=1, min_width=220):
            tab.add("max_tokens", gr.Slider(1, limit, value=manager.preset.default_max_tokens, step=1,
                                            label="Max tokens", elem_id="max-tokens"))
            tab.add("temperature", gr.Slider(0.0, TEMPERATURE_MAX, value=0.0, step=0.05,
                                             label="Temperature (0 = greedy: outputs should match)",
                                             elem_id="temperature"))
            tab.add("schedule", gr.Radio([(label, key) for key, label in SCHEDULES.items()],
                                         value=DEFAULT_SCHEDULE[manager.hardware.device], label="Schedule",
                                         info=SCHEDULE_INFO, elem_id="schedule"))
            with gr.Row():
                tab.add("run_btn", gr.Button("Run", variant="primary", interactive=False, elem_id="run"))
                tab.add("stop_btn", gr.Button("Stop", variant="stop", interactive=False, elem_id="stop"))
                tab.add("replay_btn", gr.Button("Replay race", interactive=False, elem_id="replay"))
            # the same prompt 3 times in one event: a pooled speedup with a narrower interval (compare_series)
            tab.add("runs_btn", gr.Button(f"Run {MAX_RUNS}× (pooled interval)", interactive=False, size="sm",
                                          elem_id="run-series"))
    tab.add("error", gr.HTML(elem_id="page-error"))


def _examples(tab: Section, token_mode: bool) -> None:
    """Prompts from the bench's workload files (qa, summarize, rewrite first: where n-gram pays), or token
    ids for the dummy-weight presets; the status poll shows the set the loaded preset takes."""
    for name, examples, visible, elem_id in (
            ("examples_text", workload_examples(), not token_mode, "examples-text"),
            ("examples_ids", token_examples(), token_mode, "examples-ids")):
        block = gr.Examples([[prompt] for _, prompt in examples], inputs=tab["prompt"],
                            example_labels=[label for label, _ in examples], label="Examples (from the bench's workloads)"
                            if name == "examples_text" else "Examples (token ids)", examples_per_page=6,
                            elem_id=elem_id, visible=visible, api_visibility="private")
        tab.add(name, block.dataset)


def _panes(tab: Section, start: dict, k: int) -> None:
    tab.add("badge", gr.HTML(start["badge"], elem_id="badge"))
    tab.add("explain", gr.HTML(start["explain"], elem_id="explain"))
    whatif_panel(tab)  # beside the factors: the standard model at other acceptance, k and draft cost
    with gr.Row(equal_height=False):
        for name, elem_id in (("pane_b", "baseline-pane"), ("pane_s", "speculative-pane")):
            with gr.Column(min_width=320):
                tab.add(name, gr.HTML(start[name], elem_id=elem_id))
                if name == "pane_s":
                    tab.add("legend", gr.HTML(views.legend_html(k), elem_id="legend"))
    stepper_panel(tab)  # after a run: its verification steps one at a time
    with gr.Row(equal_height=True):  # a link to this run as the page shows it (page/share.py)
        tab.add("share_btn", gr.Button("Link to this run", size="sm", scale=0, min_width=160, elem_id="share-run"))
        tab.add("share_link", gr.Textbox(show_label=False, interactive=False, buttons=["copy"], scale=4,
                                         placeholder="After a run: a link that shows it to whoever you give it",
                                         elem_id="run-link"))


def _stats(tab: Section, start: dict) -> None:
    tab.add("summary", gr.DataFrame(start["summary"], label="This run", interactive=False, elem_id="summary"))
    with gr.Row():
        for name, label, elem_id in (("fig_rate", "tokens/s", "chart-rate"),
                                     ("fig_accept", "acceptance", "chart-acceptance"),
                                     ("fig_mem", "memory", "chart-memory")):
            tab.add(name, gr.Plot(start[name], label=label, elem_id=elem_id))
    with gr.Accordion("Session history", open=True):
        tab.add("history_df", gr.DataFrame(history_table([]), interactive=False, elem_id="history"))
        tab.add("history_file", gr.DownloadButton("Download history (CSV)", value=None, size="sm",
                                                  elem_id="history-csv"))
    with gr.Accordion("This run as Markdown (copy into an issue)", open=False):
        tab.add("summary_md", gr.Code("", language="markdown", interactive=False, elem_id="summary-md"))
    with gr.Accordion("Raw result (JSON)", open=False):
        tab.add("result_file", gr.DownloadButton("Download the run (JSON)", value=None, size="sm",
                                                 elem_id="result-json"))
        tab.add("result", gr.JSON(elem_id="result"))


def status_update(manager: PairManager, status: ManagerStatus, preset: Preset) -> dict:
    """This tab's part of a status redraw: Run enabled only when ready, and what depends on the preset."""
    lines = serve_texts(preset, manager.hardware)
    token_mode = preset.prompt_input == "token_ids"
    return {
        "run_btn": gr.update(interactive=status.state == "ready"),
        "runs_btn": gr.update(interactive=status.state == "ready"),
        "serve_b": lines[BASELINE], "serve_s": lines[SPECULATIVE],
        "max_tokens": gr.update(maximum=max_tokens_limit(preset)),
        "legend": views.legend_html(preset.num_speculative_tokens),
        "prompt": gr.update(placeholder="token ids, e.g. 1000, 1001, 1002" if token_mode else "Type a prompt"),
        "examples_text": gr.update(visible=not token_mode), "examples_ids": gr.update(visible=token_mode),
    }


def wire_compare(tab: Section, place: RunPlace) -> None:
    """Run (queued with the switches: one holder of the engines at a time), its replay, Stop, the examples."""
    tab.add("history", gr.State([]))
    tab.add("run", gr.State(None))  # the session's last finished run (a FinishedRun), on the server only
    wire_whatif(tab)
    wire_stepper(tab)

    def streamed(frames, session: str):
        for values in served(frames, place, session):  # file names nothing shown gives away, and the exports
            if "run_btn" in values:  # both Run buttons together; a link names the run it was made for
                values = {**values, "runs_btn": values["run_btn"], "share_link": ""}
            yield tab.out(values)

    def inputs_shown(prompt, max_tokens, temperature, schedule):  # in a room, followers see what runs
        place.room.publish({"prompt": prompt, "max_tokens": max_tokens, "temperature": temperature,
                            "schedule": schedule})

    def run(prompt, max_tokens, temperature, schedule, history, request: gr.Request):
        session = session_id(request)
        inputs_shown(prompt, max_tokens, temperature, schedule)
        yield from streamed(run_comparison(place, prompt, max_tokens, temperature, schedule, history, session),
                            session)

    def run_series(prompt, max_tokens, temperature, schedule, history, request: gr.Request):
        session = session_id(request)
        inputs_shown(prompt, max_tokens, temperature, schedule)
        yield from streamed(compare_series(place, prompt, max_tokens, temperature, schedule, history, session),
                            session)

    def replay(run):
        for values in published(replay_run(place.manager, run), place.room):
            yield tab.out({**values, "runs_btn": values["run_btn"]} if "run_btn" in values else values)

    replay_outputs = tab.list(REPLAY_OUTPUTS + ("run_btn", "runs_btn", "replay_btn"))
    # Run, or Shift+Enter in the prompt (Gradio submits a multi-line Textbox on Shift+Enter): one event
    ran = gr.on(
        [tab["run_btn"].click, tab["prompt"].submit], run, inputs=tab.list(RUN_INPUTS),
        outputs=tab.list(RUN_OUTPUTS), api_name="run", concurrency_limit=1, concurrency_id="engines",
        # "full": a waiting visitor sees "queue: 2/5 | 3.1s" on the badge until the run starts ("minimal"
        # draws that text invisibly on an HTML component in Gradio 6.31: seen in headless chromium)
        show_progress="full", show_progress_on=[tab["badge"]],
    )
    ran.then(replay, inputs=tab["run"], outputs=replay_outputs, api_visibility="private", concurrency_limit=None,
             show_progress="hidden")
    # "Run 3×": one queued event in the runs' group (the guard's one pending event a session covers it)
    series = tab["runs_btn"].click(run_series, inputs=tab.list(RUN_INPUTS), outputs=tab.list(RUN_OUTPUTS),
                                   api_name="run_series", concurrency_limit=1, concurrency_id="engines",
                                   show_progress="full", show_progress_on=[tab["badge"]])
    played = wire_recordings(tab, place)  # a recorded run picked: the session's finished run, as a run's is
    wire_failed_runs(tab, place, (ran, series) + ((played,) if played else ()))
    wire_run_views(tab, ran, series, *((played,) if played else ()))
    tab["replay_btn"].click(replay, inputs=tab["run"], outputs=replay_outputs, api_visibility="private",
                            concurrency_limit=None, show_progress="hidden")
    _wire_share(tab, place)
    _wire_stop(tab, place)


def _wire_stop(tab: Section, place: RunPlace) -> None:
    def stop(request: gr.Request):
        place.registry.cancel(session_id(request))
        return gr.update(interactive=False)

    # not queued: Stop must work when the queue is full of waiting runs; answered before Gradio's thread pool
    # (hosting/answered_first.py), with the handler's own output
    stop = stops_first(stop, place.registry, [gr.update(interactive=False)])
    tab["stop_btn"].click(stop, outputs=tab["stop_btn"], api_name="stop", queue=False, show_progress="hidden")


def wire_run_views(tab: Section, *events) -> None:
    """After a run event (a run, a series, a lesson step): the stepper and the what-if load the session's run
    from its State on the server. Unqueued, writing no State; not part of the run's API outputs."""

    def views(run):
        return tab.out({**stepper_values(run), **whatif_values(run)})

    for event in events:
        event.then(views, inputs=tab["run"], outputs=tab.list(VIEW_OUTPUTS), api_visibility="private", queue=False,
                   show_progress="hidden")


def wire_failed_runs(tab: Section, place: RunPlace, events) -> None:
    """A run event that failed in the browser (its stream lost, or ended by the guard as a session that wasn't
    reading) never sent its last frame, and Gradio's browser code runs no .then() after a failure: the
    buttons come back here, or the page stays busy for good (seen on real CPU engines: issue 31, Esc)."""

    def idle():
        ready = place.manager.pair is not None
        return tab.out({"run_btn": gr.update(interactive=ready), "runs_btn": gr.update(interactive=ready),
                        "stop_btn": gr.update(interactive=False), "replay_btn": gr.update(interactive=False)})

    for event in events:
        event.failure(idle, outputs=tab.list(IDLE_BUTTONS), queue=False, api_visibility="private",
                      show_progress="hidden")


# What a shared run leaves out (page/share.py): the session's history and its private file links
PRIVATE_OUTPUTS = ("history_df", "history_file", "result_file", "share_link")
# The link as the browser has it: the page's own address with ?deep_link=NAME (the server can't know it
# behind a proxy); a message (no link yet) is left as it is
ABSOLUTE_LINK_JS = ("(v) => v && v.startsWith('?deep_link=') ? "
                    "new URL(v, window.location.href.split('?')[0].split('#')[0]).href : v")


def _wire_share(tab: Section, place: RunPlace) -> None:
    # and the status poll's last key (ui.py): a new visitor's page draws the engines' status afresh
    private = {tab[name].elem_id for name in PRIVATE_OUTPUTS} | {"poll-key"}

    def share(run, request: gr.Request):
        if run is None:
            return NO_RUN
        req = run.live.request  # the run's own inputs, where the session's posted ones were
        prompt = req.prompt if req.prompt_token_ids is None else ", ".join(map(str, req.prompt_token_ids))
        values = {tab["prompt"]._id: prompt, tab["max_tokens"]._id: req.max_tokens,
                  tab["temperature"]._id: req.temperature, tab["schedule"]._id: str(run.live.schedule)}
        name = run_link(request.request.app, session_id(request), run.result.run_id, private,
                        place.settings.files_max_age_s, values, owner=address_key(client_address(request)))
        return NO_RUN if name is None else f"?deep_link={name}"

    # its own group: the guard's one pending event a session covers it, and it never waits for a run
    tab["share_btn"].click(share, inputs=tab["run"], outputs=tab["share_link"], api_name="share_run", concurrency_limit=2,
                           concurrency_id="share", show_progress="hidden").then(
        None, js=ABSOLUTE_LINK_JS, inputs=tab["share_link"], outputs=tab["share_link"], api_visibility="private")
