"""The operator's own pair on the command line, for every command and the page: a preset file anywhere
(`--preset-file PATH`, validated as the shipped ones are), or an ad-hoc pair (`--model M
--speculative-config '{...}'`, as `vllm serve` takes them) for one who doesn't want to write a YAML file:
made into a preset named `adhoc` and validated exactly like one (the schema, the rules, the installed
vLLM's SpeculativeConfig fields). `named_preset` resolves what a command line names."""

from __future__ import annotations

from pathlib import Path

from specplay.core.reading import OPTION_MAX_BYTES, UnreadableInput, parse_json
from specplay.presets.methods import facts_for
from specplay.presets.models import LOCAL
from specplay.presets.schema import Preset, PresetError
from specplay.presets.validation import validate

ADHOC = "adhoc"


def own_ref(model: str) -> str:
    """A model as the user names it to vLLM (a hub id, or a local folder) as a preset names it: a folder
    becomes `path:` + its absolute path."""
    return f"{LOCAL}{Path(model).resolve()}" if Path(model).is_dir() else model


def own_device(speculative_config: dict) -> str:
    """An own pair's device: 'gpu' for a method that runs on a GPU only, else 'any' (the gate then says
    whether this machine can hold it)."""
    return "gpu" if facts_for(speculative_config).gpu_only else "any"


def adhoc_preset(model: str, speculative_config: str | dict, dtype: str = "auto", max_model_len: int = 4096,
                 memory: tuple[float, float] = (0.4, 0.45), cpu_kvcache_space_gib: int = 4,
                 load_format: str = "auto") -> Preset:
    """A preset for `model` with `speculative_config` (JSON text or a dict); PresetError naming the option."""
    if isinstance(speculative_config, str):
        if len(speculative_config) > OPTION_MAX_BYTES:
            raise PresetError(f"--speculative-config: over {OPTION_MAX_BYTES // 1024} KiB; vllm serve's is one short object")
        try:
            speculative_config = parse_json(speculative_config, "--speculative-config")
        except UnreadableInput as exc:
            raise PresetError(str(exc)) from None
    if not isinstance(speculative_config, dict):
        raise PresetError("--speculative-config: expected a JSON object, as vllm serve takes it")
    ref = own_ref(model)
    spec = dict(speculative_config)
    if isinstance(spec.get("model"), str):
        spec["model"] = own_ref(spec["model"])
    dummy = load_format == "dummy"
    data = {
        "name": ADHOC, "description": f"{model} with {spec.get('method', '?')} (k={spec.get('num_speculative_tokens', '?')}), "
                                      "from the command line",
        "guide_section": "ad hoc", "device": own_device(spec), "gpus": 1,
        "notes": "Given on the command line (--model, --speculative-config), not a shipped preset.",
        "pays_off": {"cpu": "Not measured: an ad-hoc pair.", "gpu": "Not measured: an ad-hoc pair."},
        "target": {"model": ref, "dtype": dtype, "max_model_len": max_model_len,
                   **({"load_format": "dummy"} if dummy else {})},
        "speculative_config": spec,
        "memory": {"baseline_gpu_memory_utilization": memory[0], "speculative_gpu_memory_utilization": memory[1],
                   "cpu_kvcache_space_gib": cpu_kvcache_space_gib},
        "prompt_input": "token_ids" if dummy else "text", "ignore_eos": dummy,
        "default_max_tokens": min(128, max_model_len // 2),
    }
    try:
        return validate(data, Path(f"{ADHOC}.yaml"))
    except PresetError as exc:  # name the options, not a file nobody wrote
        raise type(exc)(str(exc).replace(f"{ADHOC}.yaml: ", "the ad-hoc pair (--model, --speculative-config): ")) from None


def add_arguments(parser, option_help: str = "") -> None:
    """The own pair's options, for every command that runs or describes a pair and the page (operator only:
    a path typed on the page never reaches them)."""
    group = parser.add_argument_group("your own pair instead of a shipped preset: a preset file, or the pair as "
                                      "vllm serve takes them" + option_help)
    group.add_argument("--preset-file", metavar="PATH",
                       help="a preset YAML file anywhere, written as the shipped ones are (its name: the file's)")
    group.add_argument("--model", metavar="M", help="the target: a hub id or a local folder")
    group.add_argument("--speculative-config", metavar="JSON", help="vLLM's speculative_config, e.g. "
                       '\'{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2}\'')
    group.add_argument("--dtype", default="auto", help="default: auto")
    group.add_argument("--max-model-len", type=int, default=4096, help="default: 4096")
    group.add_argument("--load-format", choices=["auto", "dummy"], default="auto",
                       help="dummy: random weights (prompts as token ids)")
    group.add_argument("--memory-split", default="0.4,0.45", metavar="B,S",
                       help="the engines' gpu_memory_utilization, baseline,speculative (default: 0.4,0.45)")


def from_arguments(args) -> Preset | None:
    """The ad-hoc preset the options describe, or None without --model."""
    if not getattr(args, "model", None):
        if getattr(args, "speculative_config", None):
            raise PresetError("--speculative-config goes with --model (the target)")
        return None
    if not args.speculative_config:
        raise PresetError("--model goes with --speculative-config (what the speculative engine drafts with)")
    try:
        split = tuple(float(x) for x in str(args.memory_split).split(","))
    except ValueError:
        split = ()
    if len(split) != 2:
        raise PresetError("--memory-split: expected two fractions, baseline,speculative (e.g. 0.4,0.45)")
    return adhoc_preset(args.model, args.speculative_config, dtype=args.dtype, max_model_len=args.max_model_len,
                        memory=split, load_format=args.load_format)


def named_preset(args, default=None) -> Preset:
    """The preset a command line names: --preset-file, the ad-hoc pair, --preset, else `default` (a name, or a
    function giving one); PresetError when it names none or more than one."""
    from specplay.presets.catalog import get_preset, load_user_file

    given = [flag for flag, key in (("--preset", "preset"), ("--preset-file", "preset_file"), ("--model", "model"))
             if getattr(args, key, None)]
    if len(given) > 1:
        raise PresetError(f"{' and '.join(given)}: give one of them, the pair to run")
    if getattr(args, "preset_file", None):
        return load_user_file(args.preset_file)
    adhoc = from_arguments(args)
    if adhoc is not None:
        return adhoc
    name = getattr(args, "preset", None) or (default() if callable(default) else default)
    if not name:
        raise PresetError("name the pair: --preset NAME, --preset-file PATH, or --model M with --speculative-config JSON")
    return get_preset(name)


def same_pair_arguments(args, preset: Preset) -> list[str]:
    """The options that name `preset` again for another process (launch's page): the file, the ad-hoc pair's
    own options, or the preset's name."""
    if getattr(args, "preset_file", None):
        return ["--preset-file", str(preset.source)]
    if preset.name == ADHOC and getattr(args, "model", None):
        return ["--model", args.model, "--speculative-config", args.speculative_config, "--dtype", args.dtype,
                "--max-model-len", str(args.max_model_len), "--load-format", args.load_format,
                "--memory-split", str(args.memory_split)]
    return ["--preset", preset.name]
