"""Order statistics, defined once. Two methods, named at each call, because the uses differ: a bench's few
requests per batch want the interpolated value (numpy's default: smooth as n grows), a load test's many
visitors want a value one of them actually saw (nearest rank)."""

from __future__ import annotations

import math

LINEAR, NEAREST_RANK = "linear", "nearest-rank"


def percentile(values, q: float, method: str = LINEAR) -> float | None:
    """The q-quantile (0 <= q <= 1) of `values` (None values skipped; None when nothing is left).
    LINEAR: interpolated between the closest ranks. NEAREST_RANK: the smallest value with at least q of
    the values at or below it."""
    ordered = sorted(v for v in values if v is not None)
    if not ordered:
        return None
    if method == NEAREST_RANK:
        return ordered[max(0, math.ceil(q * len(ordered)) - 1)]
    if method != LINEAR:
        raise ValueError(f"method must be {LINEAR!r} or {NEAREST_RANK!r}, not {method!r}")
    pos = q * (len(ordered) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)
