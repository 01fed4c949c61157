"""The playground page (Gradio Blocks), built from small functions: prompt and controls, the two streaming
panes, the identity badge, the speedup's two factors, live charts, tables, the preset's `vllm serve` lines.
The only module that imports Gradio; what it shows is computed by `live_run`, `views` and `charts`.

Handlers return {component: value} dicts (names from `live_run`), never positional tuples. A run streams
events into a LiveRun and redraws at most UPDATE_HZ times a second; a sequential run is then replayed on
one clock by a second event that doesn't hold the engines, so the next visitor's run can start.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import time

import gradio as gr

from specplay.page import views
from specplay.page.cancel import CancelRegistry
from specplay.page.charts import history_table
from specplay.engine.vllm_engine import PromptError
from specplay.core.events import BASELINE, SPECULATIVE, RunFinished
from specplay.page.inputs import (DEFAULT_SCHEDULE, EXAMPLES, SCHEDULE_INFO, SCHEDULES, TEMPERATURE_MAX, TOKEN_EXAMPLES, InputError,
                               build_request, check_schedule, max_tokens_limit)
from specplay.page.live_run import API_OUTPUTS, REPLAY_OUTPUTS, UPDATE_HZ, LiveRun, empty_frame
from specplay.page.settings import PageSettings, scrub
from specplay.core.paths import PAGE_DIR
from specplay.page.manager import PairManager, PresetNotAllowed
from specplay.presets.catalog import Preset, availability, dtype_for, serve_commands, where_it_pays
from specplay.page.bench_tab import bench_tab

# Page-only outputs of a run, after API_OUTPUTS: buttons and per-session State aren't part of the API.
RUN_OUTPUTS = API_OUTPUTS + ("run_btn", "stop_btn", "replay_btn", "history", "live")
POLL_OUTPUTS = ("status", "run_btn", "preset", "preset_info", "serve_b", "serve_s", "max_tokens", "legend",
                "prompt", "poll_key")


class Page:
    """The page's components by name; `out()` turns {name: value} into the {component: value} Gradio wants."""

    def __init__(self):
        self.c: dict = {}

    def __getattr__(self, name):
        try:
            return self.__dict__["c"][name]
        except KeyError:
            raise AttributeError(name) from None

    def list(self, names) -> list:
        return [self.c[n] for n in names]

    def out(self, values: dict) -> dict:
        return {self.c[name]: value for name, value in values.items()}


# -- layout ----------------------------------------------------------------------------------------------
def _header(page: Page, manager: PairManager, names: list[str]) -> None:
    with gr.Row(equal_height=True):
        with gr.Column(scale=3, min_width=300):
            gr.Markdown("## Speculative decoding playground\nThe same prompt goes to a baseline engine and a "
                        "speculative engine: same outputs, fewer steps, and why that is faster or not.")
        with gr.Column(scale=2, min_width=260):
            page.c["preset"] = gr.Dropdown(choices=names, value=manager.status().preset, label="Preset",
                                           interactive=len(names) > 1, elem_id="preset")
    page.c["status"] = gr.HTML(elem_id="status")
    page.c["preset_info"] = gr.Markdown(elem_id="preset-info")


def _prompt_panel(page: Page, manager: PairManager) -> None:
    preset = manager.preset
    limit = max(max_tokens_limit(p) for p in manager.presets.values())
    with gr.Row():
        with gr.Column(scale=4):
            page.c["prompt"] = gr.Textbox(label="Prompt", lines=5, max_lines=14, value=EXAMPLES["rewrite"],
                                          elem_id="prompt")
            with gr.Row():
                gr.Markdown("Examples:", elem_classes=["examples-label"])
                for kind in EXAMPLES:
                    page.c[f"ex_{kind}"] = gr.Button(kind, size="sm", elem_id=f"example-{kind}")
        with gr.Column(scale=1, min_width=220):
            page.c["max_tokens"] = gr.Slider(1, limit, value=preset.default_max_tokens, step=1,
                                             label="Max tokens", elem_id="max-tokens")
            page.c["temperature"] = gr.Slider(0.0, TEMPERATURE_MAX, value=0.0, step=0.05,
                                              label="Temperature (0 = greedy: outputs should match)",
                                              elem_id="temperature")
            page.c["schedule"] = gr.Radio([(label, key) for key, label in SCHEDULES.items()],
                                          value=DEFAULT_SCHEDULE[manager.hardware.device], label="Schedule",
                                          info=SCHEDULE_INFO, elem_id="schedule")
            with gr.Row():
                page.c["run_btn"] = gr.Button("Run", variant="primary", interactive=False, elem_id="run")
                page.c["stop_btn"] = gr.Button("Stop", variant="stop", interactive=False, elem_id="stop")
                page.c["replay_btn"] = gr.Button("Replay race", interactive=False, elem_id="replay")
    page.c["error"] = gr.HTML(elem_id="page-error")


