"""A bench result into what people read and keep: the table (terminal and page), CSV, JSON, and the charts
as HTML and PNG. Values come formatted by `playground.metrics`; only the compact column headers live here.

PNG: plotly's `write_images` through kaleido (which drives a Chrome; the system chromium is used when
there is one), else the HTML screenshotted by headless chromium, else none (the HTML is still written).
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
from pathlib import Path

from specplay.run import metrics
from specplay.bench.report import SETTING_KEYS, BenchReport, accepted_shares, shares_exact
from specplay.bench.charts import HEIGHT, flat_rows
from specplay.bench.vllm_format import write_summary

# Compact headers for the table; what each figure means and how it prints is metrics.BENCH_FIGURES'.
TABLE_COLUMNS = {
    "workload": "workload", "temperature": "T", "concurrency": "c", "request_rate": "req/s", "k": "k",
    "acceptance": "a",
    "speedup": "speedup", "speedup_min": "runs min", "speedup_max": "runs max",  # the last two: --num-runs > 1
    "tokens_per_step_ratio": "tok/step ×", "step_cost_ratio": "step cost ×",
    "acceptance_rate": "accept", "mean_acceptance_length": "MAL", "predicted_speedup": "predicted",
    "predicted_speedup_measured": "pred. (times)", "draft_pass_cost": "draft/pass",
    "tokens_per_s_baseline": "tok/s b", "tokens_per_s_speculative": "tok/s s",
    "throughput_baseline": "batch tok/s b", "throughput_speculative": "batch tok/s s",
    "latency_p50_s_baseline": "p50 s b", "latency_p50_s_speculative": "p50 s s",
    "latency_p90_s_baseline": "p90 s b", "latency_p90_s_speculative": "p90 s s",
    "ttft_p50_s_baseline": "TTFT ms b", "ttft_p50_s_speculative": "TTFT ms s",
    "tpot_p50_s_baseline": "TPOT ms b", "tpot_p50_s_speculative": "TPOT ms s", "identical": "identical",
}
PNG_WIDTH = 900
CHROMIUMS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def table(rows: list) -> tuple[list[str], list[list[str]]]:
    """(headers, cells) with every figure formatted as metrics defines it; columns no row fills are left out
    (no acceptance column without synthetic acceptance, no identity column above T=0 only)."""
    rows = flat_rows(rows)
    figures = {column: figure for column, figure, _ in metrics.bench_columns()}
    figures.update(speedup_min=figures["speedup"], speedup_max=figures["speedup"])  # the runs' spread, as speedup
    columns = [c for c in TABLE_COLUMNS
               if any(r.get(c) is not None for r in rows) or (not rows and c in SETTING_KEYS[:4])]
    cells = []
    for row in rows:
        line = []
        for c in columns:
            raw = row.get(c)
            if c in figures:
                text = metrics.fmt(raw, figures[c])
                line.append(f"{text}/{row.get('requests', '?')}" if c == "identical" and raw is not None else text)
            else:
                line.append("—" if raw is None else f"{raw:g}" if isinstance(raw, float) else str(raw))
        cells.append(line)
    return [TABLE_COLUMNS[c] for c in columns], cells


def markdown_table(headers: list[str], cells: list[list[str]]) -> str:
    """A table as GitHub Markdown, for people to paste into an issue or a PR ("|" in a cell escaped)."""
    cell = lambda v: str(v).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    lines = ["| " + " | ".join(cell(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in cells]
    return "\n".join(lines)


def text_table(rows: list) -> str:
    return aligned(*table(rows))


def aligned(headers: list[str], cells: list[list[str]]) -> str:
    """A table as right-aligned columns for a terminal."""
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(headers, widths))]
    lines += ["  ".join(v.rjust(w) for v, w in zip(r, widths)) for r in cells]
    return "\n".join(lines)


# lists and nested figures: bench.json's (and vllm/summary.json's); the CSV keeps the flat columns
NOT_IN_CSV = ("accepted_per_position", "drafted_per_position", "serving", "runs")


def csv_rows(rows: list) -> tuple[list[str], list[dict]]:
    """Flat rows for the CSV: the accepted share per draft position spread over acceptance_pos_1..k, and what
    it is a share of in acceptance_pos_of (report.accepted_shares; the
    serving figures in vllm bench serve's keys are in bench.json and vllm/summary.json, not here)."""
    rows = flat_rows(rows)
    positions = max((len(r.get("accepted_per_position") or []) for r in rows), default=0)
    flat = []
    for row in rows:
        out = {k: v for k, v in row.items() if k not in NOT_IN_CSV}
        shares = accepted_shares(row)
        out.update({f"acceptance_pos_{i + 1}": round(shares[i], 4) if i < len(shares) and shares[i] is not None
                    else None for i in range(positions)})
        if positions:
            out["acceptance_pos_of"] = "drafted at the position" if shares_exact(row) else "all drafts"
        flat.append(out)
    fields = list(dict.fromkeys(k for r in flat for k in r))
    return fields, flat


def write_results(out_dir: Path, report: BenchReport, figures: dict, png: bool = True, log=None) -> dict:
    """bench.csv, bench.json (the report, `BenchReport.save`), vllm/summary.json (vllm bench serve's format,
    bench.vllm_format) and each chart as <name>.html (+ .png); returns what was written, by kind."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written: dict = {"csv": str(out_dir / "bench.csv"), "json": str(out_dir / "bench.json"), "html": [], "png": []}
    fields, flat = csv_rows(report.rows)
    with open(written["csv"], "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(flat)
    summary = write_summary(out_dir, report)
    if summary is not None:
        written["vllm_summary"] = str(summary)
    for stem, fig in figures.items():
        path = out_dir / f"{stem}.html"
        # plotly.min.js once next to the charts (not 4 MB inside each), so they open offline
        fig.write_html(path, include_plotlyjs="directory", full_html=True, default_width=f"{PNG_WIDTH}px",
                       default_height=f"{HEIGHT}px")
        written["html"].append(str(path))
    if png and figures:
        written["png"], written["png_method"], error = write_pngs(out_dir, figures)
        if error:
            written["png_error"] = error
            if log:
                log(f"charts: no PNG ({error}); the HTML charts are written")
    report.save(written["json"], files=_relative(written, out_dir))  # last, so it lists the charts it comes with
    return written


def merge_results(reports: list[BenchReport]) -> BenchReport:
    """Bench reports of one preset, measured in separate runs (a sweep split to fit a time limit), as one:
    rows in order, a later run's row replacing an earlier one for the same setting; each row's speedup
    still compares engines measured in its own run. The advice is worked out again over all rows."""
    from specplay.bench.advice import advise
    from specplay.bench.latency import rate_sentences
    from specplay.bench.schedule import dynamic_k_report

    if len({r.preset for r in reports}) > 1:
        raise ValueError("these results are of different presets: " + ", ".join(sorted(r.preset for r in reports)))
    by_setting = {row.setting: row for report in reports for row in report.rows}
    rows = tuple(by_setting.values())
    first, settings = reports[0], [r.settings for r in reports]
    merged_settings = {**settings[0], **{
        key: sorted({v for s in settings for v in s.get(key) or []}, key=str)
        for key in ("workloads", "concurrency", "k", "temperature", "acceptance", "request_rate")}}
    engines = {k: v for r in reports for k, v in r.environment.engines.items()}
    stamps = [s for r in reports for s in (r.started_utc, r.finished_utc) if s]
    spec = next((e.get("speculative", {}) for e in engines.values()), {})
    return first.model_copy(update=dict(
        rows=rows, settings=merged_settings, environment=first.environment.model_copy(update={"engines": engines}),
        started_utc=min(stamps) if stamps else None, finished_utc=max(stamps) if stamps else None,
        cancelled=any(r.cancelled for r in reports), command=tuple(c for r in reports for c in r.command),
        advice=tuple(advise(list(rows), first.loaded_k, first.kind or first.method, spec.get("async_scheduling"))),
        rate_advice=tuple(rate_sentences(list(rows))), dynamic_k=dynamic_k_report(rows, first.kind or first.method)))


def _relative(written: dict, out_dir: Path) -> dict:
    rel = lambda p: os.path.relpath(p, out_dir)  # noqa: E731
    return {k: ([rel(p) for p in v] if isinstance(v, list) else rel(v) if k in ("csv", "json", "vllm_summary") else v)
            for k, v in written.items()}


def find_chromium() -> str | None:
    return next((path for name in CHROMIUMS if (path := shutil.which(name))), None)


def write_pngs(out_dir: Path, figures: dict) -> tuple[list[str], str | None, str | None]:
    """(PNG paths, "kaleido" | "chromium" | None, why not when none)."""
    paths = [out_dir / f"{stem}.png" for stem in figures]
    errors = []
    try:
        import kaleido  # noqa: F401
        import plotly.io as pio

        chromium = find_chromium()
        if chromium:  # kaleido looks for a Chrome of its own first; Debian's chromium does the job
            os.environ.setdefault("BROWSER_PATH", chromium)
        # one browser session for all the charts (each start costs seconds)
        pio.write_images(list(figures.values()), paths, width=PNG_WIDTH, height=HEIGHT, scale=1.5)
        return [str(p) for p in paths], "kaleido", None
    except Exception as exc:
        errors.append(f"kaleido: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    chromium = find_chromium()
    if chromium is None:
        return [], None, "; ".join(errors + ["no chromium on PATH"])
    try:
        for stem, path in zip(figures, paths):
            screenshot(chromium, out_dir / f"{stem}.html", path)
        return [str(p) for p in paths], "chromium", None
    except Exception as exc:
        return [], None, "; ".join(errors + [f"chromium: {exc}"])


def screenshot(chromium: str, html: Path, png: Path, timeout: float = 60) -> None:
    """Headless chromium renders the chart's HTML (plotly.js from the same folder) into a PNG."""
    png.unlink(missing_ok=True)
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--window-size={PNG_WIDTH + 20},{HEIGHT + 20}", "--virtual-time-budget=5000",
                    f"--screenshot={png}", html.resolve().as_uri()],
                   capture_output=True, timeout=timeout, check=False)
    if not png.is_file() or png.stat().st_size == 0:
        raise RuntimeError(f"chromium wrote no screenshot of {html.name}")
