"""Named spec-decode datasets for the bench ("is my acceptance normal?"), in the formats `vllm bench serve`
reads (its --dataset-name values):

- spec_bench: SpecBench's question.jsonl, one object a line: {"question_id", "category", "turns": [text, ...]};
  the first turn is the prompt, as vLLM's SpecBench dataset takes it.
- sharegpt: a JSON list of {"conversations": [{"from": "human", "value": text}, {"from": "gpt", ...}, ...]};
  the first turn's value is the prompt, and entries with fewer than two turns are skipped (vLLM's ShareGPTDataset).

A dataset runs as one bench workload per category, "<dataset>:<category>" (ShareGPT has none: "<dataset>:all"),
so each category gets its own acceptance and speedup. `spec-bench-mini` ships with the package (39 prompts,
three in each of SpecBench's 13 categories, written for this project: data/SOURCES.md). Paths are for the
command line only (an operator's option, never a page visitor's).
"""

from __future__ import annotations

import json
from pathlib import Path

from specplay.bench.workloads import MAX_FILE_BYTES, WorkloadError, WorkloadPrompt
from specplay.core.paths import WORKLOADS_DIR

FORMATS = ("spec_bench", "sharegpt")
SHIPPED = {"spec-bench-mini": (WORKLOADS_DIR / "spec_bench_mini.jsonl", "spec_bench")}
SEPARATOR = ":"  # workload "<dataset>:<category>"
NO_CATEGORY = "all"


class DatasetError(WorkloadError):
    """A dataset is unknown, unreadable or not in its format; one line saying which file, where and why."""


def resolve(name_or_path: str, fmt: str | None = None) -> tuple[str, Path, str]:
    """(label, file, format) of a shipped dataset name or a path; the format from --dataset-name, else from
    the file's extension (.jsonl: spec_bench, .json: sharegpt)."""
    if fmt is not None and fmt not in FORMATS:
        raise DatasetError(f"dataset format {fmt!r}: expected one of {', '.join(FORMATS)} (vllm bench serve's names)")
    if name_or_path in SHIPPED:
        path, shipped_fmt = SHIPPED[name_or_path]
        return name_or_path, path, fmt or shipped_fmt
    path = Path(name_or_path).expanduser()
    guessed = {".jsonl": "spec_bench", ".json": "sharegpt"}.get(path.suffix)
    if fmt is None and guessed is None:
        raise DatasetError(f"{name_or_path}: unknown dataset; expected {', '.join(SHIPPED)} or a .jsonl (spec_bench) "
                           "or .json (sharegpt) file, or say which with --dataset-name")
    return path.stem, path, fmt or guessed


def _read(path: Path) -> str:
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise DatasetError(f"{path}: over the {MAX_FILE_BYTES // 2**20} MiB limit for a dataset file")
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read the dataset file ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not UTF-8 text (byte {exc.start})") from None


def _spec_bench(path: Path, label: str, text: str) -> list[WorkloadPrompt]:
    prompts = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}: line {lineno}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{where}: not valid JSON ({exc.msg}); spec_bench is one JSON object a line") from None
        turns = row.get("turns") if isinstance(row, dict) else None
        if not (isinstance(turns, list) and turns and isinstance(turns[0], str) and turns[0].strip()):
            raise DatasetError(f'{where}: expected {{"question_id", "category", "turns": ["first turn", ...]}} '
                               "(SpecBench's question.jsonl)")
        category = str(row.get("category") or NO_CATEGORY)
        qid = row.get("question_id", lineno)
        prompts.append(WorkloadPrompt(id=f"{label}-{qid}", prompt=turns[0], workload=f"{label}{SEPARATOR}{category}",
                                      source=str(path.name), meta={"category": category, "question_id": qid}))
    return prompts


def _sharegpt(path: Path, label: str, text: str) -> list[WorkloadPrompt]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno}); sharegpt is one JSON list") from None
    if not isinstance(data, list):
        raise DatasetError(f'{path}: expected a JSON list of {{"conversations": [{{"from": "human", "value": ...}}, ...]}}')
    prompts = []
    for i, entry in enumerate(data):
        turns = entry.get("conversations") if isinstance(entry, dict) else None
        if not isinstance(turns, list):
            raise DatasetError(f'{path}: item {i}: expected {{"conversations": [{{"from": "human", "value": ...}}, ...]}}')
        if len(turns) < 2:  # as vLLM's ShareGPTDataset: a prompt and its answer
            continue
        first = turns[0]
        if not (isinstance(first, dict) and isinstance(first.get("value"), str) and first["value"].strip()):
            raise DatasetError(f'{path}: item {i}: the first turn needs a non-empty "value"')
        prompts.append(WorkloadPrompt(id=str(entry.get("id", f"{label}-{i}")), prompt=first["value"],
                                      workload=f"{label}{SEPARATOR}{NO_CATEGORY}", source=str(path.name)))
    return prompts


def load_dataset(name_or_path: str, fmt: str | None = None) -> list[WorkloadPrompt]:
    """Every prompt of the dataset, in file order, each with its workload "<dataset>:<category>"."""
    label, path, fmt = resolve(name_or_path, fmt)
    prompts = (_spec_bench if fmt == "spec_bench" else _sharegpt)(path, label, _read(path))
    if not prompts:
        raise DatasetError(f"{path}: no prompts in {fmt} format")
    return prompts


def dataset_workloads(name_or_path: str, fmt: str | None, n: int) -> dict[str, list[WorkloadPrompt]]:
    """{"<dataset>:<category>": its first n prompts}, categories in the order they first appear."""
    out: dict[str, list[WorkloadPrompt]] = {}
    for prompt in load_dataset(name_or_path, fmt):
        group = out.setdefault(prompt.workload, [])
        if len(group) < n:
            group.append(prompt)
    return out


def category_of(workload: str) -> tuple[str, str] | None:
    """(dataset, category) of a dataset workload's name; None for any other workload."""
    dataset, sep, category = workload.rpartition(SEPARATOR)
    return (dataset, category) if sep and dataset and category else None