def _panes(page: Page, start: dict, k: int) -> None:
    page.c["badge"] = gr.HTML(start["badge"], elem_id="badge")
    page.c["explain"] = gr.HTML(start["explain"], elem_id="explain")
    with gr.Row(equal_height=False):
        with gr.Column(min_width=320):
            page.c["pane_b"] = gr.HTML(start["pane_b"], elem_id="baseline-pane")
        with gr.Column(min_width=320):
            page.c["pane_s"] = gr.HTML(start["pane_s"], elem_id="speculative-pane")
            page.c["legend"] = gr.HTML(views.legend_html(k), elem_id="legend")


def _stats(page: Page, start: dict) -> None:
    page.c["summary"] = gr.DataFrame(start["summary"], label="This run", interactive=False, elem_id="summary")
    with gr.Row():
        page.c["fig_rate"] = gr.Plot(start["fig_rate"], label="tokens/s", elem_id="chart-rate")
        page.c["fig_accept"] = gr.Plot(start["fig_accept"], label="acceptance", elem_id="chart-acceptance")
        page.c["fig_mem"] = gr.Plot(start["fig_mem"], label="memory", elem_id="chart-memory")
    with gr.Accordion("Session history", open=True):
        page.c["history_df"] = gr.DataFrame(history_table([]), interactive=False, elem_id="history")
        page.c["history_file"] = gr.DownloadButton("Download history (CSV)", value=None, size="sm",
                                                   elem_id="history-csv")
    with gr.Accordion("Raw result (JSON)", open=False):
        page.c["result"] = gr.JSON(elem_id="result")


def _serve_panel(page: Page) -> None:
    with gr.Accordion("Run it yourself: the `vllm serve` lines for this preset", open=False):
        page.c["serve_b"] = gr.Code(language="shell", label="baseline", interactive=False, elem_id="serve-baseline")
        page.c["serve_s"] = gr.Code(language="shell", label="speculative", interactive=False,
                                    elem_id="serve-speculative")


def _preset_info(preset: Preset, manager: PairManager) -> str:
    device = manager.hardware.device
    notes = f"\n\n{preset.notes}" if preset.notes else ""
    pays = where_it_pays(preset, device)
    pays = f"\n\n**Where it pays on this {device.upper()}:** {pays}" if pays else ""
    return (f"**{preset.name}**: {preset.description} · guide: *{preset.guide_section}* · "
            f"{dtype_for(preset, device)} · {availability(preset, manager.hardware).reason}{pays}{notes}")


# -- the page --------------------------------------------------------------------------------------------
def build_page(manager: PairManager, settings: PageSettings | None = None) -> gr.Blocks:
    settings = settings or PageSettings()
    names = list(manager.presets)
    registry = CancelRegistry()
    PAGE_DIR.mkdir(parents=True, exist_ok=True)
    history_dir = tempfile.mkdtemp(prefix="history-", dir=PAGE_DIR)  # inside the project's cache
    page = Page()
    start = empty_frame(manager.preset)
    # delete_cache: every history CSV served is copied into Gradio's cache; files older than an hour go
    with gr.Blocks(title="Speculative decoding playground", delete_cache=(600, 3600)) as demo:
        _header(page, manager, names if settings.allow_switching else [manager.preset.name])
        with gr.Tabs():
            with gr.Tab("Compare", id="compare"):
                _serve_panel(page)  # near the top: the preset's lesson in vLLM's own terms
                _prompt_panel(page, manager)
                _panes(page, start, manager.preset.num_speculative_tokens)
                _stats(page, start)
            with gr.Tab("Bench", id="bench"):
                bench_tab(page, manager)
        page.c["history"] = gr.State([])
        page.c["live"] = gr.State(None)  # the last run, for its replay
        page.c["poll_key"] = gr.State(None)
        _wire_status(demo, page, manager, settings)
        _wire_run(page, manager, registry, history_dir, settings)
    # Gradio copies a file a handler returns only from the working directory, the temp directory or an
    # allowed path: the cache may be elsewhere (PLAYGROUND_CACHE=/data, or a .cache that is a symlink)
    demo.playground_file_dirs = [history_dir]
    return demo


