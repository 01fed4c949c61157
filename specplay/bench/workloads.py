"""Prompt workloads for benchmarks: the shipped files in specplay/bench/data/, a user's own JSONL, or token ids.

Shipped workloads (built by scripts/build_workloads.py, sources in specplay/bench/data/SOURCES.md):
  code           HumanEval: "Complete this Python function:" + signature and docstring
  chat           MT-Bench first-turn questions
  conversations  ShareGPT opening turns
  rewrite        rewrite a quoted paragraph in formal English (the answer copies from the prompt)
  summarize      summarize a quoted answer
  qa             answer a question from a quoted context

A user file is JSON Lines, one object per line: {"prompt": "..."} or {"prompt_token_ids": [1, 2, ...]},
with an optional "id" (string or integer); other keys are kept as metadata. Blank lines are skipped. Names
are what a page offers; paths are for the command line only.

No vLLM, no Gradio here.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path

from specplay.core.events import GenerationRequest
from specplay.core.paths import WORKLOADS_DIR
from specplay.core.reading import UnreadableInput, parse_json, read_text

WORKLOADS = {name: WORKLOADS_DIR / f"{name}.jsonl"
             for name in ("code", "chat", "conversations", "rewrite", "summarize", "qa")}
# Shipped prompts stay under this many characters: with 256 output tokens they fit max_model_len 2048.
MAX_PROMPT_CHARS = 1500
from specplay.core.reading import DATASET_MAX_BYTES as MAX_FILE_BYTES  # noqa: E402 (one cap, defined in reading)
MAX_FILE_LINES = 10_000


class WorkloadError(ValueError):
    """A workload is unknown, missing or malformed; the message names the file and line."""


@dataclass(frozen=True)
class WorkloadPrompt:
    id: str
    prompt: str | None = None  # text, or None when the prompt is token ids
    prompt_token_ids: tuple[int, ...] | None = None
    workload: str = ""
    source: str = ""  # "<package>==<version>" for shipped prompts
    meta: dict = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self):
        if (self.prompt is None) == (self.prompt_token_ids is None):
            raise ValueError("a WorkloadPrompt has either a prompt or prompt_token_ids")

    def request(self, **settings) -> GenerationRequest:
        """This prompt as the engines get it (text or token ids), with the run's settings."""
        return GenerationRequest(prompt=self.prompt or "", prompt_token_ids=self.prompt_token_ids, **settings)


def split_names(text: str) -> list[str]:
    """'code, chat,,rewrite' -> ['code', 'chat', 'rewrite'] (the CLI's --workloads value)."""
    return [part.strip() for part in text.split(",") if part.strip()]


def workload_path(name_or_path: str | Path) -> tuple[str, Path]:
    """(workload name, file) for a shipped workload name or a path to a JSONL file."""
    if isinstance(name_or_path, str) and name_or_path in WORKLOADS:
        return name_or_path, WORKLOADS[name_or_path]
    text = str(name_or_path)
    if isinstance(name_or_path, Path) or "/" in text or text.endswith((".jsonl", ".json")):
        path = Path(text).expanduser()
        return path.stem, path
    raise WorkloadError(f"unknown workload {text!r}: expected one of {', '.join(WORKLOADS)} or a path to a .jsonl file")


def load_workload(name_or_path: str | Path, n: int | None = None) -> list[WorkloadPrompt]:
    """The prompts of a shipped workload (by name) or of a JSONL file (by path), in file order; the first n
    if n is given (all of them when the file has fewer)."""
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise WorkloadError(f"n: expected a positive number of prompts, got {n!r}")
    name, path = workload_path(name_or_path)
    try:
        text = read_text(path, MAX_FILE_BYTES, f"{path}: the workload file")
    except UnreadableInput as exc:
        raise WorkloadError(str(exc)) from None
    lines = text.splitlines()
    if len(lines) > MAX_FILE_LINES:
        raise WorkloadError(f"{path}: {len(lines):,} lines is over the {MAX_FILE_LINES:,}-line limit for a workload file")
    prompts: list[WorkloadPrompt] = []
    seen: dict[str, int] = {}
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        prompt = _parse_line(path, lineno, line, name)
        if prompt.id in seen:
            raise WorkloadError(f"{path}: line {lineno}: id {prompt.id!r} is already used on line {seen[prompt.id]}")
        seen[prompt.id] = lineno
        prompts.append(prompt)
        if n is not None and len(prompts) == n:
            break
    if not prompts:
        raise WorkloadError(f"{path}: no prompts (expected one JSON object per line)")
    return prompts


