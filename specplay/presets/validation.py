"""A preset's rules that span fields, on top of the schema: model references, the method's own keys, the
memory split, and `speculative_config` keys checked against the installed vLLM (engine.probes)."""

from __future__ import annotations

import difflib
from pathlib import Path

from specplay.presets import capabilities
from specplay.presets.capabilities import INSTALLED
from specplay.presets.engine_args import UnknownEngineArgument, check_target
from specplay.presets.methods import METHOD_FACTS, V2_UNSUPPORTED
from specplay.presets.models import local_config, ref_problem
from specplay.presets.schema import Preset, PresetError, PresetFile, parse
from specplay.presets.speculation import Speculation

_PARALLEL_TOKEN_KEYS = ("pard_token", "mask_token_id", "ptd_token_id")  # what vLLM's proposer reads


def _fail(source: Path, field: str, expected: str, got=None):
    got_text = "" if got is None else f", got {got!r}"
    raise PresetError(f"{source.name}: field '{field}': expected {expected}{got_text}")


def _check_ref(source: Path, field: str, ref: str) -> None:
    problem = ref_problem(ref)
    if problem:
        _fail(source, field, problem, ref)


class VllmMismatch(PresetError):
    """The preset is well formed, but the installed vLLM lacks a key or method it uses: it loads, and can't
    run here (availability says why), so a shipped preset for a newer vLLM doesn't break the catalog.
    `close_matches`: the installed vLLM's keys an unknown key is close to (then it is a typo)."""

    def __init__(self, message: str, close_matches: tuple[str, ...] = ()):
        super().__init__(message)
        self.close_matches = close_matches


def _check_vllm_keys(source: Path, spec, facts) -> None:
    """Every key must be a SpeculativeConfig field of the vLLM (`facts`; skipped where vLLM isn't
    importable: the engine would say so anyway). Run before the schema, so a misspelt key is named
    rather than the required one it misses."""
    if facts is None or not isinstance(spec, dict):
        return
    for key in spec:
        if key not in facts.fields:
            close = difflib.get_close_matches(str(key), sorted(facts.fields), n=3)
            if close:
                raise VllmMismatch(f"{source.name}: field 'speculative_config.{key}': expected a field of the "
                                   f"installed vLLM's SpeculativeConfig (close matches: {', '.join(close)}), got "
                                   f"unknown key {key!r}", tuple(close))
            raise VllmMismatch(f"needs a vLLM whose speculative_config has {key!r}; vLLM {facts.version} has no "
                               f"such field")


def _check_vllm_method(source: Path, spec, facts) -> None:
    """A method this vLLM lacks loads (a preset for a newer vLLM: availability says why), unless it is a
    typo of one it has: then it is refused now, naming the close match."""
    method = spec.get("method") if isinstance(spec, dict) else None
    if facts is None or not isinstance(method, str) or method in facts.all_methods:
        return
    close = difflib.get_close_matches(method, sorted(facts.all_methods), n=3, cutoff=0.8)
    if close:
        _fail(source, "speculative_config.method", f"a method the installed vLLM has (close matches: "
              f"{', '.join(close)})", method)


def _check_draft(source: Path, spec: Speculation, tp: int) -> None:
    method, facts = spec.method, spec.facts
    if facts.needs_model is None:  # a method the table doesn't know: vLLM checks its own needs at start
        pass
    elif facts.needs_model:
        if spec.model is None:
            _fail(source, "speculative_config.model", f"the draft model for method '{method}'", None)
        _check_ref(source, "speculative_config.model", spec.model)
    elif spec.model is not None:
        why = {"inside": "its MTP layers are inside the target"}.get(facts.draft, "it looks up the prompt")
        _fail(source, "speculative_config.model", f"no model for method '{method}' ({why})", spec.model)
    draft_tp = spec.draft_tensor_parallel_size
    if draft_tp is not None and draft_tp not in (1, tp):
        _fail(source, "speculative_config.draft_tensor_parallel_size",
              f"1 or the target's tensor_parallel_size ({tp})", draft_tp)
    parallel = sorted({f.method for f in METHOD_FACTS.values() if f.parallel})  # PARD's draft_model, DFlash, DSpark
    if spec.parallel_drafting and method not in parallel:
        _fail(source, "speculative_config.parallel_drafting",
              f"true only with method {' or '.join(map(repr, parallel))} (draft_model: PARD)", True)
    if spec.kind == "pard":
        config = local_config(spec.model)  # a hub draft's config is checked by vLLM at start
        if config is not None and not any(isinstance(config.get(k), int) for k in _PARALLEL_TOKEN_KEYS):
            _fail(source, "speculative_config.model", "a PARD draft whose config.json has pard_token "
                  "(the id vLLM puts in the slots it drafts in parallel)", spec.model)


def _check_heterogeneous_vocab(source: Path, spec: Speculation) -> None:
    """vLLM's own rules for a draft of another vocabulary (config/speculative.py): a draft_model that drafts
    greedily; said at load rather than minutes later at engine start."""
    if not spec.use_heterogeneous_vocab:
        return
    if spec.method != "draft_model":
        _fail(source, "speculative_config.use_heterogeneous_vocab", "true only with method 'draft_model'", True)
    if spec.draft_sample_method not in (None, "greedy"):
        _fail(source, "speculative_config.draft_sample_method", "'greedy' or left out (use_heterogeneous_vocab "
              "drafts greedily only)", spec.draft_sample_method)