def _wire_status(demo: gr.Blocks, page: Page, manager: PairManager, settings: PageSettings) -> None:
    """Status polling: the loading state, Run enabled only when ready, preset-dependent widgets; switching."""

    def poll(last_key):
        status = manager.status()
        if status.key == last_key:
            return page.out({"poll_key": last_key})  # nothing changed: redraw nothing
        preset = manager.presets[status.preset]
        lines = serve_commands(preset, manager.hardware)
        token_mode = preset.prompt_input == "token_ids"
        return page.out({
            "status": views.status_html(status.state, status.preset, status.message, status.progress,
                                        status.elapsed_s, manager.hardware.describe()),
            "run_btn": gr.update(interactive=status.state == "ready"),
            "preset": gr.update(value=status.preset),
            "preset_info": _preset_info(preset, manager),
            "serve_b": lines[BASELINE], "serve_s": lines[SPECULATIVE],
            "max_tokens": gr.update(maximum=max_tokens_limit(preset)),
            "legend": views.legend_html(preset.num_speculative_tokens),
            "prompt": gr.update(placeholder="token ids, e.g. 1000, 1001, 1002" if token_mode else "Type a prompt"),
            "poll_key": status.key,
        })

    for trigger in (gr.Timer(1.0).tick, demo.load):  # not queued: a full queue must not stop the status
        trigger(poll, inputs=page.poll_key, outputs=page.list(POLL_OUTPUTS), show_progress="hidden",
                api_visibility="private", queue=False)

    def switch(name):
        return views.error_html(switch_refusal(manager, settings, name))

    page.preset.input(switch, inputs=page.preset, outputs=page.error, api_name="switch_preset",
                      concurrency_limit=1, concurrency_id="engines")

    for kind in EXAMPLES:
        page.c[f"ex_{kind}"].click(
            lambda kind=kind: (TOKEN_EXAMPLES if manager.preset.prompt_input == "token_ids" else EXAMPLES)[kind],
            outputs=page.prompt, queue=False, api_visibility="private")


def _wire_run(page: Page, manager: PairManager, registry: CancelRegistry, history_dir: str,
              settings: PageSettings) -> None:
    def run(prompt, max_tokens, temperature, schedule, history, request: gr.Request):
        for values in _run(manager, registry, history_dir, settings, prompt, max_tokens, temperature, schedule,
                           history, _session(request)):
            yield page.out(values)

    def replay(live: LiveRun | None):
        for values in _replay(manager, live):
            yield page.out(values)

    replay_outputs = page.list(REPLAY_OUTPUTS + ("run_btn", "replay_btn"))
    page.run_btn.click(
        run, inputs=[page.prompt, page.max_tokens, page.temperature, page.schedule, page.history],
        outputs=page.list(RUN_OUTPUTS), api_name="run", concurrency_limit=1, concurrency_id="engines",
        # "full": a waiting visitor sees "queue: 2/5 | 3.1s" on the badge until the run starts ("minimal"
        # draws that text invisibly on an HTML component in Gradio 6.31: seen in headless chromium)
        show_progress="full", show_progress_on=[page.badge],
    ).then(replay, inputs=page.live, outputs=replay_outputs, api_visibility="private", concurrency_limit=None,
           show_progress="hidden")
    page.replay_btn.click(replay, inputs=page.live, outputs=replay_outputs, api_visibility="private",
                          concurrency_limit=None, show_progress="hidden")

    def stop(request: gr.Request):
        registry.cancel(_session(request))
        return gr.update(interactive=False)

    # not queued: Stop must work when the queue is full of waiting runs
    page.stop_btn.click(stop, outputs=page.stop_btn, api_name="stop", queue=False, show_progress="hidden")

    def status() -> dict:
        s = manager.status()
        return {"state": s.state, "preset": s.preset, "message": scrub(s.message), "progress": s.progress,
                "elapsed_s": s.elapsed_s}

    gr.api(status, api_name="status", queue=False)


def _session(request: gr.Request | None) -> str:
    return getattr(request, "session_hash", None) or "anonymous"


def switch_refusal(manager: PairManager, settings: PageSettings, name) -> str | None:
    """Start loading preset `name`, or say why not (a message for the visitor)."""
    if not settings.allow_switching:
        return "Switching presets is turned off on this page (the operator's choice)."
    status = manager.status()
    if name == status.preset and status.state in ("ready", "loading"):
        return None  # already there: reloading would only take the engines away from everyone
    try:
        manager.load(name)
    except (PresetNotAllowed, RuntimeError) as exc:
        return scrub(str(exc))
    return None


