"""The page's flags (argparse: `--help`), merged with the config file and the environment into one typed
AppSettings (app_settings.py), and what they mean (the presets offered, each through the gate every door
asks, plan/gate.py; the operator's PageSettings). Which presets the page offers is the operator's choice (--presets or a
--config file), never the user's. Light: no Gradio, vLLM or torch imported here (`--help` is instant)."""

from __future__ import annotations

import argparse
import sys

from specplay.core.hardware import CORE_LAYOUT_ENV, CORE_LAYOUTS  # noqa: F401 (server.py reads it from here)
from specplay.hosting.app_settings import SPACE_PROXIES, TRUSTED_PROXIES_ENV, AppSettings  # noqa: F401
from specplay.hosting.settings import PageSettings
from specplay.presets.catalog import DEFAULTS_SAID


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Speculative decoding playground: one prompt, a baseline and a speculative vLLM engine "
                    "side by side, with an identity check and live charts.")
    parser.add_argument("--presets", metavar="NAME[,NAME...]",
                        help="presets the page offers (default: every preset runnable on this machine "
                             "without the hub)")
    parser.add_argument("--preset", metavar="NAME", help=f"preset loaded at start (default: {DEFAULTS_SAID})")
    parser.add_argument("--config", metavar="FILE",
                        help="YAML file with any of these options as keys, named as the flags with _ for - (presets, "
                             "preset, host, port, share, auth, ...); the environment and command-line flags win")
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
    parser.add_argument("--allow-remote-code", action="store_true", default=None,
                        help="load a preset whose target sets trust_remote_code on a page served to others "
                             "(its model repository's Python runs on this host; default: refused)")
    parser.add_argument("--max-run-seconds", type=float, help="stop a run (and a bench) after this long (default: 300)")
    parser.add_argument("--queue-size", type=int, help="runs and switches that may wait (default: 32)")
    parser.add_argument("--core-layout", choices=CORE_LAYOUTS,
                        help="CPU engines on 2+ cores: fair (default: app and schedulers on the first core, "
                             "both workers on the other, so the speedup is fair), per-engine (each worker its "
                             "own core: faster, less fair), off (no pinning); or PLAYGROUND_CORE_LAYOUT")
    parser.add_argument("--lesson", metavar="FILE",
                        help="the Lesson tab's lesson, a YAML file (docs/lesson.md; default: the bundled one for "
                             "this machine's device); a bad file stops the app, naming its line")
    parser.add_argument("--recordings", metavar="DIR",
                        help="recorded runs (`specplay compare --record`) the Compare tab offers in a picker, "
                             "each shown with where it was made; read once at start, a bad file skipped with "
                             "one line (default: the project's docs/results/recordings, made on a GPU; '' for none)")
    parser.add_argument("--trusted-proxies", metavar="ADDR[,NET...]",
                        help="proxies whose X-Forwarded-For is believed (e.g. 127.0.0.1 or 10.0.0.0/8); the "
                             "visitor's address is then the rightmost hop that isn't one of them. Default: "
                             "none, the peer is the address; or PLAYGROUND_TRUSTED_PROXIES")
    parser.add_argument("--session-capacity", type=int,
                        help="visitors' sessions kept in memory, least recently used dropped first (default: 128)")
    _add_room_argument(parser)
    _add_remote_arguments(parser)
    from specplay.presets.adhoc import add_arguments as add_adhoc_arguments

    add_adhoc_arguments(parser, "; the page offers only it")  # the operator's: no visitor's input is a path
    # None: the config file's value or DEFAULTS' stands unless the flag is given
    parser.set_defaults(dtype=None, max_model_len=None, load_format=None, memory_split=None)
    return parser.parse_args(argv)


def _add_room_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--presenter-key", metavar="KEY",
                        help="a room that watches one run: the visitor who opens the page as /?presenter=KEY runs "
                             "and steps through the lesson, every other visitor's page follows live, read-only "
                             "(docs/hosting.md); prefer PLAYGROUND_PRESENTER_KEY, since a command line shows in `ps`")


def _add_remote_arguments(parser: argparse.ArgumentParser) -> None:
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


def resolve_options(args: argparse.Namespace) -> AppSettings:
    """Defaults < config file < environment < command line, checked (hosting/app_settings.py)."""
    return AppSettings.load({key: value for key, value in vars(args).items() if key in AppSettings.model_fields})


def remote_mode(options: AppSettings) -> bool:
    return options.remote


def remote_factory(options: AppSettings):
    """The pair factory of remote mode (PairManager calls it with the preset): the operator's servers,
    checked before the first run. Malformed URLs stop the app here, naming the side."""
    from specplay.core.events import BASELINE, SPECULATIVE
    from specplay.run.remote import open_remote_pair, remote_settings

    pids = {}
    if options.server_pids:
        try:
            pids = dict(zip((BASELINE, SPECULATIVE), ([int(p)] for p in str(options.server_pids).split(","))))
        except ValueError:
            raise SystemExit("app.py: --server-pids must look like PID,PID") from None
    settings = {"timeout_s": options.server_timeout_s, "api_key_env": options.api_key_env, "pids": pids}
    try:
        remote_settings(options.baseline_url, options.speculative_url, **settings)
    except ValueError as exc:
        raise SystemExit(f"app.py: {exc}") from None

    def factory(preset, hardware=None, log=print):
        return open_remote_pair(options.baseline_url, options.speculative_url, preset, **settings)
    return factory


