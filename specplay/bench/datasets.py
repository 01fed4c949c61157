"""Named spec-decode datasets for the bench ("is my acceptance normal?"), in the formats `vllm bench serve`
reads (its --dataset-name values):

- spec_bench: SpecBench's question.jsonl, one object a line: {"question_id", "category", "turns": [text, ...]};
  the first turn is the prompt, as vLLM's SpecBench dataset takes it.
- sharegpt: a JSON list of {"conversations": [{"from": "human", "value": text}, {"from": "gpt", ...}, ...]};
  the first turn's value is the prompt, and entries with fewer than two turns are skipped (vLLM's ShareGPTDataset).
- speed_bench: NVIDIA's SPEED-Bench as vLLM's SpeedBench reads it (vllm/benchmarks/datasets/datasets.py,
  class SpeedBench, vLLM 0.32): a directory holding one `<subset>.jsonl` per subset (qualitative, or an
  input-length subset throughput_1k ... throughput_32k), one object a line with a "category" and "messages":
  [{"role": "user", "content": text}, ...]; the first message's content is the prompt. That is the layout
  NeMo-Skills' speed-bench/prepare.py writes (the script vLLM's docstring names); its other keys
  (question_id, source, ...) are kept as metadata.

A dataset runs as one bench workload per category, "<dataset>:<category>" (ShareGPT has none: "<dataset>:all";
SPEED-Bench's: "<dataset>:<subset>/<category>", so an input-length subset's categories are workloads of their
own), so each category gets its own acceptance and speedup. `spec-bench-mini` ships with the package (39
prompts, three in each of SpecBench's 13 categories) and `speed-bench-mini` (SPEED-Bench's 11 qualitative
categories, two prompts each, and throughput_1k's three), written for this project: data/SOURCES.md. Paths
are for the command line only (an operator's option, never a page visitor's).
"""

from __future__ import annotations

from pathlib import Path

from specplay.bench.workloads import MAX_FILE_BYTES, WorkloadError, WorkloadPrompt
from specplay.core.paths import WORKLOADS_DIR
from specplay.core.reading import UnreadableInput, parse_json, read_text

FORMATS = ("spec_bench", "sharegpt", "speed_bench")
SHIPPED = {"spec-bench-mini": (WORKLOADS_DIR / "spec_bench_mini.jsonl", "spec_bench"),
           "speed-bench-mini": (WORKLOADS_DIR / "speed_bench_mini", "speed_bench")}
# vllm bench serve's --speed-bench-dataset-subset choices (its file names), in order of input length
SPEED_BENCH_SUBSETS = ("qualitative", "throughput_1k", "throughput_2k", "throughput_8k", "throughput_16k",
                       "throughput_32k")
SEPARATOR = ":"  # workload "<dataset>:<category>"
SUBSET_SEPARATOR = "/"  # SPEED-Bench's category "<subset>/<category>"
NO_CATEGORY = "all"
MAX_CATEGORIES = 64  # each category is a workload of its own: runs, rows and charts


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
    guessed = "speed_bench" if path.is_dir() else {".jsonl": "spec_bench", ".json": "sharegpt"}.get(path.suffix)
    if fmt is None and guessed is None:
        raise DatasetError(f"{name_or_path}: unknown dataset; expected {', '.join(SHIPPED)}, a .jsonl (spec_bench) "
                           "or .json (sharegpt) file or a directory (speed_bench), or say which with --dataset-name")
    return path.stem, path, fmt or guessed


def _read(path: Path) -> str:
    try:
        return read_text(path, MAX_FILE_BYTES, f"{path}: the dataset file")
    except UnreadableInput as exc:
        raise DatasetError(str(exc)) from None


def _spec_bench(path: Path, label: str, text: str) -> list[WorkloadPrompt]:
    prompts = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}: line {lineno}"
        try:
            row = parse_json(line, where)
        except UnreadableInput as exc:
            raise DatasetError(f"{exc}; spec_bench is one JSON object a line") from None
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
        data = parse_json(text, str(path))
    except UnreadableInput as exc:
        raise DatasetError(f"{exc}; sharegpt is one JSON list") from None
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


