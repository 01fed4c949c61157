"""The bench's rows broken down by context length (bench.context's "ctx-<tokens>" workloads) and by a
dataset's category (bench.datasets' "<dataset>:<category>" workloads), with the preset's published mean
acceptance length beside the measured one ("is my acceptance normal?"). Derived from the rows each time,
so a --replot shows them too.
"""

from __future__ import annotations

from specplay.bench.charts import flat_rows
from specplay.bench.context import context_of
from specplay.bench.datasets import category_of
from specplay.bench.outputs import aligned, markdown_table
from specplay.presets.schema import Published

SETTING = ("k", "temperature", "concurrency")
ALL = "all categories"


def _acceptance(rows: list[dict]) -> dict:
    """Acceptance pooled over rows as vLLM pools it: accepted ÷ drafted tokens, 1 + accepted ÷ drafts."""
    drafts = sum(r.get("num_drafts") or 0 for r in rows)
    drafted = sum(r.get("num_draft_tokens") or 0 for r in rows)
    accepted = sum(r.get("num_accepted") or 0 for r in rows)
    return {"acceptance_rate": round(accepted / drafted, 4) if drafted else None,
            "mean_acceptance_length": round(1 + accepted / drafts, 3) if drafts else None}


def _closed_loop(rows) -> list[dict]:
    return [r for r in flat_rows(rows) if r.get("request_rate") is None]


def by_context(rows) -> list[dict]:
    """One line per context bucket and setting: acceptance and speedup, shortest bucket first."""
    out = []
    for r in _closed_loop(rows):
        tokens = context_of(r["workload"])
        if tokens is not None:
            out.append({"context_tokens": tokens, **{key: r[key] for key in SETTING}, "requests": r.get("requests"),
                        **_acceptance([r]), "speedup": r.get("speedup"),
                        "tokens_per_step_ratio": r.get("tokens_per_step_ratio")})
    return sorted(out, key=lambda line: tuple(line[key] for key in SETTING) + (line["context_tokens"],))


def by_category(rows, published: Published | None = None) -> list[dict]:
    """One line per dataset category and setting, then the dataset's pooled line with the published mean
    acceptance length beside the measured one (where the preset cites one)."""
    groups: dict[tuple, list[dict]] = {}
    for r in _closed_loop(rows):
        found = category_of(r["workload"])
        if found is not None:
            groups.setdefault((found[0], *(r[key] for key in SETTING)), []).append(r)
    out = []
    for (dataset, *setting), group in groups.items():
        where = {"dataset": dataset, **dict(zip(SETTING, setting))}
        for r in group:
            out.append({**where, "category": category_of(r["workload"])[1], "requests": r.get("requests"),
                        **_acceptance([r]), "speedup": r.get("speedup")})
        pooled = {**where, "category": ALL, "requests": sum(r.get("requests") or 0 for r in group),
                  **_acceptance(group), "speedup": None}
        if published:
            pooled["published_mean_acceptance_length"] = published.mean_acceptance_length
        out.append(pooled)
    return out


def _fmt(value, digits: int = 2, suffix: str = "") -> str:
    return "—" if value is None else f"{value:.{digits}f}{suffix}"


def context_cells(lines: list[dict]) -> tuple[list[str], list[list[str]]]:
    headers = ["context tokens", "k", "T", "c", "requests", "accept", "MAL", "tok/step ×", "speedup"]
    return headers, [[str(x["context_tokens"]), str(x["k"]), f"{x['temperature']:g}", str(x["concurrency"]),
                      str(x["requests"]), _fmt(x["acceptance_rate"]), _fmt(x["mean_acceptance_length"]),
                      _fmt(x["tokens_per_step_ratio"]), _fmt(x["speedup"], suffix="×")] for x in lines]


def category_cells(lines: list[dict]) -> tuple[list[str], list[list[str]]]:
    published = any("published_mean_acceptance_length" in x for x in lines)
    headers = ["dataset", "category", "k", "T", "c", "requests", "accept", "MAL"] + (["published MAL"] if published else [])
    cells = []
    for x in lines:
        cells.append([x["dataset"], x["category"], str(x["k"]), f"{x['temperature']:g}", str(x["concurrency"]),
                      str(x["requests"]), _fmt(x["acceptance_rate"]), _fmt(x["mean_acceptance_length"])]
                     + ([_fmt(x.get("published_mean_acceptance_length"))] if published else []))
    return headers + ["speedup"], [c + [_fmt(x["speedup"], suffix="×")] for c, x in zip(cells, lines)]


def published_line(published: Published | None) -> str | None:
    if not published:
        return None
    return (f"published mean acceptance length {published.mean_acceptance_length:g} "
            f"({published.conditions}; {published.source})")


def sections(rows, published: Published | None = None, markdown: bool = False) -> list[str]:
    """The breakdown tables as text (terminal, or Markdown for an issue), each under its title; none when
    the bench had no context buckets or dataset."""
    render = markdown_table if markdown else aligned
    out = []
    if lines := by_context(rows):
        out.append("Acceptance and speedup per context length:\n" + render(*context_cells(lines)))
    if lines := by_category(rows, published):
        text = "Acceptance per category:\n" + render(*category_cells(lines))
        note = published_line(published)
        out.append(text + (f"\n{note}" if note else
                           "\nno published acceptance for this preset (presets: `published`) to compare with"))
    return out


def as_json(rows, published: Published | None = None) -> dict:
    return {"by_context": by_context(rows), "by_category": by_category(rows, published),
            "published": published.model_dump() if published is not None else None}
