"""Serve the playground page: `python app.py`. The page is up at once; the engines load behind it.

Which presets the page offers is the operator's choice (--presets or a --config file), never the user's.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys


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
    return parser.parse_args(argv)


DEFAULTS = {"presets": None, "preset": None, "host": "127.0.0.1", "port": 7860, "share": False, "auth": None}


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
    from playground.hardware import detect
    from playground.presets import DEFAULT_PRESET, PresetError, availability, get_preset, load_presets

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


def main(argv=None) -> None:
    options = resolve_options(parse_args(argv))
    presets, initial, hardware = offered_presets(options)
    from playground.health import add_health_route
    from playground.pair_manager import PairManager
    from playground import ui

    manager = PairManager(presets, initial, hardware)
    manager.load(initial)  # background thread: the page serves while the engines load
    demo = ui.build_page(manager)
    # SIGTERM (service managers, test fixtures) takes the same way out as Ctrl-C: engines shut down.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        # Non-blocking launch, so GET /health (playground/health.py) joins the app Gradio created; then block
        # as launch(block=True) would.
        ui.launch(demo, options["host"], options["port"], share=bool(options["share"]), auth=options["auth"],
                  block=False)
        add_health_route(demo.server_app, manager)
        demo.block_thread()
    finally:
        manager.shutdown()


if __name__ == "__main__":  # required: vLLM spawns engine processes that re-import the main module
    main(sys.argv[1:])