def speed_bench_subsets(path: Path, subsets=()) -> tuple[str, ...]:
    """The subsets to read: those asked for (vllm bench serve's --speed-bench-dataset-subset), else every
    `<subset>.jsonl` the directory holds, in order of input length."""
    for subset in subsets:
        if subset not in SPEED_BENCH_SUBSETS:
            raise DatasetError(f"speed_bench subset {subset!r}: expected one of {', '.join(SPEED_BENCH_SUBSETS)}")
    if not path.is_dir():
        raise DatasetError(f"{path}: speed_bench reads a directory of <subset>.jsonl files (vLLM's SpeedBench: "
                           "dataset_path must be a directory), e.g. what NeMo-Skills' speed-bench/prepare.py writes")
    found = tuple(dict.fromkeys(subsets)) or tuple(s for s in SPEED_BENCH_SUBSETS if (path / f"{s}.jsonl").is_file())
    if not found:
        raise DatasetError(f"{path}: no SPEED-Bench subset file ({', '.join(s + '.jsonl' for s in SPEED_BENCH_SUBSETS)})")
    return found


def _speed_bench_row(where: str, line: str) -> tuple[dict, str]:
    try:
        row = parse_json(line, where)
    except UnreadableInput as exc:
        raise DatasetError(f"{exc}; speed_bench is one JSON object a line") from None
    messages = row.get("messages") if isinstance(row, dict) else None
    first = messages[0] if isinstance(messages, list) and messages else None
    if not (isinstance(first, dict) and isinstance(first.get("content"), str) and first["content"].strip()):
        raise DatasetError(f'{where}: expected {{"category", "messages": [{{"role": "user", "content": "..."}}, ...]}} '
                           "(SPEED-Bench as vLLM's SpeedBench reads it)")
    return row, first["content"]


def _speed_bench(path: Path, label: str, subsets=()) -> list[WorkloadPrompt]:
    prompts = []
    for subset in speed_bench_subsets(path, subsets):
        file = path / f"{subset}.jsonl"
        for lineno, line in enumerate(_read(file).splitlines(), start=1):
            if not line.strip():
                continue
            row, text = _speed_bench_row(f"{file}: line {lineno}", line)
            category = str(row.get("category") or NO_CATEGORY)
            qid = row.get("question_id", lineno)
            meta = {k: v for k, v in row.items() if k != "messages"}
            prompts.append(WorkloadPrompt(
                id=f"{label}-{subset}-{qid}", prompt=text, source=file.name,
                workload=f"{label}{SEPARATOR}{subset}{SUBSET_SEPARATOR}{category}",
                meta={**meta, "category": category, "subset": subset, "question_id": qid}))
    return prompts


def load_dataset(name_or_path: str, fmt: str | None = None, subsets=()) -> list[WorkloadPrompt]:
    """Every prompt of the dataset, in file order, each with its workload "<dataset>:<category>"; `subsets`:
    SPEED-Bench's to read (empty: every subset file there)."""
    label, path, fmt = resolve(name_or_path, fmt)
    if fmt == "speed_bench":
        prompts = _speed_bench(path, label, subsets)
    else:
        prompts = (_spec_bench if fmt == "spec_bench" else _sharegpt)(path, label, _read(path))
    if not prompts:
        raise DatasetError(f"{path}: no prompts in {fmt} format")
    return prompts


def dataset_workloads(name_or_path: str, fmt: str | None, n: int, subsets=()) -> dict[str, list[WorkloadPrompt]]:
    """{"<dataset>:<category>": its first n prompts}, categories in the order they first appear."""
    out: dict[str, list[WorkloadPrompt]] = {}
    for prompt in load_dataset(name_or_path, fmt, subsets):
        if prompt.workload not in out and len(out) == MAX_CATEGORIES:
            raise DatasetError(f"{name_or_path}: more than {MAX_CATEGORIES} categories; each is a bench workload "
                               "(SpecBench has 13)")
        group = out.setdefault(prompt.workload, [])
        if len(group) < n:
            group.append(prompt)
    return out


def category_of(workload: str) -> tuple[str, str] | None:
    """(dataset, category) of a dataset workload's name; None for any other workload."""
    dataset, sep, category = workload.rpartition(SEPARATOR)
    return (dataset, category) if sep and dataset and category else None
