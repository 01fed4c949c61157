"""`python -m specplay presets | serve-cmd | compare | prepare | plan | bench`: the playground without the page."""

from __future__ import annotations

import argparse
import json
import sys

from specplay.core.events import BASELINE, SPECULATIVE

DEMO_PROMPT = (
    "Rewrite the following paragraph in formal English, keeping every fact:\n"
    "so basically the new build system is way faster, it caches everything it compiled before and only "
    "rebuilds the files you touched, which means a clean build takes ten minutes but after that most "
    "builds take under thirty seconds."
)
# For presets without a tokenizer (dummy weights): a fixed prompt of 32 token ids.
DEMO_TOKEN_IDS = tuple(range(1000, 1032))


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m specplay", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("presets", help="list presets: method, k, and whether each can run here")
    s = sub.add_parser("serve-cmd", help="print the `vllm serve` lines a preset corresponds to")
    s.add_argument("--preset", required=True)
    sub.add_parser("prepare", help="build the offline models into the project cache (idempotent)")
    c = sub.add_parser("compare", help="run one prompt through both engines and compare")
    c.add_argument("--preset", default=None, help="preset name (default: smollm2-ngram)")
    c.add_argument("--prompt", default=None, help="prompt text (default: a rewrite demo prompt)")
    c.add_argument("--prompt-token-ids", default=None,
                   help="comma-separated token ids instead of text (dummy-weight presets)")
    c.add_argument("--max-tokens", type=int, default=None, help="default: the preset's")
    c.add_argument("--temperature", type=float, default=0.0)
    c.add_argument("--ignore-eos", action="store_true", help="always generate max tokens")
    c.add_argument("--schedule", choices=["concurrent", "sequential"], default="concurrent",
                   help="run both engines at once (default) or one after the other (clean timings)")
    c.add_argument("--json", action="store_true", help="print one JSON object")
    pl = sub.add_parser("plan", help="will the preset's two engines fit in memory? (exit 0 yes, 3 no, 4 can't tell)")
    from specplay.plan.memory import add_arguments as add_plan_arguments

    add_plan_arguments(pl)
    from specplay.cli.bench import add_arguments as add_bench_arguments

    add_bench_arguments(sub.add_parser("bench", help="where speculation pays: workloads × k × temperature × "
                                                     "concurrency, each engine measured alone; CSV, JSON, charts"))
    return p


def cmd_presets() -> int:
    from specplay.core.hardware import detect
    from specplay.presets.catalog import DEFAULT_PRESET, availability, load_presets

    hw = detect()
    print(f"this machine: {hw.describe()}\n")
    rows = []
    for p in load_presets().values():
        a = availability(p, hw)
        rows.append((p.name + (" (default)" if p.name == DEFAULT_PRESET else ""), p.method,
                     str(p.num_speculative_tokens), ("yes: " if a.runnable else "no: ") + a.reason, p.description))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    head = ("preset", "method", "k")
    print("  ".join(h.ljust(w) for h, w in zip(head, widths)) + "  runs here / description")
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r[:3], widths)) + f"  {r[3]}\n" + " " * (sum(widths) + 6) + r[4])
    return 0


def cmd_serve(name: str) -> int:
    from specplay.presets.catalog import get_preset, serve_commands

    preset = get_preset(name)
    print(f"# {preset.name}: {preset.description}")
    lines = serve_commands(preset)
    print(f"# baseline\n{lines[BASELINE]}\n# speculative\n{lines[SPECULATIVE]}")
    return 0


def cmd_prepare() -> int:
    from specplay.presets.offline_model import ensure_offline_models

    for name, path in ensure_offline_models().items():
        print(f"{name}: {path}")
    return 0


def _request(args, preset):
    from specplay.core.events import GenerationRequest

    ids = None
    if args.prompt_token_ids:
        try:
            ids = tuple(int(t) for t in args.prompt_token_ids.replace(",", " ").split())
        except ValueError:
            raise SystemExit("--prompt-token-ids: expected integers separated by commas")
    elif preset.prompt_input == "token_ids":
        if args.prompt:
            raise SystemExit(f"{preset.name} has no tokenizer (dummy weights): use --prompt-token-ids")
        ids = DEMO_TOKEN_IDS
    return GenerationRequest(
        prompt=args.prompt if args.prompt is not None else DEMO_PROMPT, prompt_token_ids=ids,
        max_tokens=args.max_tokens or preset.default_max_tokens, temperature=args.temperature,
        ignore_eos=args.ignore_eos or preset.ignore_eos,
    )


def cmd_compare(args, pair=None) -> int:
    """Start the preset's pair, compare one prompt, shut it down. With `pair` (started, this preset's; tests
    and embedding), compare on that one instead and leave it running."""
    from specplay.run.comparison import Comparison
    from specplay.engine.vllm_engine import PromptError
    from specplay.run.pairs import open_pair
    from specplay.run.explain import explain
    from specplay.core.hardware import detect
    from specplay.presets.catalog import DEFAULT_PRESET, availability, get_preset
    from specplay.cli.report import format_report

    preset = get_preset(args.preset or DEFAULT_PRESET)
    where = availability(preset)
    if not where.runnable:
        raise SystemExit(f"{preset.name} can't run here: {where.reason}")
    request = _request(args, preset)
    log = (lambda msg: print(msg, file=sys.stderr)) if args.json else print
    own = pair is None
    if not own and getattr(pair.tag, "name", None) != preset.name:
        raise SystemExit(f"compare: the pair given runs {getattr(pair.tag, 'name', '?')}, not {preset.name}")
    pair = open_pair(preset, log=log) if own else pair
    try:
        if own:
            pair.start(progress=lambda msg, frac: log(f"[{frac:4.0%}] {msg}"))
        comparison = Comparison(decode=pair.engines[BASELINE].decode,
                                num_speculative_tokens=preset.num_speculative_tokens)
        try:
            for event in pair.stream(request, schedule=args.schedule):
                comparison.add(event)
        except PromptError as exc:
            raise SystemExit(str(exc))
        result = comparison.as_dict()
        result["preset"] = preset.name
        result["load_seconds"] = pair.status.load_seconds
        result["engines"] = pair.engine_info()
        result["explanation"] = explain(result, preset.method, preset.num_speculative_tokens, detect().device)
        if args.json:
            print(json.dumps(result))
        else:
            print(format_report(result))
    finally:
        if own:
            pair.shutdown()
    return 0 if not result.get("error") else 1


def cmd_plan(args) -> int:
    from specplay.plan.memory import run_cli

    return run_cli(args)


def main(argv: list[str] | None = None, pair=None) -> int:
    """The command line. `pair`: an already started EnginePair for `compare` and `bench` to run on instead of
    starting (and stopping) their own (tests, embedding); it must run the preset asked for."""
    import os

    # vLLM's INFO logs drown the report; VLLM_LOGGING_LEVEL=INFO brings them back.
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")  # stdout is the report (or the JSON)
    from specplay.presets.offline_model import OfflineModelError
    from specplay.presets.catalog import PresetError

    args = _parser().parse_args(argv)
    try:
        if args.command == "presets":
            return cmd_presets()
        if args.command == "serve-cmd":
            return cmd_serve(args.preset)
        if args.command == "prepare":
            return cmd_prepare()
        if args.command == "plan":
            return cmd_plan(args)
        if args.command == "bench":
            from specplay.cli.bench import run_cli

            return run_cli(args, pair=pair)
        return cmd_compare(args, pair=pair)
    except (PresetError, OfflineModelError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def run() -> None:
    """The `specplay` console script."""
    sys.exit(main())
