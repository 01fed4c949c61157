"""The playground page (Gradio Blocks): a header (preset, loading status) over two tabs, each building and
wiring its own components (`compare_tab`, `bench_tab`); here only what joins them: the status poll, the
preset switch, the `status` API route, and serving. What the page shows is computed by `live_run`,
`views` and `charts`; handlers return {output name: value}, never positional tuples."""

from __future__ import annotations

import os
import re
import sys

import gradio as gr

from specplay.core.paths import BUNDLED_MODELS_DIR, MODELS_DIR, PAGE_DIR, PROJECT_ROOT
from specplay.page import views
from specplay.page.bench_tab import bench_tab
from specplay.hosting.answered_first import AnsweredFirst, answers_first
from specplay.hosting.cancel import CancelRegistry
from specplay.hosting.closing import LoopMarker
from specplay.page.css import ESC_STOPS_JS
from specplay.page.compare_run import RunPlace
from specplay.page.compare_tab import STATUS_OUTPUTS, compare_tab, status_update, wire_compare
from specplay.hosting.files import keep_clean, page_folder
from specplay.hosting import gradio_internals
from specplay.hosting.guard import LOOPBACK, GuardMiddleware, forwarded_env
from specplay.hosting.rate import RateMiddleware
from specplay.page.follow import wire_follow
from specplay.page.lesson_tab import lesson_tab, wire_lesson
from specplay.hosting.room import Room
from specplay.page.recordings_view import load_shelf
from specplay.hosting.manager import PairManager, PresetNotAllowed
from specplay.page.section import Section
from specplay.hosting.settings import PageSettings, scrub, scrub_paths
from specplay.presets.catalog import Preset, availability, dtype_for, where_it_pays

HEADER_OUTPUTS = ("status", "preset", "preset_info")
FORWARDED_ALLOW_IPS = "FORWARDED_ALLOW_IPS"  # uvicorn's setting: the proxies whose X-Forwarded-For it believes
REPLAY_LIMIT = 4  # replays (and recordings played) at once, each holding a worker thread: the rest wait
# The hub models the offline conversions come from: the serve panel names them, not the server's cache path
HUB_IDS = {"smollm2-135m-instruct": "HuggingFaceTB/SmolLM2-135M-Instruct"}


def build_page(manager: PairManager, settings: PageSettings | None = None, lesson=None) -> gr.Blocks:
    settings = settings or PageSettings()
    if lesson is None:  # the bundled lesson for this device (app.py passes the operator's, checked at start)
        from specplay.lesson.load import bundled_lesson

        lesson = bundled_lesson(manager.hardware.device)
    # one folder each, reused by every start, inside the project's cache; files older than an hour go
    history_dir, bench_dir = str(page_folder("history", PAGE_DIR)), page_folder("bench", PAGE_DIR)
    for folder in (history_dir, bench_dir):  # aged out at start and on a timer, not only after a run
        keep_clean(folder, settings.files_max_age_s)
    recordings = load_shelf(settings.recordings)  # read and checked once, now: a pick names one of these
    # delete_cache: every history CSV served is copied into Gradio's cache; files older than an hour go
    with gr.Blocks(title="Speculative decoding playground", delete_cache=(600, 3600)) as demo:
        header = _header(manager, list(manager.presets) if settings.allow_switching else [manager.preset.name])
        room = Room(settings.presenter_key)  # a room that watches one run, where the operator set a key
        banner = gr.HTML(visible=False, elem_id="room") if room.on else None
        with gr.Tabs() as tabs:
            with gr.Tab("Compare", id="compare"):
                compare = compare_tab(manager, recordings)
            with gr.Tab("Lesson", id="lesson"):
                lessons = lesson_tab(lesson)
            if settings.allow_bench:  # off on a public page unless the operator allows it
                with gr.Tab("Bench", id="bench"):
                    bench_tab(manager, settings, bench_dir)
        place = RunPlace(manager, CancelRegistry(), history_dir, settings, demo.GRADIO_CACHE, recordings, room)
        wire_compare(compare, place)
        wire_lesson(lessons, compare, tabs, place, lesson, lambda name: switch_refusal(manager, settings, name))
        # the Bench tab stays on a follower's page (Gradio 6.31 shows a tab hidden by an update: seen in headless
        # chromium); its runs are refused like every queued event of a follower
        wire_follow(demo, room, banner, compare, lessons, locked=[header["preset"]])
        demo.load(None, js=ESC_STOPS_JS)  # Esc clicks Stop
        _wire_status(demo, header, compare, manager)
        _wire_switch(header, compare, manager, settings)
    _limit_replays(demo)
    # Gradio copies a file a handler returns only from the working directory, the temp directory or an
    # allowed path: the cache may be elsewhere (PLAYGROUND_CACHE=/data, or a .cache that is a symlink)
    demo.playground_file_dirs = [history_dir, str(bench_dir)]
    demo.playground_settings = settings  # launch() reads the trusted proxies
    demo.playground_room = room  # and the room: the queue takes no follower's event
    return demo


