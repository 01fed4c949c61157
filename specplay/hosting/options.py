"""The page's options: command line < config file < environment, and what they mean (the presets offered,
the operator's PageSettings). Which presets the page offers is the operator's choice (--presets or a
--config file), never the user's. Light: no Gradio, vLLM or torch imported here (`--help` is instant)."""

from __future__ import annotations

import argparse
import os
import sys

from specplay.core.hardware import CORE_LAYOUT_ENV, CORE_LAYOUTS, layout_name
from specplay.hosting.guard import trusted_proxies
from specplay.hosting.settings import PageSettings


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
    parser.add_argument("--host", help="address to listen on (default: GRADIO_SERVER_NAME, else 127.0.0.1; "
                                       "0.0.0.0 for all)")
    parser.add_argument("--port", type=int, help="port (default: GRADIO_SERVER_PORT, else 7860)")
    parser.add_argument("--share", action="store_true", default=None, help="also open a public gradio.live link")
    parser.add_argument("--auth", metavar="USER:PASS",
                        help="require this login; prefer PLAYGROUND_AUTH=USER:PASS or --auth-file, since a "
                             "command line shows in `ps`")
    parser.add_argument("--auth-file", metavar="FILE",
                        help="read the login USER:PASS from the first line of FILE (preferred to --auth)")
    parser.add_argument("--allow-switching", dest="allow_switching", action="store_true", default=None,
                        help="let visitors switch presets (default: yes on 127.0.0.1, no when served to others)")
    parser.add_argument("--no-switching", dest="allow_switching", action="store_false",
                        help="visitors can't switch presets: the page keeps the one the operator loaded")
    parser.add_argument("--allow-bench", dest="allow_bench", action="store_true", default=None,
                        help="offer the Bench tab (default: yes on 127.0.0.1, no when served to others)")
    parser.add_argument("--no-bench", dest="allow_bench", action="store_false",
                        help="no Bench tab: visitors can't hold the engines for a sweep")
    parser.add_argument("--max-run-seconds", type=float, help="stop a run (and a bench) after this long (default: 300)")
    parser.add_argument("--queue-size", type=int, help="runs and switches that may wait (default: 32)")
    parser.add_argument("--core-layout", choices=CORE_LAYOUTS,
                        help="CPU engines on 2+ cores: fair (default: app and schedulers on the first core, "
                             "both workers on the other, so the speedup is fair), per-engine (each worker its "
                             "own core: faster, less fair), off (no pinning); or PLAYGROUND_CORE_LAYOUT")
    parser.add_argument("--lesson", metavar="FILE",
                        help="the Lesson tab's lesson, a YAML file (docs/lesson.md; default: the bundled one for "
                             "this machine's device); a bad file stops the app, naming its line")
    parser.add_argument("--trusted-proxies", metavar="ADDR[,NET...]",
                        help="proxies whose X-Forwarded-For is believed (e.g. 127.0.0.1 or 10.0.0.0/8); the "
                             "visitor's address is then the rightmost hop that isn't one of them. Default: "
                             "none, the peer is the address; or PLAYGROUND_TRUSTED_PROXIES")
    parser.add_argument("--session-capacity", type=int,
                        help="visitors' sessions kept in memory, least recently used dropped first (default: 128)")
    remote = parser.add_argument_group("remote mode: two running `vllm serve` servers instead of in-process "
                                       "engines (docs/remote.md); --preset names what they run")
    remote.add_argument("--baseline-url", metavar="URL", help="the baseline server, e.g. http://127.0.0.1:8000")
    remote.add_argument("--speculative-url", metavar="URL", help="the speculative server, e.g. http://127.0.0.1:8001")
    remote.add_argument("--server-timeout", dest="server_timeout_s", type=float, metavar="S",
                        help="seconds to wait for a server's answer or next chunk (default: 60)")
    remote.add_argument("--api-key-env", metavar="NAME",
                        help="environment variable holding the servers' API key (default: VLLM_API_KEY)")
    remote.add_argument("--server-pids", metavar="PID,PID",
                        help="the servers' process ids when they run on this machine, for the memory chart "
                             "(`specplay launch` passes them)")
    from specplay.presets.adhoc import add_arguments as add_adhoc_arguments

    add_adhoc_arguments(parser, "; the page offers only it")  # the operator's: no visitor's input is a path
    # None: the config file's value or DEFAULTS' stands unless the flag is given
    parser.set_defaults(dtype=None, max_model_len=None, load_format=None, memory_split=None)
    return parser.parse_args(argv)


