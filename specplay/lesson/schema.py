"""A lesson's schema (pydantic v2, unknown fields refused): a title, the device it is written for, and 1 to
12 ordered steps (5-7 read best), each a preset, a prompt, the run's settings, a question and the answer
that opens after the run; or, instead of the preset and prompt, a recording the step plays (a GPU run taught
on a CPU). A live step may also name a recording to set beside its run. The rules that need the preset
catalog or the recordings folder (and which fields go together), and the line numbers, are in `load`."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

MAX_STEPS = 12
MAX_TEXT_CHARS = 4000  # a question or an answer: a paragraph or three, not a chapter
MAX_PROMPT_CHARS = 20_000  # the page's own limit on a prompt (page.inputs)
# A recording is named by its file's name only, resolved against the page's recordings folder: no
# folder part, no "..", so a lesson can't point the page at any other file
RecordingName = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,150}\.json$")]


class LessonError(ValueError):
    """A lesson file is missing, malformed or names a preset that doesn't exist; the message names the file,
    the line and the field."""


class Step(BaseModel):
    """One step: run `prompt` on `preset` (or play `recording`), then answer `question`."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    title: str = Field(min_length=1, max_length=120, description="a short title, shown in the step list")
    preset: str | None = Field(None, description="a preset's name (specplay presets lists them); required "
                                                 "unless the step plays a recording")
    prompt: str | None = Field(None, min_length=1, max_length=MAX_PROMPT_CHARS,
                               description="the prompt both engines answer; required unless the step plays a recording")
    recording: RecordingName | None = Field(
        None, description="a recording's file name in the page's recordings folder (app.py --recordings): the step "
                          "plays it instead of a live run, and takes its preset, prompt and settings from it")
    beside: RecordingName | None = Field(
        None, description="a recording's file name, as for recording: its figures are set beside this step's "
                          "live run's once the run has finished")
    max_tokens: int = Field(64, ge=1, le=2048, description="tokens to generate, 1 to 2048 (default 64)")
    temperature: float = Field(0.0, ge=0.0, le=2.0, description="0 (greedy, the default) to 2")
    question: str = Field(min_length=1, max_length=MAX_TEXT_CHARS, description="what to look for in the run")
    answer: str = Field(min_length=1, max_length=MAX_TEXT_CHARS, description="shown once the run has finished")
    look_at: str | None = Field(None, max_length=MAX_TEXT_CHARS,
                                description="where on the page to look while it runs (optional)")


class LessonFile(BaseModel):
    """One lesson YAML file."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True,
                              title="Speculative Decoding Playground lesson")
    title: str = Field(min_length=1, max_length=200)
    intro: str = Field("", max_length=MAX_TEXT_CHARS, description="a paragraph shown above the steps")
    device: Literal["cpu", "gpu"] = Field(description="'cpu' (every step runs on a CPU) or 'gpu'")
    steps: list[Step] = Field(min_length=1, max_length=MAX_STEPS,
                              description=f"1 to {MAX_STEPS} steps, in order (5 to 7 read best)")


_TYPE_WORDS = {"int_type": "an int", "int_from_float": "an int", "string_type": "a str", "float_type": "a number",
               "bool_type": "a bool", "dict_type": "a mapping", "model_type": "a mapping", "list_type": "a list",
               "model_attributes_type": "a mapping"}


def field_name(loc: tuple) -> str:
    """('steps', 2, 'preset') -> 'steps[3].preset' (steps counted from 1, as the page shows them)."""
    out = ""
    for part in loc:
        out += f"[{part + 1}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def describe(error: dict) -> str:
    """One pydantic error in words: what was expected, what was found."""
    kind, got = error["type"], error.get("input")
    if kind == "missing":
        return "expected a value (required), got nothing"
    if kind == "extra_forbidden":
        model = Step if any(isinstance(p, int) for p in error["loc"]) else LessonFile
        return f"unknown field (the known fields are {', '.join(model.model_fields)})"
    if kind == "literal_error":
        return f"expected one of {error['ctx']['expected']}, got {got!r}"
    if kind in _TYPE_WORDS:
        return f"expected {_TYPE_WORDS[kind]}, got {got!r}"
    return f"{error['msg'].lower()}, got {_short(got)}"


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
