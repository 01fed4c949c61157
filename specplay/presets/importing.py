"""A preset from what a vLLM user already runs (`specplay import`): their `vllm serve` lines or `--config`
file, read by the installed vLLM's own parser (engine.vllm_serve_args), become a preset file's data. The
target takes every engine argument the line sets, verbatim (presets.engine_args checks them when the file
loads); what a preset holds elsewhere goes there: the speculative config, each engine's
gpu_memory_utilization, the CPU KV space and model runner from the line's environment. The two lines of a
pair may differ only in what the speculative engine has of its own."""

from __future__ import annotations

from specplay.engine.vllm_serve_args import ServeArgs
from specplay.presets.adhoc import own_device, own_ref
from specplay.presets.engines import DEFAULT_GPU_MEMORY_UTILIZATION, MODEL_RUNNER_ENV, MODEL_RUNNER_VALUES
from specplay.presets.schema import PresetError

SPECULATIVE = "speculative_config"
PER_ENGINE = "gpu_memory_utilization"  # the preset's memory section holds one per engine
# Set by the playground itself on the speculative line (serve-cmd asks for per-request acceptance where the
# installed vLLM has it): not the target's, and not a difference between the two lines.
PLAYGROUND_SETS = ("per_request_spec_decode_metrics",)
OWN_TO_AN_ENGINE = (SPECULATIVE, PER_ENGINE, *PLAYGROUND_SETS)
KV_SPACE_ENV, DEFAULT_KV_SPACE_GIB = "VLLM_CPU_KVCACHE_SPACE", 4
SHARED_GPU_LIMIT = 0.92  # validation's: both engines' fractions on the GPUs they share
ENV_READ = (KV_SPACE_ENV, MODEL_RUNNER_ENV)


def flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def pair_of(lines: list[ServeArgs], option: str) -> tuple[ServeArgs, ServeArgs | None]:
    """(the speculative line, the baseline's or None): the one with --speculative-config is the speculative
    engine's; PresetError naming the option otherwise."""
    with_spec = [line for line in lines if line.engine_args.get(SPECULATIVE)]
    if not with_spec:
        raise PresetError(f"{option}: no --speculative-config: the speculative engine's line sets it "
                          "(give one line with it, or the baseline's and the speculative engine's)")
    if len(with_spec) > 1:
        raise PresetError(f"{option}: both lines set --speculative-config: the baseline's line has none")
    speculative = with_spec[0]
    rest = [line for line in lines if line is not speculative]
    return speculative, rest[0] if rest else None


def _shared(args: dict) -> dict:
    return {k: v for k, v in args.items() if k not in OWN_TO_AN_ENGINE}


def target_difference(speculative: ServeArgs, baseline: ServeArgs) -> str | None:
    """Where two lines' targets differ beyond the speculative engine's own arguments: one sentence, or None."""
    spec, base = _shared(speculative.engine_args), _shared(baseline.engine_args)
    for key in sorted(set(spec) | set(base)):
        if spec.get(key) != base.get(key):
            said = {name: args[key] if key in args else "vLLM's default" for name, args in
                    (("speculative", spec), ("baseline", base))}
            return (f"the two serve lines differ in {flag(key)} (speculative {said['speculative']!r}, baseline "
                    f"{said['baseline']!r}): a preset has one target for both engines; only "
                    f"--speculative-config and --gpu-memory-utilization may differ")
    return None


def _memory(speculative: ServeArgs, baseline: ServeArgs | None, tp: int) -> tuple[dict, int]:
    """(the memory section, gpus): each engine's fraction as its line gives it (vLLM's 0.9 where it
    doesn't); engines that together take more than validation lets two share get GPUs of their own."""
    utils = [(line.engine_args if line else speculative.engine_args).get(PER_ENGINE, DEFAULT_GPU_MEMORY_UTILIZATION)
             for line in (baseline, speculative)]
    space = speculative.env.get(KV_SPACE_ENV, str(DEFAULT_KV_SPACE_GIB))
    memory = {"baseline_gpu_memory_utilization": utils[0], "speculative_gpu_memory_utilization": utils[1],
              "cpu_kvcache_space_gib": int(space) if space.isdigit() else space}
    return memory, tp if sum(utils) <= SHARED_GPU_LIMIT else 2 * tp


def _target(args: dict) -> dict:
    target = {key: value for key, value in args.items() if key not in OWN_TO_AN_ENGINE}
    target["model"] = own_ref(target["model"])
    target.setdefault("dtype", "auto")  # vLLM's default; the preset names it
    if "max_model_len" not in target:
        raise PresetError("--max-model-len: the line gives none; a preset sets the context both engines get "
                          "(vLLM's default, the model's own maximum, is read from the model at start)")
    return target


def left_out(lines: list[ServeArgs]) -> list[str]:
    """What the preset doesn't hold, one phrase each: server options, the playground's own, other env."""
    said = sorted({o for line in lines for o in line.server_options})
    out = [f"{', '.join(said)} (the server's options, not engine arguments: serve-cmd and launch set ports)"] if said else []
    own = sorted({flag(k) for line in lines for k in PLAYGROUND_SETS if k in line.engine_args})
    if own:
        out.append(f"{', '.join(own)} (serve-cmd sets it on the speculative line where vLLM has it)")
    env = sorted({k for line in lines for k in line.env if k not in ENV_READ})
    if env:
        out.append(f"{', '.join(env)} (environment the preset doesn't hold)")
    return out + [note for line in lines for note in line.notes]


def preset_data(name: str, speculative: ServeArgs, baseline: ServeArgs | None, source: str) -> dict:
    """A preset file's data from the pair's lines (`baseline` None: the speculative line without
    --speculative-config is the baseline's); PresetError of one line where they can't make one."""
    if baseline is not None:
        difference = target_difference(speculative, baseline)
        if difference:
            raise PresetError(difference)
    target = _target(speculative.engine_args)
    spec = dict(speculative.engine_args[SPECULATIVE])
    if isinstance(spec.get("model"), str):
        spec["model"] = own_ref(spec["model"])
    memory, gpus = _memory(speculative, baseline, int(target.get("tensor_parallel_size", 1)))
    runner = {v: k for k, v in MODEL_RUNNER_VALUES.items()}.get(speculative.env.get(MODEL_RUNNER_ENV, ""), "auto")
    dummy = target.get("load_format") == "dummy"
    what = f"{spec.get('method', '?')} (k={spec.get('num_speculative_tokens', '?')})"
    data = {
        "name": name, "description": f"{speculative.engine_args['model']} with {what}, imported from {source}",
        "guide_section": "imported",
        "notes": f"Imported by `specplay import` from {source}, not a shipped preset. Each engine's "
                 f"gpu_memory_utilization is its line's; engines that together take more than "
                 f"{SHARED_GPU_LIMIT} get GPUs of their own (gpus: {gpus}).",
        "device": own_device(spec), "gpus": gpus, "target": target, "speculative_config": spec,
        "memory": memory, "model_runner": runner,
        "pays_off": {"cpu": "Not measured: an imported pair.", "gpu": "Not measured: an imported pair."},
    }
    if dummy:  # random weights: prompts as token ids, as the shipped dummy presets
        data.update(prompt_input="token_ids", ignore_eos=True)
    if isinstance(target["max_model_len"], int):
        data["default_max_tokens"] = max(1, min(128, target["max_model_len"] // 2))
    return data
