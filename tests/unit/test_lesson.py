"""Lesson files: the bundled ones load and keep to the issue's shape (5-7 steps, the CPU one on CPU
presets only); a file with an unknown preset, an unknown field, a bad value or broken YAML is refused
naming the file and the line; a visitor's step index can only pick a step."""

from __future__ import annotations

import pytest

from specplay.lesson.load import BUNDLED, default_lesson_path, load_lesson
from specplay.lesson.schema import LessonError
from specplay.presets.catalog import load_presets

GOOD = """\
title: A test lesson
device: cpu
steps:
  - title: copy
    preset: smollm2-ngram
    prompt: Rewrite this sentence.
    question: Why?
    answer: Because.
  - title: draft
    preset: smollm2-self-draft
    prompt: Write a poem.
    max_tokens: 16
    temperature: 0.9
    question: Why not?
    answer: Because not.
"""


@pytest.fixture(scope="module")
def presets():
    return load_presets()


def _refused(tmp_path, presets, text: str, name: str = "my-lesson.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(LessonError) as err:
        load_lesson(path, presets)
    return str(err.value)


def test_the_bundled_lessons_load_with_five_to_seven_steps(presets):
    for device, path in BUNDLED.items():
        lesson = load_lesson(path, presets)
        assert lesson.device == device and 5 <= len(lesson.steps) <= 7, (path, len(lesson.steps))
        assert all(step.question.strip() and step.answer.strip() for step in lesson.steps)
    cpu = load_lesson(default_lesson_path("cpu"), presets)
    assert all(presets[step.preset].device == "any" for step in cpu.steps)
    assert {s.preset for s in cpu.steps} >= {"smollm2-ngram", "smollm2-self-draft"}
    assert any(s.temperature > 0 for s in cpu.steps)
    assert default_lesson_path("gpu") == BUNDLED["gpu"]


def test_a_good_file_loads_with_its_defaults(tmp_path, presets):
    path = tmp_path / "good.yaml"
    path.write_text(GOOD)
    lesson = load_lesson(path, presets)
    assert [s.preset for s in lesson.steps] == ["smollm2-ngram", "smollm2-self-draft"]
    assert lesson.steps[0].max_tokens == 64 and lesson.steps[0].temperature == 0.0
    assert lesson.steps[1].max_tokens == 16 and lesson.steps[1].temperature == 0.9


def test_an_unknown_preset_is_refused_with_file_and_line(tmp_path, presets):
    message = _refused(tmp_path, presets, GOOD.replace("preset: smollm2-self-draft", "preset: smollm2-turbo"))
    assert message.startswith("my-lesson.yaml, line 10: field 'steps[2].preset': "), message
    assert "unknown preset 'smollm2-turbo'" in message and "close matches: smollm2-" in message


def test_an_unknown_field_is_refused_with_file_and_line(tmp_path, presets):
    text = GOOD.replace("    max_tokens: 16\n", "    max_tokens: 16\n    max_token: 16\n")
    message = _refused(tmp_path, presets, text)
    assert message.startswith("my-lesson.yaml, line 13: field 'steps[2].max_token': unknown field"), message
    message = _refused(tmp_path, presets, "colour: blue\n" + GOOD)
    assert message.startswith("my-lesson.yaml, line 1: field 'colour': unknown field"), message


def test_a_bad_value_or_a_missing_field_is_refused_with_its_line(tmp_path, presets):
    message = _refused(tmp_path, presets, GOOD.replace("max_tokens: 16", "max_tokens: many"))
    assert message.startswith("my-lesson.yaml, line 12: field 'steps[2].max_tokens': expected an int"), message
    message = _refused(tmp_path, presets, GOOD.replace("temperature: 0.9", "temperature: 7"))
    assert message.startswith("my-lesson.yaml, line 13: field 'steps[2].temperature': "), message
    assert "less than or equal to 2" in message
    message = _refused(tmp_path, presets, GOOD.replace("    question: Why?\n", ""))
    assert message.startswith("my-lesson.yaml, line 4: field 'steps[1].question': expected a value"), message
    message = _refused(tmp_path, presets, GOOD.replace("device: cpu", "device: tpu"))
    assert message.startswith("my-lesson.yaml, line 2: field 'device': expected one of 'cpu' or 'gpu'"), message


def test_a_gpu_preset_in_a_cpu_lesson_and_too_many_tokens_are_refused(tmp_path, presets):
    message = _refused(tmp_path, presets, GOOD.replace("preset: smollm2-ngram", "preset: smollm2-ngram-gpu"))
    assert message.startswith("my-lesson.yaml, line 5: field 'steps[1].preset': expected a preset that runs on a CPU")
    message = _refused(tmp_path, presets, GOOD.replace("max_tokens: 16", "max_tokens: 2000"))
    assert message.startswith("my-lesson.yaml, line 12: field 'steps[2].max_tokens': expected 1 to half of"), message


def test_broken_yaml_or_no_mapping_is_refused_with_its_line(tmp_path, presets):
    message = _refused(tmp_path, presets, GOOD.replace("  - title: draft", "  - title: [draft"))
    assert message.startswith("my-lesson.yaml, line 10: not valid YAML"), message
    message = _refused(tmp_path, presets, "- just\n- a list\n")
    assert message.startswith("my-lesson.yaml, line 1: expected a mapping"), message
    message = _refused(tmp_path, presets, "title: x\ndevice: cpu\nsteps: []\n")
    assert message.startswith("my-lesson.yaml, line 3: field 'steps': list should have at least 1 item"), message
    with pytest.raises(LessonError, match="missing.yaml: can't read"):
        load_lesson(tmp_path / "missing.yaml", presets)


def test_a_visitors_step_index_only_picks_a_step(tmp_path, presets):
    path = tmp_path / "good.yaml"
    path.write_text(GOOD)
    lesson = load_lesson(path, presets)
    assert lesson.step(1)[0] == 1 and lesson.step("1")[0] == 1
    for wild in (-5, 99, "../../etc/passwd", None, 1e308, float("nan"), [1]):
        index, step = lesson.step(wild)
        assert 0 <= index < len(lesson.steps) and step is lesson.steps[index]


def test_the_app_refuses_a_bad_lesson_at_start_with_its_name_and_line(tmp_path):
    """`python app.py --lesson FILE` stops before serving anything, naming the file, line and field."""
    import subprocess
    import sys

    from tests.ui_fixtures import ROOT

    path = tmp_path / "trainer.yaml"
    path.write_text(GOOD.replace("preset: smollm2-self-draft", "preset: nope"))
    done = subprocess.run([sys.executable, str(ROOT / "app.py"), "--lesson", str(path), "--port", "1"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 2
    assert "app.py: --lesson: trainer.yaml, line 10: field 'steps[2].preset'" in done.stderr, done.stderr