def _limit_replays(demo: gr.Blocks) -> None:
    """Replays sleep between frames in a worker thread: at most REPLAY_LIMIT at once, in their own group, so
    a crowd replaying can't take every thread from Stop, the status poll and /health."""
    for fn in demo.fns.values():
        if getattr(fn.fn, "__name__", "") in ("replay", "play_recording_event"):
            fn.concurrency_limit, fn.concurrency_id = REPLAY_LIMIT, "replay"


def public_serve_line(line: str) -> str:
    """A `vllm serve` line as visitors see it: an offline model by the hub id it comes from (else
    `<cache>/models/NAME`), a bundled one relative to the project, and no other server path."""
    line = re.sub(re.escape(str(MODELS_DIR)) + r"/([\w.+\-]+)",
                  lambda m: HUB_IDS.get(m.group(1), f"<cache>/models/{m.group(1)}"), line)
    line = line.replace(str(BUNDLED_MODELS_DIR), str(BUNDLED_MODELS_DIR.relative_to(PROJECT_ROOT)))
    return scrub(line.replace(str(PROJECT_ROOT) + "/", ""))


def _header(manager: PairManager, names: list[str]) -> Section:
    header = Section()
    with gr.Row(equal_height=True):
        with gr.Column(scale=3, min_width=300):
            gr.Markdown("## Speculative decoding playground\nThe same prompt goes to a baseline engine and a "
                        "speculative engine: same outputs, fewer steps, and why that is faster or not.")
        with gr.Column(scale=2, min_width=260):
            header.add("preset", gr.Dropdown(choices=names, value=manager.status().preset, label="Preset",
                                             interactive=len(names) > 1, elem_id="preset"))
    header.add("status", gr.HTML(elem_id="status"))
    header.add("preset_info", gr.Markdown(elem_id="preset-info"))
    return header


def _preset_info(preset: Preset, manager: PairManager) -> str:
    device = manager.hardware.device
    notes = f"\n\n{preset.notes}" if preset.notes else ""
    pays = where_it_pays(preset, device)
    pays = f"\n\n**Where it pays on this {device.upper()}:** {pays}" if pays else ""
    # scrubbed: an ad-hoc pair's description is the operator's --model, maybe a path on this server
    return scrub_paths(f"**{preset.name}**: {preset.description} · guide: *{preset.guide_section}* · "
                       f"{dtype_for(preset, device)} · {availability(preset, manager.hardware).reason}{pays}{notes}")


def _wire_status(demo: gr.Blocks, header: Section, compare: Section, manager: PairManager) -> None:
    """Status polling: the loading state in the header, and the compare tab's preset-dependent parts."""
    # the last status drawn is held by the browser (a hidden Textbox, not a gr.State): a poll reads no session
    poll_key = gr.Textbox(visible="hidden", elem_id="poll-key")  # in the DOM, so its value goes with each poll

    def poll(last_key):
        status = manager.status()
        key = repr(status.key)
        if key == last_key:
            return {poll_key: gr.skip()}  # nothing changed: redraw nothing
        preset = manager.presets[status.preset]
        tab_values = status_update(manager, status, preset)
        for name in ("serve_b", "serve_s"):
            tab_values[name] = public_serve_line(tab_values[name])
        return {**header.out({
            "status": views.status_html(status.state, status.preset, status.message, status.progress,
                                        status.elapsed_s, manager.hardware.describe()),
            "preset": gr.update(value=status.preset),
            "preset_info": _preset_info(preset, manager),
        }), **compare.out(tab_values), poll_key: key}

    outputs = header.list(HEADER_OUTPUTS) + compare.list(STATUS_OUTPUTS) + [poll_key]

    nothing_new = gradio_internals.skipped(outputs)

    def unchanged(call: dict) -> list | None:
        """Every page asks once a second and nearly always finds nothing new: answered before Gradio, which
        would make each of the outputs' components anew to skip it (hosting/answered_first.py)."""
        data = call.get("data")
        last = data[0] if isinstance(data, list) and data else None
        return nothing_new if last == repr(manager.status().key) else None

    for trigger in (gr.Timer(1.0).tick, demo.load):  # not queued: a full queue must not stop the status
        trigger(answers_first(poll, unchanged), inputs=poll_key, outputs=outputs, show_progress="hidden",
                api_visibility="private", queue=False)

    def status() -> dict:
        s = manager.status()
        return {"state": s.state, "preset": s.preset, "message": scrub(s.message), "progress": s.progress,
                "elapsed_s": s.elapsed_s}

    gr.api(status, api_name="status", queue=False)