def _check_speculative_config(source: Path, spec: Speculation, tp: int) -> None:
    """The rules across its keys (the schema typed each one)."""
    _check_heterogeneous_vocab(source, spec)
    if spec.facts.lookup and spec.prompt_lookup[0] > spec.prompt_lookup[1]:  # left out: vLLM's to fill
        _fail(source, "speculative_config.prompt_lookup_min/max", "integers with 1 <= min <= max",
              (spec.prompt_lookup_min, spec.prompt_lookup_max))
    _check_draft(source, spec, tp)
    if spec.synthetic:
        rates, k = spec.synthetic_acceptance_rates, spec.k
        if not (rates is not None and len(rates) == k and all(0 <= r <= 1 for r in rates)
                and all(a >= b for a, b in zip(rates, rates[1:]))):
            _fail(source, "speculative_config.synthetic_acceptance_rates",
                  f"{k} non-increasing probabilities, one per draft position", rates)


def _check_memory(source: Path, f: PresetFile, gpus: int) -> None:
    tp = f.target.tensor_parallel_size
    if gpus < tp:
        _fail(source, "gpus", f"at least tensor_parallel_size ({tp})", gpus)
    total = f.memory.baseline_gpu_memory_utilization + f.memory.speculative_gpu_memory_utilization
    if gpus < 2 * tp and total > 0.92:
        _fail(source, "memory", "GPU fractions that add up to 0.92 or less (both engines share the GPUs; "
              "or set gpus to twice tensor_parallel_size to give each engine its own)", round(total, 3))


def _check_rules(source: Path, f: PresetFile, gpus: int, vllm) -> None:
    if f.device == "any" and not f.pays_off.cpu:
        _fail(source, "pays_off.cpu", "a sentence for the CPU (this preset runs there)", "nothing")
    if f.name != source.stem:
        _fail(source, "name", f"the file name without .yaml ({source.stem!r})", f.name)
    _check_ref(source, "target.model", f.target.model)
    spec = f.speculative_config
    _check_speculative_config(source, spec, f.target.tensor_parallel_size)
    facts = spec.facts
    config = local_config(f.target.model) if facts.draft == "inside" else None
    if config is not None and not (config.get("num_nextn_predict_layers") or config.get("mtp_num_hidden_layers")):
        _fail(source, "target.model", f"a target whose config.json has MTP layers (num_nextn_predict_layers) "
              f"for method '{spec.method}'", f.target.model)
    if facts.gpu_only and f.device != "gpu":
        _fail(source, "device", f"'gpu' (method '{spec.method}' runs on a GPU only)", f.device)
    if f.model_runner == "v2" and facts.v2 == V2_UNSUPPORTED and capabilities.has_v1_runner(vllm) is not False:
        _fail(source, "model_runner", f"'v1' or 'auto' ({facts.kind}: vLLM runs it on V1 only)", f.model_runner)
    _check_memory(source, f, gpus)
    if (f.target.load_format == "dummy") != (f.prompt_input == "token_ids"):
        _fail(source, "prompt_input", "'token_ids' exactly when target.load_format is 'dummy' (no tokenizer)",
              f.prompt_input)
    half = f.target.max_model_len // 2
    if f.default_max_tokens > half:
        _fail(source, "default_max_tokens", f"1 to half of max_model_len ({half})", f.default_max_tokens)


def validate(data, source: Path, facts=INSTALLED) -> Preset:
    """A preset from a YAML file's data; PresetError naming file, field and expectation. `facts`: the vLLM
    to judge it against (engine.vllm_facts.VllmFacts; default the installed one)."""
    facts = capabilities.resolve(facts)
    mismatch = None
    if isinstance(data, dict):
        try:
            _check_vllm_method(source, data.get("speculative_config"), facts)
            _check_vllm_keys(source, data.get("speculative_config"), facts)
        except VllmMismatch as exc:
            if not exc.close_matches:  # else a typo, the author's to fix: refused now
                mismatch = str(exc)
            else:
                raise
        try:
            check_target(source, data.get("target"), facts)
        except UnknownEngineArgument as exc:  # another vLLM's engine argument: loads, can't run here
            mismatch = mismatch or str(exc)
    f = parse(data, source)
    spec = f.speculative_config  # the validated section is the preset's: vLLM's keys kept as written
    gpus = f.gpus if f.gpus is not None else f.target.tensor_parallel_size
    _check_rules(source, f, gpus, facts)
    return Preset(
        name=f.name, description=f.description.strip(), guide_section=f.guide_section,
        notes=(f.notes or "").strip(), device=f.device, gpus=gpus, target=f.target, speculative_config=spec,
        memory=f.memory, prompt_input=f.prompt_input, default_max_tokens=f.default_max_tokens,
        ignore_eos=f.ignore_eos, source=source,
        pays_off=f.pays_off.model_copy(update={k: v.strip() for k, v in f.pays_off.model_dump().items() if v}),
        model_runner=f.model_runner, published=f.published,
        vllm_problem=capabilities.method_problem(spec.method, facts) or mismatch
        or capabilities.vllm_problem(spec, f.model_runner, facts),
    )
