"""`compare`: one prompt through both engines, the verdict, the figures and why (or one JSON object)."""

from __future__ import annotations

import json
import sys

from specplay.cli.base import EXIT_CODES, EXIT_OK, EXIT_RUN_ERROR, CLISubcommand, UsageError, check_runnable, stderr_log
from specplay.core.events import BASELINE, DEFAULT_SCHEDULE, Schedule

DEMO_PROMPT = (
    "Rewrite the following paragraph in formal English, keeping every fact:\n"
    "so basically the new build system is way faster, it caches everything it compiled before and only "
    "rebuilds the files you touched, which means a clean build takes ten minutes but after that most "
    "builds take under thirty seconds."
)
# For presets without a tokenizer (dummy weights): a fixed prompt of 32 token ids.
DEMO_TOKEN_IDS = tuple(range(1000, 1032))


def request_of(args, preset):
    from specplay.core.events import GenerationRequest

    ids = None
    if args.prompt_token_ids:
        try:
            ids = tuple(int(t) for t in args.prompt_token_ids.replace(",", " ").split())
        except ValueError:
            raise UsageError("--prompt-token-ids: expected integers separated by commas") from None
    elif preset.prompt_input == "token_ids":
        if args.prompt:
            raise UsageError(f"{preset.name} has no tokenizer (dummy weights): use --prompt-token-ids")
        ids = DEMO_TOKEN_IDS
    return GenerationRequest(
        prompt=args.prompt if args.prompt is not None else DEMO_PROMPT, prompt_token_ids=ids,
        max_tokens=args.max_tokens or preset.default_max_tokens, temperature=args.temperature,
        ignore_eos=args.ignore_eos or preset.ignore_eos,
    )


def runs(pair, preset) -> bool:
    """Whether a started pair runs this preset: by name, or (an ad-hoc pair) by the same engine arguments."""
    if getattr(pair.tag, "name", None) == preset.name:
        return True
    from specplay.core.events import SPECULATIVE
    from specplay.presets.catalog import engine_settings

    mine = dict(zip((BASELINE, SPECULATIVE), engine_settings(preset)))
    return all(getattr(pair.engines[role].settings, "engine_args", None) == mine[role].engine_args for role in mine)


def start_failed(args, preset, exc: Exception) -> int:
    """A pair that failed to start is a result too: one JSON object with the error under --json (scripts and
    the bench record the failure instead of reading nothing), else one line on stderr; never a traceback."""
    from specplay.engine.base import EngineStartError

    error = str(exc) if isinstance(exc, EngineStartError) else f"{type(exc).__name__}: {exc}"
    if args.json:
        print(json.dumps({"preset": preset.name, "method": preset.method,
                          "num_speculative_tokens": preset.num_speculative_tokens, "started": False, "error": error}))
    else:
        print(f"compare: {preset.name} failed to start: {error}", file=sys.stderr)
    return EXIT_RUN_ERROR


def add_remote_arguments(parser) -> None:
    group = parser.add_argument_group("remote mode: two running `vllm serve` servers (docs/remote.md)")
    group.add_argument("--baseline-url", metavar="URL", help="the baseline server, e.g. http://127.0.0.1:8000")
    group.add_argument("--speculative-url", metavar="URL", help="the speculative server")
    group.add_argument("--server-timeout", type=float, default=60.0, metavar="S",
                       help="seconds to wait for a server's answer or next chunk (default: 60)")
    group.add_argument("--api-key-env", default="VLLM_API_KEY", metavar="NAME",
                       help="environment variable holding the servers' API key (default: VLLM_API_KEY)")


def remote_pair(args, preset):
    """An unstarted pair on the two servers the command line names; a bad URL is a usage error."""
    from specplay.plan.memory import kv_bytes_per_token_by_role
    from specplay.run.remote import open_remote_pair

    if not (args.baseline_url and args.speculative_url):
        raise UsageError("remote mode needs both --baseline-url and --speculative-url")
    try:
        return open_remote_pair(args.baseline_url, args.speculative_url, preset, timeout_s=args.server_timeout,
                                api_key_env=args.api_key_env,
                                kv_bytes_per_token=kv_bytes_per_token_by_role(preset) if preset else None)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def record(args, preset, hardware, request, result, log) -> None:
    """--record FILE: the run with its provenance (run.recording); a file that can't be written is one line."""
    from specplay.cli.main import version
    from specplay.run.recording import provenance, recording_of, write_recording

    made = provenance(preset, hardware, version(), remote=bool(args.baseline_url))
    try:
        write_recording(recording_of(result, made, request), args.record)
    except OSError as exc:
        raise UsageError(f"--record {args.record}: {exc.strerror or exc}") from None
    log(f"recorded to {args.record}")


