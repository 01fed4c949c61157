"""The terminal report of one comparison (`python -m specplay compare` without --json)."""

from __future__ import annotations

from specplay.run import metrics
from specplay.core.events import BASELINE, SPECULATIVE


def verdict(result: dict) -> str:
    if result.get("cancelled"):
        return "CANCELLED"
    if result.get("error"):
        return f"ERROR: {result['error']}"
    if result["identical"]:
        return f"IDENTICAL: both engines produced the same {len(result[BASELINE]['token_ids'])} tokens"
    index = result["first_divergence"]
    lines = [f"DIVERGED at token {index}"]
    ctx = result.get("divergence_context")
    if ctx:
        lines += [f"  common:      ...{ctx['common']!r}", f"  baseline:    {ctx[BASELINE]!r}",
                  f"  speculative: {ctx[SPECULATIVE]!r}"]
    return "\n".join(lines)


def metrics_rows(result: dict) -> list[tuple[str, str, str]]:
    s = result[SPECULATIVE]
    load = result.get("load_seconds") or {}
    engines = result.get("engines") or {}
    rows = metrics.table_rows(result)
    rows.append(("engine load (s)", *(f"{load[r]:.1f}" if load.get(r) is not None else "—" for r in (BASELINE, SPECULATIVE))))
    if engines:
        rows.append(("async scheduling", *(_on_off(engines.get(r, {}).get("async_scheduling"))
                                           for r in (BASELINE, SPECULATIVE))))
        if any((engines.get(r) or {}).get("model_runner") for r in (BASELINE, SPECULATIVE)):
            rows.append(("model runner", *((engines.get(r) or {}).get("model_runner") or "—"
                                           for r in (BASELINE, SPECULATIVE))))
    rows.append(("drafts / draft tokens / accepted", "", f"{s['num_drafts']} / {s['num_draft_tokens']} / {s['num_accepted']}"))
    rows.append(("accepted per position", "", " ".join(map(str, s["accepted_per_position"])) or "—"))
    if s.get("acceptance_source"):
        rows.append(("acceptance counted from", "", s["acceptance_source"]))
    return rows


def _on_off(flag) -> str:
    return "—" if flag is None else "on" if flag else "off"


def format_report(result: dict) -> str:
    b, s = result[BASELINE], result[SPECULATIVE]
    out = [f"preset: {result.get('preset', '?')}  (prompt {result['prompt_tokens']} tokens, {result['schedule']})", ""]
    out += ["── baseline " + "─" * 60, b["text"] or " ".join(map(str, b["token_ids"])), ""]
    out += ["── speculative " + "─" * 57, s["text"] or " ".join(map(str, s["token_ids"])), ""]
    out += [verdict(result), ""]
    if result.get("explanation"):
        out += ["why: " + result["explanation"], ""]
    rows = metrics_rows(result)
    w0 = max(len(r[0]) for r in rows)
    out.append(f"{'':{w0}}  {'baseline':>12}  {'speculative':>12}")
    out += [f"{name:{w0}}  {bv:>12}  {sv:>12}" for name, bv, sv in rows]
    return "\n".join(out)
