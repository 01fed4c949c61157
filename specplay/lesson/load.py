"""Load a lesson file: its YAML, its schema (`schema`), and the rules that need the preset catalog (every
step's preset exists, runs on the lesson's device, and can take the step's max_tokens). Every refusal is a
LessonError naming the file, the line (from YAML's own node marks) and the field. The operator names the
file (`app.py --lesson PATH`); visitors only pick a step by its number."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import ValidationError

from specplay.lesson.schema import LessonError, LessonFile, Step, describe, field_name

DATA_DIR = Path(__file__).resolve().parent / "data"
BUNDLED = {"cpu": DATA_DIR / "cpu.yaml", "gpu": DATA_DIR / "gpu.yaml"}


@dataclass(frozen=True)
class Lesson:
    title: str
    intro: str
    device: str  # "cpu" | "gpu": where every step is meant to run
    steps: tuple[Step, ...]
    source: Path

    def step(self, index) -> tuple[int, Step]:
        """The step at `index` (what a visitor sends: anything), clamped into range; (index, step)."""
        try:
            i = int(index)
        except (TypeError, ValueError, OverflowError):
            i = 0
        i = max(0, min(len(self.steps) - 1, i))
        return i, self.steps[i]


def default_lesson_path(device: str) -> Path:
    """The bundled lesson for this device: every step of the CPU one runs on the offline SmolLM2 presets."""
    return BUNDLED["gpu" if device == "gpu" else "cpu"]


def line_of(node, loc: tuple) -> int | None:
    """The 1-based line of the deepest part of `loc` the YAML has (a missing field: its mapping's line)."""
    line = None if node is None else node.start_mark.line + 1
    for part in loc:
        if isinstance(node, yaml.MappingNode) and isinstance(part, str):
            found = next(((k, v) for k, v in node.value if getattr(k, "value", None) == part), None)
            if found is None:
                return line
            node, line = found[1], found[0].start_mark.line + 1
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            return line
    return line


def _where(source: Path, line: int | None) -> str:
    return f"{source.name}, line {line}" if line else source.name


def _read(source: Path):
    """(data, node tree) of the file; LessonError for an unreadable file or YAML that doesn't parse."""
    try:
        text = source.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise LessonError(f"{source.name}: can't read the lesson file ({exc.__class__.__name__})") from None
    try:
        return yaml.safe_load(text), yaml.compose(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or "not valid YAML"
        raise LessonError(f"{_where(source, mark.line + 1 if mark else None)}: not valid YAML ({problem})") from None


def _parse(data, node, source: Path) -> LessonFile:
    if not isinstance(data, dict):
        raise LessonError(f"{_where(source, line_of(node, ()))}: expected a mapping with title, device and steps, "
                          f"got {type(data).__name__}")
    try:
        return LessonFile.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        loc = tuple(error["loc"])
        raise LessonError(f"{_where(source, line_of(node, loc))}: field '{field_name(loc)}': {describe(error)}") from None


def _check_step(i: int, step: Step, device: str, presets: dict, node, source: Path) -> None:
    def fail(field: str, text: str):
        loc = ("steps", i, field)
        raise LessonError(f"{_where(source, line_of(node, loc))}: field '{field_name(loc)}': {text}")

    preset = presets.get(step.preset)
    if preset is None:
        close = difflib.get_close_matches(step.preset, sorted(presets), n=3, cutoff=0.5)
        hint = f"; close matches: {', '.join(close)}" if close else ""
        fail("preset", f"expected a preset's name (`specplay presets` lists them{hint}), got unknown preset "
                       f"{step.preset!r}")
    if device == "cpu" and preset.device != "any":
        fail("preset", f"expected a preset that runs on a CPU (this lesson's device is 'cpu'), got {step.preset!r}, "
                       "which needs a GPU")
    half = preset.target.max_model_len // 2
    if step.max_tokens > half:
        fail("max_tokens", f"expected 1 to half of {step.preset}'s max_model_len ({half}), got {step.max_tokens}")


def load_lesson(path, presets: dict | None = None) -> Lesson:
    """The lesson in `path`, checked against `presets` (default: every shipped preset); LessonError naming
    the file, line and field of the first problem."""
    source = Path(path)
    data, node = _read(source)
    parsed = _parse(data, node, source)
    if presets is None:
        from specplay.presets.catalog import load_presets

        presets = load_presets()
    for i, step in enumerate(parsed.steps):
        _check_step(i, step, parsed.device, presets, node, source)
    return Lesson(title=parsed.title, intro=parsed.intro, device=parsed.device, steps=tuple(parsed.steps),
                  source=source)
