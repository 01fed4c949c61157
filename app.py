"""Serve the playground page: `python app.py`. The page is up at once; the engines load behind it.

Which presets the page offers is the operator's choice (--presets or a --config file), never the user's.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Speculative decoding playground: one prompt, a baseline and a speculative vLLM engine "
                    "side by side, with an identity check and live charts.")
    parser.add_argument("--presets", metavar="NAME[,NAME...]",
                        help="presets the page offers (default: every preset runnable on this machine "
                             "without the hub)")
    parser.add_argument("--preset", metavar="NAME", help="preset loaded at start (default: smollm2-ngram)")
    parser.add_argument("--config", metavar="FILE",
                        help="YAML file with any of these options as keys (presets, preset, host, port, share, "
                             "auth); command-line flags win")
    parser.add_argument("--host", help="address to listen on (default: 127.0.0.1; 0.0.0.0 for all)")
    parser.add_argument("--port", type=int, help="port (default: 7860)")
    parser.add_argument("--share", action="store_true", default=None, help="also open a public gradio.live link")
    parser.add_argument("--auth", metavar="USER:PASS",
                        help="require this login (or set PLAYGROUND_AUTH=USER:PASS)")
    parser.add_argument("--allow-switching", dest="allow_switching", action="store_true", default=None,
                        help="let visitors switch presets (default: yes on 127.0.0.1, no when served to others)")
    parser.add_argument("--no-switching", dest="allow_switching", action="store_false",
                        help="visitors can't switch presets: the page keeps the one the operator loaded")
    parser.add_argument("--max-run-seconds", type=float, help="stop a run after this long (default: 300)")
    parser.add_argument("--queue-size", type=int, help="runs and switches that may wait (default: 32)")
    return parser.parse_args(argv)


DEFAULTS = {"presets": None, "preset": None, "host": "127.0.0.1", "port": 7860, "share": False, "auth": None,
            "allow_switching": None, "max_run_seconds": 300.0, "queue_size": 32}


def resolve_options(args: argparse.Namespace) -> dict:
    """Defaults < config file < environment (auth) < command line."""
    options = dict(DEFAULTS)
    if args.config:
        import yaml

        with open(args.config) as f:
            config = yaml.safe_load(f) or {}
        if not isinstance(config, dict) or set(config) - set(DEFAULTS):
            raise SystemExit(f"{args.config}: expected a mapping with keys from {sorted(DEFAULTS)}")
        options.update(config)
    if os.environ.get("PLAYGROUND_AUTH"):
        options["auth"] = os.environ["PLAYGROUND_AUTH"]
    options.update({k: v for k, v in vars(args).items() if k in DEFAULTS and v is not None})
    if isinstance(options["presets"], str):
        options["presets"] = [n.strip() for n in options["presets"].split(",") if n.strip()]
    if options["auth"] is not None:
        user, sep, password = str(options["auth"]).partition(":")
        if not (sep and user and password):
            raise SystemExit("--auth / PLAYGROUND_AUTH must look like USER:PASS")
        options["auth"] = (user, password)
    return options


def offered_presets(options: dict):
    """(presets the page offers, initial preset name); an unknown or unrunnable name stops the app."""
    from specplay.core.hardware import detect
    from specplay.presets.catalog import DEFAULT_PRESET, PresetError, availability, get_preset, load_presets

    hardware = detect()
    every = load_presets()
    try:
        if options["presets"]:
            chosen = {name: get_preset(name, every) for name in options["presets"]}
        else:
            # by default only what runs without downloading: offered presets should load
            chosen = {n: p for n, p in every.items()
                      if (a := availability(p, hardware)).runnable and not a.needs_hub}
        initial = options["preset"] or (DEFAULT_PRESET if DEFAULT_PRESET in chosen else next(iter(chosen), None))
        if initial is None:
            raise PresetError("no preset can run on this machine")
        if initial not in chosen:
            chosen[initial] = get_preset(initial, every)
    except PresetError as exc:
        raise SystemExit(f"app.py: {exc}") from None
    status = {n: availability(p, hardware) for n, p in chosen.items()}
    if not status[initial].runnable:
        raise SystemExit(f"app.py: preset {initial} can't run here: {status[initial].reason}")
    for name, why in status.items():
        if not why.runnable:
            print(f"app.py: not offering {name}: {why.reason}", file=sys.stderr)
    return {n: p for n, p in chosen.items() if status[n].runnable}, initial, hardware


def page_settings(options: dict):
    """The operator's settings; switching presets is for visitors only on a page served to this machine."""
    from specplay.page.settings import PageSettings

    public = bool(options["share"]) or options["host"] not in ("127.0.0.1", "localhost", "::1")
    allow = options["allow_switching"] if options["allow_switching"] is not None else not public
    if options["share"] and not options["auth"]:
        print("app.py: warning: --share without --auth puts the page and its engines on a public link that "
              "anyone can use; set --auth USER:PASS (or PLAYGROUND_AUTH)", file=sys.stderr)
    return PageSettings(allow_switching=bool(allow), max_run_seconds=float(options["max_run_seconds"]),
                        queue_size=int(options["queue_size"]))


