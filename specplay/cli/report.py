"""The terminal report of one RunResult (`python -m specplay compare` without --json): texts, verdict, why,
and the figures as a rich table (plain text when stdout isn't a terminal)."""

from __future__ import annotations

from specplay.cli.base import console
from specplay.core.events import BASELINE, ROLES, SPECULATIVE
from specplay.presets.verifiers import verifier_named
from specplay.run import metrics
from specplay.run.steps import acceptance_histogram


def verdict(result) -> str:
    if result.cancelled:
        return "CANCELLED"
    if result.error:
        return f"ERROR: {result.error}"
    if result.identical:
        return f"IDENTICAL: both engines produced the same {result.baseline.tokens} tokens"
    lines = [f"DIVERGED at token {result.first_divergence}"]
    ctx = result.divergence_context
    if ctx:
        lines += [f"  common:      ...{ctx['common']!r}", f"  baseline:    {ctx[BASELINE]!r}",
                  f"  speculative: {ctx[SPECULATIVE]!r}"]
    for role, top in (result.divergence_candidates or {}).items():
        if top:  # the top candidates there, so a near-tie reads as one
            lines.append(f"  {role + ' top:':<17}" + ", ".join(f"{text!r} {lp:.3f}" for text, lp in top))
    why = verifier_named(result.verifier).why_different if result.verifier is not None else None
    if why:  # a lossy or synthetic verifier: the outputs differ by design
        lines.append("  " + why)
    return "\n".join(lines)


def metrics_rows(result) -> list[tuple[str, str, str]]:
    load = result.load_seconds or {}
    rows = metrics.table_rows(result)
    rows += metrics.interval_rows(result)
    rows.append(("engine load (s)", *(f"{load[r]:.1f}" if load.get(r) is not None else "—" for r in ROLES)))
    if result.engines:
        rows.append(("async scheduling", *(_on_off(result.async_scheduling(r)) for r in ROLES)))
        if any(result.model_runner(r) for r in ROLES):
            rows.append(("model runner", *(result.model_runner(r) or "—" for r in ROLES)))
    rows.append(("steps counted from", *(result.side(r).steps_source for r in ROLES)))
    c = result.counters
    rows.append(("drafts / draft tokens / accepted", "",
                 f"{c.num_drafts} / {c.num_draft_tokens} / {c.num_accepted_tokens}"))
    rows.append(("accepted per position", "", " ".join(map(str, c.accepted_per_position)) or "—"))
    rows.append(("steps by accepted count", "", " ".join(map(str, acceptance_histogram(c))) or "—"))
    if result.step_detail is not None and result.step_detail.steps:
        rows.append(("steps whose drafts are known", "", f"{result.step_detail.known} of {len(result.step_detail.steps)}"))
    if result.acceptance_source:
        rows.append(("acceptance counted from", "", result.acceptance_source))
    return rows


def _on_off(flag) -> str:
    return "—" if flag is None else "on" if flag else "off"


def _text(side) -> str:
    return side.text or " ".join(map(str, side.token_ids))


def print_report(result, stream=None) -> None:
    from rich.markup import escape
    from rich.rule import Rule
    from rich.table import Table

    out = console(stream)
    out.print(escape(f"preset: {result.preset or '?'}  (prompt {result.prompt_tokens} tokens, {result.schedule})"))
    for role in ROLES:  # the outputs and the sentences as they are: soft wrap (the terminal's), no markup
        out.print(Rule(role, align="left", characters="─"))
        out.print(_text(result.side(role)), markup=False, soft_wrap=True)
    out.print()
    out.print(verdict(result), markup=False, soft_wrap=True)
    if result.explanation:
        out.print("\nwhy: " + result.explanation, markup=False, soft_wrap=True)
    table = Table(box=None, pad_edge=False)
    table.add_column("")
    table.add_column("baseline", justify="right")
    table.add_column("speculative", justify="right")
    for name, b, s in metrics_rows(result):
        table.add_row(escape(name), escape(b), escape(s))
    out.print()
    out.print(table)
