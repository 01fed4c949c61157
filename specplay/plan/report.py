"""The memory plan as text (`specplay plan`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from specplay.core.units import gib_text as _gib

if TYPE_CHECKING:  # plan.memory imports this module: no import cycle at run time
    from specplay.plan.memory import MemoryPlan


def _params(n: int | None) -> str:
    if n is None:
        return "?"
    return f"{n / 1e9:.2f} B" if n >= 1e9 else f"{n / 1e6:.1f} M"


def format_plan(p: "MemoryPlan") -> str:
    where = p.machine
    if p.device == "gpu" and p.memory.get("gpus"):
        g = p.memory["gpus"]
        where += f", {_gib(g[0]['total'])} GiB per GPU, {_gib(min(d['free'] for d in g))} GiB free"
        where += "; the engines share their GPUs" if p.engines_share_gpus else "; each engine has its own GPUs"
    elif p.device == "cpu" and p.memory.get("ram_available") is not None:
        where += f", {_gib(p.memory['ram_available'])} GiB RAM available"
    lines = [f"memory plan: {p.preset} ({p.method}) on {where}", "", "models:"]
    seen = set()
    for row in p.engines:
        for part in row.parts:
            if (part.kind, part.ref) in seen:
                continue
            seen.add((part.kind, part.ref))
            lines.append(f"  {part.kind:<13} {part.ref}")
            if part.weight_bytes is None:
                lines.append(f"  {'':<13} {part.origin}" + (f"; {part.note}" if part.note else ""))
                continue
            kv = f"{part.kv_bytes_per_token / 1024:.1f} KiB/token" + (f" on each of {part.tp} GPUs" if part.tp > 1 else "")
            tp = f" (TP {part.tp})" if part.tp > 1 else ""
            lines.append(f"  {'':<13} {_params(part.params)} params, {_gib(part.weight_bytes)} GiB{tp}, KV {kv}; "
                         f"config: {part.origin}" + (f"; {part.note}" if part.note else ""))
    if not p.complete:
        return "\n".join(lines + ["", p.reason])
    lines.append("")
    L = f"@{p.max_model_len}"
    if p.device == "gpu" and p.engines[0].reserve_bytes is not None:
        head = ["engine", "GPUs", "reserve GiB", "weights GiB", "overhead GiB", "KV space GiB", "KV/token KiB",
                f"KV {L} GiB", f"seqs {L}", "fits"]
        body = [[r.role, ",".join(map(str, r.gpus)), _gib(r.reserve_bytes), _gib(r.weight_bytes_per_device),
                 _gib(r.overhead_bytes), _gib(r.kv_capacity_bytes), f"{r.kv_bytes_per_token / 1024:.1f}",
                 _gib(r.kv_bytes_at_max_len), str(r.max_sequences), "yes" if r.fits else "NO"] for r in p.engines]
    elif p.device == "cpu" and p.engines[0].ram_bytes is not None:
        head = ["engine", "RAM GiB", "weights GiB", "KV space GiB", "overhead GiB", "KV/token KiB",
                f"KV {L} GiB", f"seqs {L}", "fits"]
        body = [[r.role, _gib(r.ram_bytes), _gib(r.weight_bytes), _gib(r.kv_capacity_bytes), _gib(r.overhead_bytes),
                 f"{r.kv_bytes_per_token / 1024:.1f}", _gib(r.kv_bytes_at_max_len), str(r.max_sequences),
                 "yes" if r.fits else "NO"] for r in p.engines]
    else:
        head = ["engine", "weights GiB", "KV/token KiB", f"KV {L} GiB"]
        body = [[r.role, _gib(r.weight_bytes), f"{r.kv_bytes_per_token / 1024:.1f}", _gib(r.kv_bytes_at_max_len)]
                for r in p.engines]
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    for cells in [head] + body:
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip())
    lines += ["", p.reason]
    lines += [f"estimate: {a}" for a in p.assumptions]
    return "\n".join(lines)
