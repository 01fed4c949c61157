"""The value types a run's models (result.py, steps.py, noise.py) are made of: every number finite and
bounded, every list capped, ints and flags strict (1.0 is no token id, "yes" no flag), so a run JSON read back
(`RunResult.model_validate`) is checked field by field and a bad one names its field. Floats are rounded in
the JSON as the README's field table documents, unless dumped with `EXACT` as context (a recording of the run:
every digit and the per-step arrival times)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, PlainSerializer, SerializationInfo, Strict

MAX_TOKENS = 1 << 17  # longer than any run a page or the CLI allows
MAX_K = 64
EXACT = {"exact": True}  # model_dump(context=EXACT): nothing rounded, per-step times kept


def exact(info: SerializationInfo | None) -> bool:
    return bool(info is not None and (info.context or {}).get("exact"))


def rounded(base, digits: int):
    """`base`, rounded to `digits` in the JSON (not under EXACT)."""
    return Annotated[base, PlainSerializer(lambda v, info: v if exact(info) else round(v, digits))]


Count = Annotated[int, Strict(), Field(ge=0, le=1 << 40)]
SmallCount = Annotated[int, Strict(), Field(ge=0, le=MAX_K)]
TokenId = Annotated[int, Strict(), Field(ge=0, lt=1 << 31)]
Ids = Annotated[tuple[TokenId, ...], Field(max_length=MAX_TOKENS)]
Seconds = Annotated[float, Strict(), Field(ge=0, le=1e7, allow_inf_nan=False)]
Ratio = Annotated[float, Strict(), Field(ge=0, le=1e9, allow_inf_nan=False)]
Flag = Annotated[bool, Strict()]
Short = Annotated[str, Field(max_length=200)]
Text = Annotated[str, Field(max_length=MAX_TOKENS * 64)]
Rounded2, Rounded3, Rounded4 = rounded(Ratio, 2), rounded(Ratio, 3), rounded(Ratio, 4)
Seconds4, Seconds6 = rounded(Seconds, 4), rounded(Seconds, 6)
