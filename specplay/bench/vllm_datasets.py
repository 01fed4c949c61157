"""Each bench workload as `vllm bench serve` reads the same prompts: its --dataset-name and that dataset's own
flags (vLLM 0.32's names, vllm/benchmarks/datasets/datasets.py add_dataset_parser), so every run prints a
line that sends what the bench sent:

- a workload file: `--dataset-name custom --dataset-path FILE --custom-output-len N` (its {"prompt": ...} lines);
- a dataset category: `--dataset-name spec_bench|sharegpt|speed_bench --dataset-path PATH`, with the category
  (`--spec-bench-category`, `--speed-bench-category`), SPEED-Bench's subset (`--speed-bench-dataset-subset`)
  and the output length (`--spec-bench-output-len`, `--sharegpt-output-len`, `--speed-bench-output-len`);
  with `--disable-shuffle` (the line's) vLLM takes the category's first prompts in file order, as the bench;
- a context-length bucket: `--dataset-name random --random-input-len L --random-output-len N
  --random-range-ratio 0`: random token ids of the bucket's length, not the bench's texts (acceptance differs;
  the prompt length, what the bucket is about, is the same).

No engines, no vLLM import."""

from __future__ import annotations

from specplay.bench import context, datasets
from specplay.bench.workloads import WorkloadError, workload_path


def file_flags(path, max_tokens: int) -> list[str]:
    return ["--dataset-name", "custom", "--dataset-path", str(path), "--custom-output-len", str(max_tokens)]


def context_flags(length: int, max_tokens: int) -> list[str]:
    return ["--dataset-name", "random", "--random-input-len", str(length), "--random-output-len", str(max_tokens),
            "--random-range-ratio", "0"]


def category_flags(dataset: str, fmt: str | None, category: str, max_tokens: int) -> list[str]:
    """The flags that pick one category of `dataset` (a shipped name or a path) in vLLM's loader for `fmt`."""
    _, path, fmt = datasets.resolve(dataset, fmt)
    flags = ["--dataset-name", fmt, "--dataset-path", str(path)]
    if fmt == "sharegpt":  # no categories in ShareGPT
        return flags + ["--sharegpt-output-len", str(max_tokens)]
    if fmt == "speed_bench":
        subset, _, category = category.partition(datasets.SUBSET_SEPARATOR)
        flags += ["--speed-bench-dataset-subset", subset]
    prefix = fmt.replace("_", "-")  # spec-bench, speed-bench
    if category != datasets.NO_CATEGORY:  # a row without a category: vLLM's filter can't pick it, so none
        flags += [f"--{prefix}-category", category]
    return flags + [f"--{prefix}-output-len", str(max_tokens)]


def workload_flags(settings, max_tokens: int, named=(), generated=()) -> dict[str, list[str]]:
    """{workload: its dataset flags} for the workload files in `named` (names or paths; token-id workloads have
    no file and no line) and the run's dataset categories and context buckets in `generated` (workload names)."""
    out: dict[str, list[str]] = {}
    for name_or_path in named:
        try:
            name, path = workload_path(name_or_path)
        except WorkloadError:
            continue
        out[name] = file_flags(path, max_tokens)
    for workload in generated:
        length, found = context.context_of(workload), datasets.category_of(workload)
        if length is not None and length in settings.context_lengths:
            out[workload] = context_flags(length, max_tokens)
        elif found is not None and settings.dataset:
            out[workload] = category_flags(settings.dataset, settings.dataset_name, found[1], max_tokens)
    return out