def _wire_switch(header: Section, compare: Section, manager: PairManager, settings: PageSettings) -> None:
    def switch(name):
        return views.error_html(switch_refusal(manager, settings, name))

    # in the runs' concurrency group: a switch waits for the run ahead of it instead of failing
    header["preset"].input(switch, inputs=header["preset"], outputs=compare["error"], api_name="switch_preset",
                           concurrency_limit=1, concurrency_id="engines")


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


def launch(demo: gr.Blocks, host: str, port: int, share: bool = False, auth: tuple[str, str] | None = None,
           block: bool = True, queue_size: int = 32, app_kwargs: dict | None = None, session_capacity: int = 128):
    """Serve the page with a queue: runs wait their turn instead of fighting over the engines."""
    from starlette.middleware import Middleware

    settings = getattr(demo, "playground_settings", None) or PageSettings()
    # The engines' outputs are read by an asyncio loop in this process; threads rendering the page must hand
    # the GIL back quickly (default: every 5 ms), or vLLM merges two steps' chunks before the loop reads them.
    sys.setswitchinterval(0.001)
    # api_open=False: a direct POST to a queued route is refused, so every run waits its turn in the queue
    demo.queue(max_size=queue_size, default_concurrency_limit=1, api_open=False)
    # one pending event per session in each queue group, a few per client address; unread streams stopped
    gradio_internals.check(demo._queue)  # a Gradio without what the limits hook into stops here, named
    local = host in LOOPBACK and not share
    gradio_internals.limit_pending(demo._queue, local=local)
    gradio_internals.bound_unread(demo._queue)
    room = getattr(demo, "playground_room", None)
    if room is not None and room.on:  # outside the limits above: a follower's event is refused first
        gradio_internals.presenter_only(demo._queue, room)
    gradio_internals.quiet_refused_values(demo)  # a forged value: one log line, not a traceback
    app_kwargs = dict(app_kwargs or {})
    # first a per-address rate limit (429) and unused routes closed; bodies capped at 1 MiB before anything
    # parses them (16 kB for a direct call), and no uploads (the page takes none)
    app_kwargs["middleware"] = [*app_kwargs.get("middleware", []), Middleware(RateMiddleware, local=local),
                                Middleware(GuardMiddleware),
                                Middleware(LoopMarker, page=demo),  # closing.close() needs the loop
                                Middleware(gradio_internals.NoSessionFromUnqueued, page=demo),  # no unqueued call makes a session
                                # Stop, and the polls that find nothing new, answered before Gradio
                                Middleware(AnsweredFirst, find=gradio_internals.first_answers(demo, bool(auth)),
                                           reply=gradio_internals.direct_answer)]
    # uvicorn reads which proxies' X-Forwarded-For it believes when Gradio makes its server, inside launch()
    before = os.environ.get(FORWARDED_ALLOW_IPS)
    os.environ[FORWARDED_ALLOW_IPS] = forwarded_env(settings.trusted_proxies)
    try:
        # show_error=False: an exception outside a handler's own try shows as a plain "Error", never its text
        return demo.launch(server_name=host, server_port=port, share=share, auth=auth, css=views.CSS,
                           prevent_thread_lock=not block, show_error=False, footer_links=["api"],
                           theme=gr.themes.Soft(), max_file_size="1mb", app_kwargs=app_kwargs,
                           # Gradio's run history (/gradio_api/runs, /run-history/*): off, as every route the
                           # page doesn't use; a run is shared by the page's own links (page/share.py)
                           run_history=False,
                           # Gradio's own localhost check (one HEAD, 3 s timeout) off: on a loaded machine it times
                           # out and launch raises "a shareable link must be created"; the server has already
                           # answered Gradio's startup request by then (hosting/gradio_internals.NO_SELF_CHECK)
                           **gradio_internals.NO_SELF_CHECK,
                           state_session_capacity=session_capacity,  # see PageSettings.session_capacity
                           allowed_paths=list(getattr(demo, "playground_file_dirs", [])) or None)
    finally:  # the server is made by now (a blocking launch returns only when it stops)
        if before is None:
            os.environ.pop(FORWARDED_ALLOW_IPS, None)
        else:
            os.environ[FORWARDED_ALLOW_IPS] = before
