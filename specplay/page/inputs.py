"""The page's inputs, checked before anything runs: prompt text or token ids, max tokens, temperature,
schedule. Every message is for people and safe to show; nothing typed here becomes a path or a URL.
No Gradio here (the page and its tests both use it)."""

from __future__ import annotations


from specplay.core.events import DEFAULT_SCHEDULE as _DEFAULT, GenerationRequest, Schedule
from specplay.presets.catalog import Preset
from specplay.presets.models import target_vocab_size as _vocab_size  # None for an uncached hub model

MAX_PROMPT_CHARS = 20_000
MAX_TOKEN_IDS = 8_192
TEMPERATURE_MAX = 2.0

EXAMPLES = {
    "code": ("Rename the variable `total` to `running_sum` in this Python function and return the whole "
             "function:\n\ndef average(values):\n    total = 0\n    for value in values:\n        total += value\n"
             "    return total / len(values)\n"),
    "rewrite": ("Rewrite this paragraph in the passive voice, keeping every detail:\n\nThe committee approved "
                "the new budget on Monday. The mayor signed the order the next day, and the city council "
                "published the full text on its website."),
    "chat": "What are three simple tips for staying focused while studying?",
    "creative": "Write a short poem about a lighthouse keeper who talks to the sea.",
}
# Dummy-weight presets take token ids; a repeating pattern gives n-gram style drafts something to match.
TOKEN_EXAMPLES = {
    "code": "1000, 1001, 1002, 1003, 1000, 1001, 1002, 1003",
    "rewrite": ", ".join(str(1200 + i % 16) for i in range(48)),
    "chat": "128000, 9906, 11, 1268, 527, 499, 3432, 30",
    "creative": " ".join(str(5000 + 7 * i) for i in range(24)),
}


EXAMPLE_WORKLOADS = ("qa", "summarize", "rewrite", "code", "chat", "conversations")  # n-gram pays on the first 3
EXAMPLES_PER_WORKLOAD = 2
EXAMPLE_LABEL_CHARS = 70


def _label(kind: str, text: str) -> str:
    flat = " ".join(text.split())
    return f"{kind}: {flat[:EXAMPLE_LABEL_CHARS]}…" if len(flat) > EXAMPLE_LABEL_CHARS else f"{kind}: {flat}"


def workload_examples(per_workload: int = EXAMPLES_PER_WORKLOAD) -> list[tuple[str, str]]:
    """(label, prompt) of the first prompts of each shipped workload (specplay/bench/data), the workloads
    where n-gram lookup pays (the answer quotes the prompt: qa, summarize, rewrite) first."""
    from specplay.bench.workloads import WorkloadError, load_workload

    out = []
    for name in EXAMPLE_WORKLOADS:
        try:
            prompts = load_workload(name, per_workload)
        except WorkloadError:  # a broken data file costs its examples, not the page
            continue
        out += [(_label(name, p.prompt), p.prompt) for p in prompts if p.prompt]
    return out


def token_examples() -> list[tuple[str, str]]:
    return [(_label(kind, ids), ids) for kind, ids in TOKEN_EXAMPLES.items()]


class InputError(ValueError):
    """A bad input from the page; the message is shown as is."""


# -- inputs ------------------------------------------------------------------------------------------------
def max_tokens_limit(preset: Preset) -> int:
    return max(1, preset.target.max_model_len // 2)


def parse_token_ids(text: str, vocab_size: int | None) -> tuple[int, ...]:
    parts = [p for p in text.replace(",", " ").split() if p]
    if not parts:
        raise InputError("The prompt is empty: this preset takes token ids, e.g. 1000, 1001, 1002.")
    if len(parts) > MAX_TOKEN_IDS:
        raise InputError(f"The prompt has {len(parts):,} token ids; the page accepts up to {MAX_TOKEN_IDS:,}.")
    ids = []
    for p in parts:
        # ASCII digits only ("²" and "①" are digits to str.isdigit but not to int()), and no huge numbers
        if not (p.isascii() and p.isdigit()) or len(p) > 9:
            raise InputError(f"This preset has no tokenizer: give the prompt as token ids separated by commas "
                             f"or spaces ({p[:20]!r} is not a token id, a whole number of at most 9 digits).")
        ids.append(int(p))
    if vocab_size and max(ids) >= vocab_size:
        raise InputError(f"Token id {max(ids)} is outside the vocabulary (0 to {vocab_size - 1}).")
    return tuple(ids)


def build_request(preset: Preset, prompt: str, max_tokens, temperature) -> GenerationRequest:
    """Validate the page's inputs for this preset; raises InputError with a message for people."""
    limit = max_tokens_limit(preset)
    try:
        max_tokens_value = float(max_tokens)
    except (TypeError, ValueError):
        raise InputError("Max tokens must be a whole number.") from None
    if not 1 <= max_tokens_value <= limit or max_tokens_value != int(max_tokens_value):  # range first: inf, nan
        raise InputError(f"Max tokens must be a whole number from 1 to {limit} for this preset.")
    try:
        temperature = float(temperature)
    except (TypeError, ValueError):
        raise InputError("Temperature must be a number.") from None
    if not 0.0 <= temperature <= TEMPERATURE_MAX:
        raise InputError(f"Temperature must be between 0 and {TEMPERATURE_MAX:g}.")
    prompt = prompt or ""
    if len(prompt) > MAX_PROMPT_CHARS:
        raise InputError(f"The prompt is {len(prompt):,} characters; the page accepts up to {MAX_PROMPT_CHARS:,}.")
    common = {"max_tokens": int(max_tokens_value), "temperature": temperature, "ignore_eos": preset.ignore_eos}
    if preset.prompt_input == "token_ids":
        return GenerationRequest(prompt_token_ids=parse_token_ids(prompt, _vocab_size(preset)), **common)
    if not prompt.strip():
        raise InputError("The prompt is empty: type something for both engines to answer.")
    return GenerationRequest(prompt=prompt, **common)


# -- schedule: how the two engines share the machine during a run ----------------------------------------
SEQUENTIAL, CONCURRENT = Schedule.SEQUENTIAL.value, Schedule.CONCURRENT.value
SCHEDULES = {SEQUENTIAL: "one after the other, then race", CONCURRENT: "both at once"}
SCHEDULE_INFO = ("One after the other: each engine has the device to itself (clean timings), then both streams "
                 "race on one clock. Both at once: they share the device, and the timings include that.")
# core.events.DEFAULT_SCHEDULE on both devices (the measurements there say why). On 2 cores both workers share
# the core the page doesn't use (core_layout), so there both at once share it, as two engines share one GPU.
DEFAULT_SCHEDULE = {"gpu": _DEFAULT.value, "cpu": _DEFAULT.value}


def check_schedule(schedule) -> str:
    if schedule in SCHEDULES:
        return schedule
    for key, label in SCHEDULES.items():  # the page's radio sends the label
        if schedule == label:
            return key
    raise InputError(f"Schedule must be one of: {', '.join(SCHEDULES)}.")