DEFAULTS = {"presets": None, "preset": None, "host": "127.0.0.1", "port": 7860, "share": False, "auth": None,
            "allow_switching": None, "allow_bench": None, "auth_file": None, "max_run_seconds": 300.0, "queue_size": 32,
            "session_capacity": 128, "core_layout": None, "trusted_proxies": None, "lesson": None,
            "baseline_url": None, "speculative_url": None, "server_timeout_s": 60.0, "api_key_env": "VLLM_API_KEY",
            "server_pids": None, "preset_file": None, "model": None, "speculative_config": None, "dtype": "auto",
            "max_model_len": 4096,
            "load_format": "auto", "memory_split": "0.4,0.45"}
REMOTE_KEYS = ("baseline_url", "speculative_url")
TRUSTED_PROXIES_ENV = "PLAYGROUND_TRUSTED_PROXIES"
# On a Hugging Face Space (which sets SPACE_ID) every visitor comes through the platform's proxy, whose
# address is private: untrusted, all visitors shared its 3 places (one visitor's 3 tabs blocked everyone).
# Nothing reaches a Space's container but that proxy, so its private ranges are trusted there by default
# (the proxy appends the visitor's address to X-Forwarded-For; uvicorn takes the rightmost untrusted hop).
SPACE_ENV = "SPACE_ID"
SPACE_PROXIES = "10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,100.64.0.0/10,fc00::/7"


def gradio_env() -> dict:
    """Gradio's own GRADIO_SERVER_NAME / GRADIO_SERVER_PORT, as a Space or a container sets them."""
    found = {}
    if os.environ.get("GRADIO_SERVER_NAME"):
        found["host"] = os.environ["GRADIO_SERVER_NAME"]
    if os.environ.get("GRADIO_SERVER_PORT"):
        try:
            found["port"] = int(os.environ["GRADIO_SERVER_PORT"])
        except ValueError:
            raise SystemExit(f"GRADIO_SERVER_PORT must be a port number, got {os.environ['GRADIO_SERVER_PORT']!r}")
    return found


def resolve_options(args: argparse.Namespace) -> dict:
    """Defaults < config file < environment (auth, GRADIO_SERVER_NAME/PORT) < command line."""
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
    if os.environ.get(TRUSTED_PROXIES_ENV):
        options["trusted_proxies"] = os.environ[TRUSTED_PROXIES_ENV]
    elif os.environ.get(SPACE_ENV) and not options["trusted_proxies"]:
        options["trusted_proxies"] = SPACE_PROXIES
    if os.environ.get(CORE_LAYOUT_ENV):
        options["core_layout"] = os.environ[CORE_LAYOUT_ENV]
    options.update(gradio_env())
    options.update({k: v for k, v in vars(args).items() if k in DEFAULTS and v is not None})
    # the file read in its place: --auth on the command line still wins, and a config file's yields to the env
    if options["auth_file"] and not args.auth and (args.auth_file or not os.environ.get("PLAYGROUND_AUTH")):
        try:
            with open(options["auth_file"]) as f:
                options["auth"] = f.readline().strip()
        except OSError as exc:
            raise SystemExit(f"--auth-file: can't read {options['auth_file']}: {exc.strerror}") from None
    if isinstance(options["presets"], str):
        options["presets"] = [n.strip() for n in options["presets"].split(",") if n.strip()]
    if options["auth"] is not None:
        user, sep, password = str(options["auth"]).partition(":")
        if not (sep and user and password):
            raise SystemExit("--auth / PLAYGROUND_AUTH must look like USER:PASS")
        options["auth"] = (user, password)
    try:
        options["core_layout"] = layout_name(options["core_layout"])
        options["trusted_proxies"] = trusted_proxies(options["trusted_proxies"])
    except ValueError as exc:
        raise SystemExit(f"app.py: {exc}") from None
    if bool(options["baseline_url"]) != bool(options["speculative_url"]):
        raise SystemExit("app.py: remote mode needs both --baseline-url and --speculative-url")
    return options