def _parse_line(path: Path, lineno: int, line: str, workload: str) -> WorkloadPrompt:
    where = f"{path}: line {lineno}"
    try:
        row = parse_json(line, where)
    except UnreadableInput as exc:
        raise WorkloadError(str(exc)) from None
    if not isinstance(row, dict):
        raise WorkloadError(f"{where}: expected a JSON object such as {{\"prompt\": \"...\"}}, got {type(row).__name__}")
    has_text, has_ids = "prompt" in row, "prompt_token_ids" in row
    if has_text == has_ids:
        raise WorkloadError(f"{where}: expected exactly one of \"prompt\" (text) or \"prompt_token_ids\" (a list of integers)")
    text = ids = None
    if has_text:
        text = row["prompt"]
        if not isinstance(text, str) or not text.strip():
            raise WorkloadError(f"{where}: \"prompt\" must be a non-empty string, got {_short(text)}")
    else:
        raw = row["prompt_token_ids"]
        if not (isinstance(raw, list) and raw and all(isinstance(t, int) and not isinstance(t, bool) and t >= 0
                                                      for t in raw)):
            raise WorkloadError(f"{where}: \"prompt_token_ids\" must be a non-empty list of non-negative integers, got {_short(raw)}")
        ids = tuple(raw)
    raw_id = row.get("id", f"{workload}-{lineno}")
    if isinstance(raw_id, bool) or not isinstance(raw_id, (str, int)) or not str(raw_id).strip():
        raise WorkloadError(f"{where}: \"id\" must be a non-empty string or an integer, got {_short(raw_id)}")
    source = row.get("source", "")
    meta = {k: v for k, v in row.items() if k not in ("id", "prompt", "prompt_token_ids", "source")}
    return WorkloadPrompt(id=str(raw_id), prompt=text, prompt_token_ids=ids, workload=workload,
                          source=source if isinstance(source, str) else "", meta=meta)


def _short(value) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# -- token ids for presets without a tokenizer (load_format: dummy) -------------------------------------
def token_id_prompts(n: int, length: int, vocab_size: int = 128256, seed: int = 0) -> list[WorkloadPrompt]:
    """n repeatable prompts of `length` token ids each, for dummy-weight presets (no tokenizer).

    Even-numbered prompts are random ids; odd-numbered ones repeat a short random phrase (8 ids), so n-gram
    prompt lookup finds matches in them. The ids come from [1000, vocab_size - 1000): clear of the low ids
    and of the special tokens at the top of Llama 3's vocabulary. Same arguments, same prompts.
    """
    for label, value, low in (("n", n, 1), ("length", length, 1), ("vocab_size", vocab_size, 4000)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise WorkloadError(f"token_id_prompts: {label} must be an integer of at least {low}, got {value!r}")
    rng = random.Random(f"token-id-prompts:{seed}")  # a string seed is hashed the same on every run
    low, high = 1000, vocab_size - 1000
    prompts = []
    for i in range(n):
        if i % 2 == 0:
            ids = [rng.randrange(low, high) for _ in range(length)]
            kind = "random"
        else:
            phrase = [rng.randrange(low, high) for _ in range(min(8, length))]
            ids = (phrase * (length // len(phrase) + 1))[:length]
            kind = "repeated"
        prompts.append(WorkloadPrompt(id=f"token-ids-{length}-{i}", prompt_token_ids=tuple(ids),
                                      workload="token-ids", source=f"token_id_prompts(seed={seed})",
                                      meta={"kind": kind}))
    return prompts
