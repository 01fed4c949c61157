"""The terminal report of one comparison (`python -m playground compare` without --json)."""

from __future__ import annotations

from playground.events import BASELINE, SPECULATIVE


def _fmt(value, spec: str = ".2f", none: str = "-") -> str:
    return none if value is None else format(value, spec)


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
    b, s = result[BASELINE], result[SPECULATIVE]
    load = result.get("load_seconds") or {}
    return [
        ("time to first token (s)", _fmt(b["ttft_s"], ".3f"), _fmt(s["ttft_s"], ".3f")),
        ("decode tokens/s", _fmt(b["tokens_per_s"]), _fmt(s["tokens_per_s"])),
        ("tokens", str(len(b["token_ids"])), str(len(s["token_ids"]))),
        ("steps", str(b["steps"]), str(s["steps"])),
        ("tokens per step", _fmt(len(b["token_ids"]) / b["steps"] if b["steps"] else None),
         _fmt(len(s["token_ids"]) / s["steps"] if s["steps"] else None)),
        ("engine load (s)", _fmt(load.get(BASELINE), ".1f"), _fmt(load.get(SPECULATIVE), ".1f")),
        ("speedup", "", _fmt(result["speedup"], ".2f") + "x" if result["speedup"] else "-"),
        ("acceptance rate", "", _fmt(s["acceptance_rate"], ".1%")),
        ("mean acceptance length", "", _fmt(s["mean_acceptance_length"], ".2f")),
        ("drafts / draft tokens / accepted", "", f"{s['num_drafts']} / {s['num_draft_tokens']} / {s['num_accepted']}"),
        ("accepted per position", "", " ".join(map(str, s["accepted_per_position"])) or "-"),
        ("efficiency (speedup / mean acc. length)", "", _fmt(s["efficiency"], ".2f")),
    ]


def format_report(result: dict) -> str:
    b, s = result[BASELINE], result[SPECULATIVE]
    out = [f"preset: {result.get('preset', '?')}  (prompt {result['prompt_tokens']} tokens, {result['schedule']})", ""]
    out += ["── baseline " + "─" * 60, b["text"] or " ".join(map(str, b["token_ids"])), ""]
    out += ["── speculative " + "─" * 57, s["text"] or " ".join(map(str, s["token_ids"])), ""]
    out += [verdict(result), ""]
    rows = metrics_rows(result)
    w0 = max(len(r[0]) for r in rows)
    out.append(f"{'':{w0}}  {'baseline':>12}  {'speculative':>12}")
    out += [f"{name:{w0}}  {bv:>12}  {sv:>12}" for name, bv, sv in rows]
    return "\n".join(out)