def main(argv=None) -> None:
    options = resolve_options(parse_args(argv))
    presets, initial, hardware = offered_presets(options)
    settings = page_settings(options)
    from specplay.core.paths import configure_cache_env

    configure_cache_env()  # before Gradio is imported: its temp files go into the project's cache too
    from specplay.page.health import health_route
    from specplay.page.manager import PairManager
    from specplay.page import ui

    manager = PairManager(presets, initial, hardware)
    _adopt_orphans()
    # SIGTERM (service managers, test fixtures) takes the same way out as Ctrl-C: engines shut down. Installed
    # before loading starts, so a stop during loading shuts the loading engines down too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        manager.load(initial)  # background thread: the page serves while the engines load
        demo = ui.build_page(manager, settings)
        # GET /health (playground/health.py) is part of the app from its first request on
        ui.launch(demo, options["host"], options["port"], share=bool(options["share"]), auth=options["auth"],
                  queue_size=settings.queue_size, app_kwargs={"routes": [health_route(manager)]})
    finally:
        t0 = time.monotonic()
        print("stopping: shutting both engines down", file=sys.stderr, flush=True)
        manager.shutdown()
        _end_children()
        print(f"stopped in {time.monotonic() - t0:.1f} s", file=sys.stderr, flush=True)


def _end_children(grace_s: float = 5.0, rounds: int = 3) -> None:
    """Engines still starting can't be shut down through vLLM (their constructor holds the pair's loop), so
    whatever this process started and is still running is ended here: nothing outlives the app. In rounds:
    an engine core killed mid-start may have just spawned its worker, which (this process being their
    subreaper) is re-parented here and found by the next round."""
    import psutil

    for _ in range(rounds):
        # multiprocessing's resource tracker ignores SIGTERM by design and ends when every process holding
        # its pipe has: it is left to end on its own (and clean up the engines' shared memory on the way)
        children = [c for c in psutil.Process().children(recursive=True) if not _is_resource_tracker(c)]
        if not children:
            return
        for child in children:
            try:
                child.terminate()
            except psutil.Error:
                pass
        _, alive = psutil.wait_procs(children, timeout=grace_s)
        for child in alive:
            try:
                child.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(alive, timeout=1)


def _adopt_orphans() -> None:
    """Linux: become the subreaper of everything this process starts, so a process whose parent was killed
    (an engine core's worker) is re-parented here, where _end_children finds it, not to init."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def _is_resource_tracker(process) -> bool:
    import psutil

    try:
        return any("resource_tracker" in part for part in process.cmdline())
    except psutil.Error:
        return False


def _exit_now(code: int) -> None:
    """End the process without the interpreter's teardown: main's `finally` has stopped everything it
    started, and the teardown spends another ~5 s in native finalizers (the engine clients' sockets)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":  # required: vLLM spawns engine processes that re-import the main module
    try:
        main(sys.argv[1:])
    except SystemExit as stop:  # SIGTERM, or a refused option (its message printed as Python would)
        if isinstance(stop.code, str):
            print(stop.code, file=sys.stderr)
        _exit_now(stop.code if isinstance(stop.code, int) else 0 if stop.code is None else 1)
    except KeyboardInterrupt:
        _exit_now(130)
    _exit_now(0)
