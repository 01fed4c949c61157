"""The bench's prompts: {workload: its prompts} from the settings: workloads by name or JSONL path, a named
dataset's categories (bench.datasets) and context-length buckets (bench.context), each a workload of its own.
Everything here is checked before the engines take minutes to start."""

from __future__ import annotations

from specplay.bench import context, datasets
from specplay.bench.workloads import WORKLOADS, WorkloadError, load_workload, token_id_prompts
from specplay.presets.models import target_vocab_size

TOKEN_IDS = "token-ids"  # the workload of presets without a tokenizer (dummy weights)
TOKEN_ID_PROMPT_LENGTH = 128
DEFAULT_TEXT_WORKLOADS = ("code", "chat")


class BenchError(ValueError):
    """The bench's settings can't run as given; the message says which setting and why."""


def named_workloads(settings, preset) -> tuple[str, ...]:
    """The workloads given by name or path, or the default ones when nothing else (a dataset, context
    lengths) was asked for; none by default for presets without a tokenizer (they get token ids)."""
    if settings.workloads or settings.dataset or settings.context_lengths:
        return tuple(settings.workloads)
    return () if preset.prompt_input == "token_ids" else DEFAULT_TEXT_WORKLOADS


def load_prompts(settings, preset) -> dict[str, list]:
    """{workload name: its first n prompts}. Presets without a tokenizer get repeatable token ids."""
    token_ids = preset.prompt_input == "token_ids"
    if token_ids:
        named = [w for w in settings.workloads if w in WORKLOADS]
        if named:
            raise BenchError(f"{preset.name} has no tokenizer (dummy weights): text workloads ({', '.join(named)}) "
                             "can't run; leave --workloads out for token-id prompts, or give a JSONL of prompt_token_ids")
        if settings.dataset:
            raise BenchError(f"--dataset: {preset.name} has no tokenizer (dummy weights): a dataset's text can't run")
    out: dict[str, list] = {}
    try:
        for name_or_path in named_workloads(settings, preset):
            prompts = load_workload(name_or_path, settings.n)
            if token_ids and any(p.prompt_token_ids is None for p in prompts):
                raise BenchError(f"{name_or_path}: {preset.name} has no tokenizer: every line needs prompt_token_ids")
            _add(out, prompts[0].workload, prompts)
        if settings.dataset:
            for name, prompts in datasets.dataset_workloads(settings.dataset, settings.dataset_name, settings.n,
                                                            settings.speed_bench_subsets).items():
                _add(out, name, prompts)
        if settings.context_lengths:
            for name, prompts in _context(settings, preset).items():
                _add(out, name, prompts)
    except WorkloadError as exc:  # the datasets' and contexts' errors too: one line saying which file and why
        raise BenchError(str(exc)) from None
    if not out:  # a preset without a tokenizer and nothing named
        out[TOKEN_IDS] = token_id_prompts(settings.n, TOKEN_ID_PROMPT_LENGTH, target_vocab_size(preset, 128256))
    return out


def _add(out: dict, name: str, prompts: list) -> None:
    if name in out:
        raise BenchError(f"workloads: {name!r} is given twice")
    out[name] = prompts


def _context(settings, preset) -> dict[str, list]:
    max_tokens = settings.max_tokens or preset.default_max_tokens
    context.check_lengths(settings.context_lengths, max_tokens, preset.target.max_model_len, settings.n)
    if preset.prompt_input == "token_ids":
        return context.context_workloads(settings.context_lengths, settings.n, None, target_vocab_size(preset, 128256))
    try:
        tokenizer = context.target_tokenizer(preset)
    except Exception as exc:  # no tokenizer files here (a hub model not downloaded): say so before the engines start
        raise BenchError(f"--context-lengths: can't load {preset.target.model}'s tokenizer to measure prompts in "
                         f"its tokens ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})") from None
    return context.context_workloads(settings.context_lengths, settings.n, tokenizer)
