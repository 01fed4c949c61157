"""Serve the playground page: `serve()` runs it until Ctrl-C or SIGTERM, `main()` its process's exit. The
page itself (its Blocks and its launch) is the page layer's, handed in by the entry point (`page/entry.py`:
`python app.py`, `specplay-page`, `python -m specplay.page.entry`) as `load_page`, a function that imports it:
hosting sits below the page and never imports it. The page is up at once; the engines load behind it. Gradio and vLLM are imported only once the options are good: `--help` stays instant, and
vLLM's engine processes, which re-import the main module, don't load them twice."""

from __future__ import annotations

import os
import signal
import sys
import time

from specplay.hosting import options as page_options
from specplay.hosting.process import adopt_orphans, end_children, exit_now, stop_deadline

BAD_OPTIONS_EXIT = 2  # a refused option or pair, as every specplay command (cli.base.EXIT_BAD_INPUT)
GAVE_UP_EXIT = 3  # the exit status after every reload of a dead engine failed
# The stop's own bound: docker stop sends SIGKILL 10 s after SIGTERM; 2 s are left for the signal to arrive
# and for the exit to be seen (tini, the container runtime).
STOP_DEADLINE_S = 8.0


def serve(argv, load_page) -> None:
    """Parse the options, start loading the initial preset and serve the page; on the way out (Ctrl-C,
    SIGTERM, an error) shut both engines down and end every process this one started. `load_page()` returns
    the page layer's module with `build_page(manager, settings, lesson)` and `launch(demo, host, port, ...)`."""
    options = page_options.resolve_options(page_options.parse_args(argv))
    # read where engine settings are made (core_layout), in this process and whatever it starts
    os.environ[page_options.CORE_LAYOUT_ENV] = options.core_layout
    presets, initial, hardware = page_options.offered_presets(options)
    settings = page_options.settings_from_options(options)
    lesson = page_options.lesson_for(options, hardware)  # a bad lesson file stops the app here, with its line
    from specplay.core.paths import configure_cache_env

    configure_cache_env()  # before Gradio is imported: its temp files go into the project's cache too
    ui = load_page()
    from specplay.engine.processes import remove_ipc_folders
    from specplay.hosting.health import health_route
    from specplay.hosting.manager import PairManager

    factory = page_options.remote_factory(options) if page_options.remote_mode(options) else None
    exit_code = [0]

    def give_up() -> None:  # the reloads after an engine died all failed: exit, for a supervisor to restart
        exit_code[0] = GAVE_UP_EXIT
        os.kill(os.getpid(), signal.SIGTERM)

    manager = PairManager(presets, initial, hardware, pair_factory=factory, on_give_up=give_up)
    adopt_orphans()
    # SIGTERM (service managers, test fixtures) takes the same way out as Ctrl-C: engines shut down. Installed
    # before loading starts, so a stop during loading shuts the loading engines down too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(exit_code[0]))
    try:
        manager.load(initial)  # background thread: the page serves while the engines load
        manager.watch()  # an engine dying while idle is noticed (and reloaded) within seconds
        demo = ui.build_page(manager, settings, lesson)
        # GET /health (page/health.py) is part of the app from its first request on
        ui.launch(demo, options.host, options.port, share=options.share, auth=options.auth,
                  queue_size=settings.queue_size, app_kwargs={"routes": [health_route(manager)]},
                  session_capacity=settings.session_capacity)
    finally:
        t0 = time.monotonic()
        deadline = stop_deadline(STOP_DEADLINE_S, lambda: exit_code[0])
        print("stopping: shutting both engines down", file=sys.stderr, flush=True)
        manager.shutdown()
        t1 = time.monotonic()
        end_children()
        remove_ipc_folders()  # those of engines ended mid-start (a stop during a reload)
        # each part's time: a slow stop on a loaded host says which part was slow
        print(f"stopped in {time.monotonic() - t0:.1f} s (engines {t1 - t0:.1f} s, leftover processes "
              f"{time.monotonic() - t1:.1f} s)", file=sys.stderr, flush=True)
        deadline.cancel()  # done in time: the caller exits (main) or carries on


def main(argv, load_page) -> None:
    """Serve, then end the process at once with serve's exit status (see `exit_now`)."""
    try:
        serve(sys.argv[1:] if argv is None else argv, load_page)
    except SystemExit as stop:  # SIGTERM, or a refused option (its message printed as Python would)
        if isinstance(stop.code, str):
            print(stop.code, file=sys.stderr)
        exit_now(stop.code if isinstance(stop.code, int) else 0 if stop.code is None else BAD_OPTIONS_EXIT)
    except KeyboardInterrupt:
        exit_now(130)
    exit_now(0)