def _run(manager: PairManager, registry: CancelRegistry, history_dir: str, settings: PageSettings, prompt,
         max_tokens, temperature, schedule, history: list, session: str):
    """The run handler: yields {output name: value}; never raises (errors go on the page)."""
    idle = {"run_btn": gr.update(interactive=manager.pair is not None), "stop_btn": gr.update(interactive=False)}

    def fail(message: str) -> dict:
        message = scrub(message)
        return {"error": views.error_html(message), "result": {"error": message}, **idle, "history": history}

    pair, preset = manager.pair, manager.preset
    if pair is None:
        yield fail("The engines are not ready yet (see the status above); Run is enabled once they are.")
        return
    try:
        req = build_request(preset, prompt, max_tokens, temperature)
        schedule = check_schedule(schedule)
    except InputError as exc:
        yield fail(str(exc))
        return
    cancel = registry.new(session)
    decoders = ({role: pair.engines[role].decode for role in (BASELINE, SPECULATIVE)}
                if preset.prompt_input == "text" else {})
    live = LiveRun(preset, req, decoders, schedule, manager.hardware.device, pair.engine_info())
    running = {"error": "", "run_btn": gr.update(interactive=False), "stop_btn": gr.update(interactive=True),
               "replay_btn": gr.update(interactive=False)}
    failure, timed_out = None, False
    with manager.run_lock:
        stream = live.stream(pair, cancel)  # each event is in live.comparison once yielded
        finished = False
        try:
            last, started = 0.0, time.monotonic()
            for event in stream:
                finished = isinstance(event, RunFinished)
                if finished:
                    break
                now = time.monotonic()
                if now - started > settings.max_run_seconds and not cancel.is_set():
                    timed_out = True
                    cancel.set()
                if now - last >= 1.0 / UPDATE_HZ:  # tables only at the end: a DataFrame costs more than a chart
                    last = now
                    yield {**live.frame(manager.sampler), **running}
        except PromptError as exc:
            failure = str(exc)
        except Exception as exc:  # the page stays up; the message says what broke
            failure = f"The run failed: {type(exc).__name__}: {exc}"
        finally:
            if not finished:  # closed early (browser gone, error): abort both requests, release the engines
                cancel.set()
                try:
                    for _ in stream:
                        pass
                except Exception:
                    pass
            registry.done(session, cancel)
    if failure is not None:
        yield fail(failure)
        return
    error = live.comparison.finished.error
    # after every run, not only a failed one: an engine that died after its part of the run (or between
    # runs) is reloaded now, so the next visitor gets "not ready" rather than a failed run
    reloading = manager.reload_if_dead()
    number = (history[-1]["run"] + 1) if history else 1
    history = (history + [live.history_row(number)])[-settings.history_rows:]
    # one file per session, overwritten each run; named from a hash, not from the session id itself
    path = os.path.join(history_dir, f"history-{hashlib.sha256(session.encode()).hexdigest()[:16]}.csv")
    history_table(history).to_csv(path, index=False)
    replayable = live.replayable
    reload_note = " Both engines are being reloaded; Run is enabled again once they are ready." if reloading else ""
    message = (f"The run stopped: {error}.{reload_note}" if error else
               f"The run was stopped at this page's limit of {settings.max_run_seconds:g} seconds." if timed_out
               else None)
    yield {**live.final(manager.sampler, history, path, scrub(message) if message else None),
           **idle, "history": history, "live": live if replayable else None,
           "replay_btn": gr.update(interactive=replayable)}


def _replay(manager: PairManager, live: LiveRun | None):
    """Both panes and the rate charts race on one clock from the recorded arrival times (sequential runs)."""
    if live is None or not live.replayable:
        yield {"replay_btn": gr.update(interactive=False)}
        return
    busy = {"run_btn": gr.update(interactive=False), "replay_btn": gr.update(interactive=False)}
    total, speed = live.comparison.replay_seconds, live.replay_speed()
    started = time.monotonic()
    while (at := (time.monotonic() - started) * speed) < total:
        yield {**live.frame(at=at), **busy}
        time.sleep(1.0 / UPDATE_HZ)
    yield {**live.frame(at=total), "run_btn": gr.update(interactive=manager.pair is not None),
           "replay_btn": gr.update(interactive=True)}


def launch(demo: gr.Blocks, host: str, port: int, share: bool = False, auth: tuple[str, str] | None = None,
           block: bool = True, queue_size: int = 32, app_kwargs: dict | None = None):
    """Serve the page with a queue: runs wait their turn instead of fighting over the engines."""
    # The engines' outputs are read by an asyncio loop in this process; threads rendering the page must hand
    # the GIL back quickly (default: every 5 ms), or vLLM merges two steps' chunks before the loop reads them.
    sys.setswitchinterval(0.001)
    # api_open=False: a direct POST to a queued route is refused, so every run waits its turn in the queue
    demo.queue(max_size=queue_size, default_concurrency_limit=1, api_open=False)
    return demo.launch(server_name=host, server_port=port, share=share, auth=auth, css=views.CSS,
                       prevent_thread_lock=not block, show_error=True, footer_links=["api"],
                       theme=gr.themes.Soft(), max_file_size="1mb", app_kwargs=app_kwargs,
                       allowed_paths=list(getattr(demo, "playground_file_dirs", [])) or None)