def remote_mode(options: dict) -> bool:
    return bool(options["baseline_url"])


def remote_factory(options: dict):
    """The pair factory of remote mode (PairManager calls it with the preset): the operator's servers,
    checked before the first run. Malformed URLs stop the app here, naming the side."""
    from specplay.core.events import BASELINE, SPECULATIVE
    from specplay.run.remote import open_remote_pair, remote_settings

    pids = {}
    if options["server_pids"]:
        try:
            pids = dict(zip((BASELINE, SPECULATIVE), ([int(p)] for p in str(options["server_pids"]).split(","))))
        except ValueError:
            raise SystemExit("app.py: --server-pids must look like PID,PID") from None
    settings = {"timeout_s": float(options["server_timeout_s"]), "api_key_env": options["api_key_env"], "pids": pids}
    try:
        remote_settings(options["baseline_url"], options["speculative_url"], **settings)
    except ValueError as exc:
        raise SystemExit(f"app.py: {exc}") from None

    def factory(preset, hardware=None, log=print):
        return open_remote_pair(options["baseline_url"], options["speculative_url"], preset, **settings)
    return factory


def offered_presets(options: dict):
    """(presets the page offers, initial preset name); an unknown or unrunnable name stops the app."""
    from specplay.core.hardware import detect
    from specplay.presets.catalog import PresetError, availability, default_preset_name, get_preset, load_presets

    hardware = detect()
    every = load_presets()
    own = _own_pair(options)
    if own is not None:  # the operator's own pair (a preset file or an ad-hoc pair): the only one offered
        return {own.name: own}, own.name, hardware
    if remote_mode(options):  # the servers run what they run: one preset, wherever they are
        name = options["preset"] or default_preset_name(hardware, every)
        try:
            return {name: get_preset(name, every)}, name, hardware
        except PresetError as exc:
            raise SystemExit(f"app.py: {exc}") from None
    try:
        if options["presets"]:
            chosen = {name: get_preset(name, every) for name in options["presets"]}
        else:
            # by default only what runs without downloading: offered presets should load
            chosen = {n: p for n, p in every.items()
                      if (a := availability(p, hardware)).runnable and not a.needs_hub}
        default = default_preset_name(hardware, every)
        initial = options["preset"] or (default if default in chosen else next(iter(chosen), None))
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


def lesson_for(options: dict, hardware):
    """The operator's lesson (--lesson, or the bundled one for this device), checked against every shipped
    preset; a bad file stops the app with its name, line and field."""
    from specplay.lesson.load import default_lesson_path, load_lesson
    from specplay.lesson.schema import LessonError

    try:
        return load_lesson(options["lesson"] or default_lesson_path(hardware.device))
    except LessonError as exc:
        raise SystemExit(f"app.py: --lesson: {exc}") from None


def _own_pair(options: dict):
    """The preset --preset-file or --model/--speculative-config name (as every command resolves them), or None."""
    from types import SimpleNamespace

    from specplay.presets.adhoc import named_preset
    from specplay.presets.catalog import PresetError

    if not any(options.get(key) for key in ("preset_file", "model", "speculative_config")):
        return None
    try:
        return named_preset(SimpleNamespace(**options))
    except PresetError as exc:
        raise SystemExit(f"app.py: {exc}") from None


def settings_from_options(options: dict) -> PageSettings:
    """The operator's PageSettings; switching presets is for visitors only on a page served to this machine."""
    public = bool(options["share"]) or options["host"] not in ("127.0.0.1", "localhost", "::1")
    allow = options["allow_switching"] if options["allow_switching"] is not None else not public
    allow = allow and not remote_mode(options)  # another preset would need other servers
    bench = options["allow_bench"] if options["allow_bench"] is not None else not public
    if options["share"] and not options["auth"]:
        print("app.py: warning: --share without --auth puts the page and its engines on a public link that "
              "anyone can use; set --auth USER:PASS (or PLAYGROUND_AUTH)", file=sys.stderr)
    return PageSettings(allow_switching=bool(allow), allow_bench=bool(bench), max_run_seconds=float(options["max_run_seconds"]),
                        queue_size=int(options["queue_size"]), session_capacity=int(options["session_capacity"]),
                        trusted_proxies=trusted_proxies(options["trusted_proxies"]))
