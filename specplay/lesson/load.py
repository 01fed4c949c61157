"""Load a lesson file: its YAML, its schema (`schema`), and the rules that need the preset catalog (every
live step's preset exists, runs on the lesson's device, and can take the step's max_tokens) or the
recordings folder (every recording a step names is a file of that folder that run.recording's one reader
takes and this version can play: read here, once, and kept with the lesson). Every refusal is a
LessonError naming the file, the line (from YAML's own node marks) and the field. The operator names the
file (`app.py --lesson PATH`) and the folder (`--recordings`); visitors only pick a step by its number."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from pydantic import ValidationError

from specplay.core.paths import RECORDINGS_DIR
from specplay.core.reading import PRESET_MAX_BYTES, UnreadableInput, check_values, read_text, yaml_loader
from specplay.lesson.schema import LessonError, LessonFile, Step, describe, field_name
from specplay.run.recording import Recording, RecordingError, read_playable

DATA_DIR = Path(__file__).resolve().parent / "data"
BUNDLED = {"cpu": DATA_DIR / "cpu.yaml", "gpu": DATA_DIR / "gpu.yaml"}
# What a step that plays a recording takes from it, so a lesson may not set it as well
FROM_RECORDING = ("preset", "prompt", "max_tokens", "temperature", "beside")


@dataclass(frozen=True)
class LessonRecording:
    """A recording a step names, read and checked when the lesson loaded."""

    name: str  # its file's name, as the lesson names it
    recording: Recording
    preset: object  # presets.catalog.Preset: its shape, for the panes and figures

    @property
    def stem(self) -> str:  # the name the page's picker knows it by
        return Path(self.name).stem


@dataclass(frozen=True)
class Lesson:
    title: str
    intro: str
    device: str  # "cpu" | "gpu": where every live step is meant to run
    steps: tuple[Step, ...]
    source: Path
    recordings: dict[str, LessonRecording] = field(default_factory=dict)  # by file name: the ones steps name

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
        text = read_text(source, PRESET_MAX_BYTES, f"{source.name}: can't read the lesson file")
    except UnreadableInput as exc:
        raise LessonError(str(exc)) from None
    try:  # the bounded loader (core.reading): no aliases, no deep nesting
        data, node = yaml.load(text, Loader=yaml_loader()), yaml.compose(text, Loader=yaml_loader())  # noqa: S506
        check_values(data, source.name)
        return data, node
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or "not valid YAML"
        raise LessonError(f"{_where(source, mark.line + 1 if mark else None)}: not valid YAML ({problem})") from None
    except (UnreadableInput, ValueError) as exc:
        raise LessonError(f"{source.name}: not valid YAML ({exc})") from None


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


def _check_step(i: int, step: Step, device: str, presets: dict, node, source: Path, folder) -> dict:
    """The step's problems refused; the recordings it names, read, by file name."""
    def fail(field: str, text: str):
        loc = ("steps", i, field)
        raise LessonError(f"{_where(source, line_of(node, loc))}: field '{field_name(loc)}': {text}")

    if step.recording is not None:
        extra = next((f for f in FROM_RECORDING if f in step.model_fields_set), None)
        if extra:
            fail(extra, "a step that plays a recording takes its preset, prompt and settings from it: leave out "
                        f"{extra} (or the recording)")
        return {step.recording: _recording(step.recording, "recording", folder, presets, fail)}
    for required in ("preset", "prompt"):
        if getattr(step, required) is None:
            fail(required, "expected a value (required unless the step plays a recording), got nothing")
    _check_preset(step, device, presets, fail)
    return {step.beside: _recording(step.beside, "beside", folder, presets, fail)} if step.beside else {}


def _check_preset(step: Step, device: str, presets: dict, fail) -> None:
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


def _recording(name: str, field: str, folder, presets: dict, fail) -> LessonRecording:
    """The recording `name` in `folder`, read by run.recording's reader (the picker's rule): refused, in one
    line naming the step's field and the file, when it is missing, cut off, invalid or of an unknown preset."""
    if folder is None:
        fail(field, f"names the recording {name}, but this page has no recordings folder (--recordings '')")
    try:  # the name is a bare file name (schema.RecordingName): it can only be a file of this folder
        recording, preset = read_playable(Path(folder) / name, presets)
    except RecordingError as exc:
        fail(field, f"can't play the recording {name}: {' '.join(str(exc).split())}")
    return LessonRecording(name, recording, preset)


def bundled_lesson(device: str, presets: dict | None = None) -> Lesson:
    """The bundled lesson for this device, with the shipped recordings its steps name. Where they aren't here
    (an installed wheel carries no docs/), the lesson without them: a step that plays one left out, one set
    beside a run dropped; a page that doesn't start would be worse than a step less."""
    here = RECORDINGS_DIR.is_dir()
    return load_lesson(default_lesson_path(device), presets, RECORDINGS_DIR if here else None, optional=not here)


def load_lesson(path, presets: dict | None = None, recordings=RECORDINGS_DIR, optional: bool = False) -> Lesson:
    """The lesson in `path`, checked against `presets` (default: every shipped preset) and the folder of
    recordings its steps name (`recordings`: the page's --recordings folder; by default the shipped one,
    which the bundled lessons name; None: the page has none, and a step naming one is refused, or with
    `optional` left out as `bundled_lesson` says); LessonError naming the file, line and field of the first
    problem."""
    source = Path(path)
    data, node = _read(source)
    parsed = _parse(data, node, source)
    if presets is None:
        from specplay.presets.catalog import load_presets

        presets = load_presets()
    named, steps = {}, []
    for i, step in enumerate(parsed.steps):
        if optional and recordings is None:  # checked without its recordings, as bundled_lesson says
            if step.recording is not None:
                continue
            step = step.model_copy(update={"beside": None})
        named.update(_check_step(i, step, parsed.device, presets, node, source, recordings))
        steps.append(step)
    return Lesson(title=parsed.title, intro=parsed.intro, device=parsed.device, steps=tuple(steps),
                  source=source, recordings=named)