def offered_presets(options: AppSettings):
    """(presets the page offers, initial preset name); an unknown or unrunnable name stops the app."""
    from specplay.core.hardware import detect
    from specplay.presets.catalog import PresetError, availability, default_preset_name, get_preset, load_presets

    hardware = detect()
    every = load_presets()
    own = _own_pair(options)
    if own is not None:  # the operator's own pair (a preset file or an ad-hoc pair): the only one offered
        if not remote_mode(options) and (problem := _remote_code(own, options)):
            raise SystemExit(f"app.py: {problem}")
        _gate(own, hardware, remote_mode(options))
        return {own.name: own}, own.name, hardware
    if remote_mode(options):  # the servers run what they run: one preset, wherever they are
        name = options.preset or default_preset_name(hardware, every)
        try:
            return {name: get_preset(name, every)}, name, hardware
        except PresetError as exc:
            raise SystemExit(f"app.py: {exc}") from None
    try:
        if options.presets:
            chosen = {name: get_preset(name, every) for name in options.presets}
        else:
            # by default only what runs without downloading: offered presets should load
            chosen = {n: p for n, p in every.items()
                      if (a := availability(p, hardware)).runnable and not a.needs_hub}
        default = default_preset_name(hardware, every)
        initial = options.preset or (default if default in chosen else next(iter(chosen), None))
        if initial is None:
            raise PresetError("no preset can run on this machine")
        if initial not in chosen:
            chosen[initial] = get_preset(initial, every)
    except PresetError as exc:
        raise SystemExit(f"app.py: {exc}") from None
    if problem := _remote_code(chosen[initial], options):
        raise SystemExit(f"app.py: {problem}")
    status = {n: availability(p, hardware) for n, p in chosen.items()}
    _gate(chosen[initial], hardware, False)
    refused = {n: problem for n, p in chosen.items() if (problem := _remote_code(p, options))}
    for name, why in status.items():
        if not why.runnable or name in refused:
            print(f"app.py: not offering {name}: {refused.get(name) or why.reason}", file=sys.stderr)
    return {n: p for n, p in chosen.items() if status[n].runnable and n not in refused}, initial, hardware


def _remote_code(preset, options: AppSettings) -> str | None:
    """Why this page may not load `preset` in its own process: its target's trust_remote_code would run the
    model repository's Python for a page served to others, unless the operator allowed it (presets.engine_args)."""
    from specplay.presets.engine_args import remote_code_problem

    return remote_code_problem(preset.target, options.public, options.allow_remote_code)


def _gate(preset, hardware, remote: bool) -> None:
    """The gate every door asks (plan.gate) before the engines load; a refusal stops the app with its line."""
    from specplay.plan.gate import PairRefused, gate

    try:
        gate(preset, hardware, remote=remote)
    except PairRefused as exc:
        raise SystemExit(f"app.py: {exc}") from None


def lesson_for(options: AppSettings, hardware):
    """The operator's lesson (--lesson, or the bundled one for this device), checked against every shipped
    preset and, for the recordings its steps name, the page's --recordings folder (the bundled lessons name
    the shipped recordings they come with, whatever folder the page offers); a bad file stops the app with
    its name, line and field."""
    from specplay.lesson.load import bundled_lesson, load_lesson
    from specplay.lesson.schema import LessonError

    try:
        if options.lesson:
            return load_lesson(options.lesson, recordings=recordings_folder(options))
        return bundled_lesson(hardware.device)
    except LessonError as exc:
        raise SystemExit(f"app.py: --lesson: {exc}") from None


def _own_pair(options: AppSettings):
    """The preset --preset-file or --model/--speculative-config name (as every command resolves them), or None."""
    from specplay.presets.adhoc import named_preset
    from specplay.presets.catalog import PresetError

    if not any((options.preset_file, options.model, options.speculative_config)):
        return None
    try:
        return named_preset(options)
    except PresetError as exc:
        raise SystemExit(f"app.py: {exc}") from None


def settings_from_options(options: AppSettings) -> PageSettings:
    """The operator's PageSettings; switching presets is for visitors only on a page served to this machine."""
    public = options.public
    allow = options.allow_switching if options.allow_switching is not None else not public
    allow = allow and not remote_mode(options)  # another preset would need other servers
    bench = options.allow_bench if options.allow_bench is not None else not public
    if options.share and not options.auth:
        print("app.py: warning: --share without --auth puts the page and its engines on a public link that "
              "anyone can use; set --auth USER:PASS (or PLAYGROUND_AUTH)", file=sys.stderr)
    return PageSettings(allow_switching=bool(allow), allow_bench=bool(bench), max_run_seconds=options.max_run_seconds,
                        queue_size=options.queue_size, session_capacity=options.session_capacity,
                        trusted_proxies=options.trusted_proxies, recordings=recordings_folder(options),
                        presenter_key=options.presenter_key.get_secret_value() if options.presenter_key else None)


def recordings_folder(options: AppSettings) -> str | None:
    """The folder of recordings the page offers: the operator's, else the shipped one where it exists."""
    from specplay.core.paths import RECORDINGS_DIR

    if options.recordings is not None:
        return options.recordings or None
    return str(RECORDINGS_DIR) if RECORDINGS_DIR.is_dir() else None