class CompareCommand(CLISubcommand):
    name = "compare"
    help = "run one prompt through both engines and compare"
    epilog = EXIT_CODES

    def add_arguments(self, c) -> None:
        from specplay.presets.catalog import DEFAULTS_SAID

        c.add_argument("--preset", default=None, help=f"preset name (default: {DEFAULTS_SAID})")
        c.add_argument("--prompt", default=None, help="prompt text (default: a rewrite demo prompt)")
        c.add_argument("--prompt-token-ids", default=None,
                       help="comma-separated token ids instead of text (dummy-weight presets)")
        c.add_argument("--max-tokens", type=int, default=None, help="default: the preset's")
        c.add_argument("--temperature", type=float, default=0.0)
        c.add_argument("--ignore-eos", action="store_true", help="always generate max tokens")
        c.add_argument("--schedule", choices=[s.value for s in Schedule], default=DEFAULT_SCHEDULE.value,
                       help="one engine after the other, each with the device to itself, as the page does "
                            "(default), or both at once (on one GPU each slows the other)")
        c.add_argument("--json", action="store_true", help="print one JSON object")
        c.add_argument("--record", metavar="FILE", default=None,
                       help="also write the run as a recording: every figure unrounded, both token streams with "
                            "their times, the verification steps, and where and how it was made (`specplay diff` "
                            "compares two)")
        c.add_argument("--draft-steps", action="store_true",
                       help="a draft-model preset at temperature 0: after the run, start the draft model alone and "
                            "recompute each step's drafts (speculative.step_detail's proposed tokens), checked "
                            "against vLLM's per-step counts")
        add_remote_arguments(c)
        from specplay.presets.adhoc import add_arguments as add_own_pair_arguments

        add_own_pair_arguments(c)

    def cmd(self, args, pair=None) -> int:
        """Start the preset's pair, compare one prompt, shut it down. With `pair` (started, this preset's;
        tests and embedding), compare on that one instead and leave it running."""
        from specplay.cli.report import print_report
        from specplay.core.hardware import detect
        from specplay.engine.base import PromptError
        from specplay.presets.adhoc import named_preset
        from specplay.presets.catalog import default_preset_name
        from specplay.plan.memory import target_step_floor_s
        from specplay.run.compare_prompt import PairStartError, compare_prompt

        preset = named_preset(args, default_preset_name)
        try:
            check_runnable(preset, remote=bool(args.baseline_url))  # servers run it wherever they are
        except UsageError as exc:  # refused before any engine starts (exit 2): scripts still read one object
            if args.json:
                print(json.dumps({"preset": preset.name, "method": preset.method, "runnable": False,
                                  "started": False, "error": str(exc)}))
            raise
        request = request_of(args, preset)
        log = stderr_log if args.json else print
        if pair is not None and not runs(pair, preset):
            raise SystemExit(f"compare: the pair given runs {getattr(pair.tag, 'name', '?')}, not {preset.name}")
        hardware = detect()
        opener = (lambda: remote_pair(args, preset)) if args.baseline_url else None
        try:
            result = compare_prompt(preset, request, args.schedule, pair=pair, opener=opener, log=log,
                                    hardware=hardware, step_floor_s=target_step_floor_s(preset, hardware),
                                    draft_steps=args.draft_steps)
        except PairStartError as exc:  # vLLM refused the config, a model is missing, ...: a result too
            return start_failed(args, preset, exc.__cause__)
        except PromptError as exc:
            raise UsageError(str(exc)) from None
        if args.json:
            print(json.dumps(result.model_dump(mode="json")))
        else:
            print_report(result, sys.stdout)
        if args.record:  # after the report: a file that can't be written still leaves the run on screen
            record(args, preset, hardware, request, result, log)
        return EXIT_RUN_ERROR if result.error else EXIT_OK


def cmd_init() -> list[CLISubcommand]:
    return [CompareCommand()]
