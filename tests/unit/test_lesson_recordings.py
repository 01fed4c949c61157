"""Lessons that carry their runs (issue 42, 3), on a page over a FakePair (no engines): a step that names a
recording plays it through the Compare tab's picker's own handler, its verdict, explanation and figures the
recording's and labelled as recorded, never as live, and the engines run nothing; a lesson naming a
recording that is missing, cut off or not a bare file name of the page's folder is refused when it loads,
in one line naming the step and the file; the bundled CPU lesson's last step sets its live run's figures
beside the H100 recording's, with the sentence on which factor differs and what the recording is not."""

from __future__ import annotations

import html
import re
import shutil
import tempfile

import pytest

from specplay.core.paths import RECORDINGS_DIR
from specplay.hosting.cancel import CancelRegistry
from specplay.hosting.settings import PageSettings
from specplay.lesson.load import default_lesson_path, load_lesson
from specplay.lesson.schema import LessonError
from specplay.page.compare_run import RunPlace
from specplay.presets.catalog import load_presets
from specplay.run.recording import read_recording
from tests.checks import shown_to_2_places
from tests.unit.test_visitors import _fake_manager

DFLASH, DRAFT1B = "rec-dummy-llama8b-dflash.json", "rec-dummy-llama8b-draft1b-k3.json"
LABEL = "recorded on 1× NVIDIA H100 80GB HBM3, vLLM 0.34.0, 2026-12-06"
LESSON = """\
title: A lesson with a GPU run in it
device: cpu
steps:
  - title: live
    preset: smollm2-ngram
    prompt: Rewrite this sentence.
    question: Why?
    answer: Because.
  - title: the DFlash run, recorded on an H100
    recording: rec-dummy-llama8b-dflash.json
    question: Why does one pass of nine drafts pay?
    answer: Recorded answer.
"""


@pytest.fixture(scope="module")
def presets():
    return load_presets()


def _text(fragment: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


def _lesson(tmp_path, presets, text: str = LESSON, folder=RECORDINGS_DIR):
    path = tmp_path / "my-lesson.yaml"
    path.write_text(text)
    return load_lesson(path, presets, folder)


def _run(manager, lesson, index: int):
    from specplay.page.lesson_tab import run_step

    place = RunPlace(manager, CancelRegistry(), tempfile.mkdtemp(prefix="lesson-rec-"), PageSettings())
    frames = list(run_step(place, lesson, lambda name: "no switching here", index, "sequential", [], [], "s-1"))
    return frames, {k: v for f in frames for k, v in f.items()}


def test_a_step_naming_a_recording_shows_the_recordings_figures_and_label_not_a_live_run(tmp_path, presets):
    from specplay.page.lesson_tab import step_html
    from specplay.page.recordings_view import load_shelf, play_recording

    lesson = _lesson(tmp_path, presets)
    card = _text(step_html(lesson, 1, None))
    assert f"recording {DFLASH}" in card and "preset dummy-llama8b-dflash" in card and LABEL in card
    assert "max tokens 256" in card and "64 prompt token ids" in card
    manager = _fake_manager()
    try:
        seen, echo = [], manager.pair.events_for
        manager.pair.events_for = lambda request: seen.append(request) or echo(request)
        frames, last = _run(manager, lesson, 1)
        run = read_recording(RECORDINGS_DIR / DFLASH).run
        assert not last["error"] and last["result"]["speedup"] == pytest.approx(run.speedup, abs=1e-3)
        shown = _text(last["lesson:result"])
        assert LABEL in shown and "not a live run" in shown and "acceptance is synthetic" in shown
        assert run.explanation in shown and "2.90×" in shown and f"Diverged at token {run.first_divergence + 1}" in shown
        assert "lesson-answer open" in last["lesson:answer"] and last["lesson:answered"] == [1]
        said = _text(frames[0]["lesson:progress"])
        assert "Playing step 2's recording" in said and "not a live run" in said
        # one path: the picker's handler, given the same file, draws the same verdict and explanation
        place = RunPlace(manager, CancelRegistry(), tempfile.mkdtemp(), PageSettings())
        picked = {k: v for f in play_recording(place, load_shelf(RECORDINGS_DIR, print), "rec-dummy-llama8b-dflash",
                                               "s-2") for k, v in f.items()}
        assert (picked["badge"], picked["explain"]) == (last["badge"], last["explain"])
        assert seen == []  # the engines ran nothing
    finally:
        manager.shutdown()


def test_a_missing_truncated_or_pathlike_recording_is_refused_at_load_in_one_line(tmp_path, presets):
    folder = tmp_path / "recordings"
    folder.mkdir()
    whole = (RECORDINGS_DIR / DFLASH).read_text()
    (folder / "rec-cut.json").write_text(whole[:len(whole) // 2])  # cut off mid-write
    cases = {"rec-cut.json": "can't play the recording rec-cut.json",
             "rec-none.json": "can't play the recording rec-none.json",
             "../rec-cut.json": "string should match pattern"}
    for name, said in cases.items():
        with pytest.raises(LessonError) as err:
            _lesson(tmp_path, presets, LESSON.replace(DFLASH, name), folder)
        message = str(err.value)
        assert message.startswith("my-lesson.yaml, line 10: field 'steps[2].recording': "), message
        assert said in message and "\n" not in message, message
    assert "no such file" in _refused(tmp_path, presets, LESSON.replace(DFLASH, "rec-none.json"), folder)
    message = _refused(tmp_path, presets, LESSON, None)
    assert "this page has no recordings folder" in message and DFLASH in message
    message = _refused(tmp_path, presets, LESSON.replace("    question: Why does", "    preset: smollm2-ngram\n"
                                                                                 "    question: Why does"))
    assert message.startswith("my-lesson.yaml, line 11: field 'steps[2].preset': a step that plays a recording")
    message = _refused(tmp_path, presets, LESSON.replace("    recording: rec-dummy-llama8b-dflash.json\n", ""))
    assert message.startswith("my-lesson.yaml, line 9: field 'steps[2].preset': expected a value"), message


def _refused(tmp_path, presets, text, folder=RECORDINGS_DIR) -> str:
    with pytest.raises(LessonError) as err:
        _lesson(tmp_path, presets, text, folder)
    return str(err.value)


def test_the_app_refuses_a_lesson_whose_recording_is_not_in_its_recordings_folder(tmp_path):
    """app.py --lesson resolves the names against --recordings (not the shipped folder): one line, then exit."""
    from specplay.core.hardware import detect
    from specplay.hosting.options import lesson_for, parse_args, resolve_options

    (tmp_path / "my-lesson.yaml").write_text(LESSON)
    folder = tmp_path / "mine"
    folder.mkdir()
    args = ["--lesson", str(tmp_path / "my-lesson.yaml"), "--recordings", str(folder)]
    with pytest.raises(SystemExit) as err:
        lesson_for(resolve_options(parse_args(args)), detect())
    message = str(err.value.code)
    assert message.startswith("app.py: --lesson: my-lesson.yaml, line 10: field 'steps[2].recording'"), message
    assert DFLASH in message and "\n" not in message
    shutil.copy(RECORDINGS_DIR / DFLASH, folder)
    assert list(lesson_for(resolve_options(parse_args(args)), detect()).recordings) == [DFLASH]


def test_the_default_lessons_last_step_sets_its_live_figures_beside_the_h100_recordings():
    lesson = load_lesson(default_lesson_path("cpu"))
    index = next(i for i, s in enumerate(lesson.steps) if s.beside)
    step = lesson.steps[index]
    assert step.beside == DRAFT1B and step.preset == "smollm2-layerskip-draft" and index == len(lesson.steps) - 1
    # honest about what the recording is: not this prompt, dummy weights, synthetic acceptance at a=0.7
    assert all(word in step.question for word in ("not of this prompt", "dummy", "synthetic", "a=0.7"))
    manager = _fake_manager("smollm2-layerskip-draft")
    try:
        frames, last = _run(manager, lesson, index)
    finally:
        manager.shutdown()
    beside = next(f["lesson:result"] for f in reversed(frames) if "lesson-beside" in f.get("lesson:result", ""))
    rows = {m[0]: m[1:] for m in re.findall(r"<tr><th>([^<]+)</th><td>([^<]*)</td><td>([^<]*)</td></tr>",
                                           html.unescape(beside))}
    live, recorded = last["result"], read_recording(RECORDINGS_DIR / DRAFT1B).run
    # the page rounds the run's own figures; the JSON keeps them to 3 places, so rounding that again can land a
    # hundredth off (a clean clone: the page's 1.32× for a step-time ratio the JSON has as 1.315)
    for label, key, there in (("speedup", "speedup", "1.60×"),
                              ("tokens per step (speculative ÷ baseline)", "tokens_per_step_ratio", "2.66×"),
                              ("step time (speculative ÷ baseline)", "step_cost_ratio", "1.66×")):
        here, recorded_figure = rows[label]
        assert recorded_figure == there and here.rstrip("×") in shown_to_2_places(live[key]), (label, rows[label], live[key])
    assert rows["drafted tokens accepted"][1] == f"{recorded.speculative.acceptance_rate:.0%} (k=3)"
    shown = _text(beside)
    assert "this run, live: smollm2-layerskip-draft on CPU" in shown and "dummy-llama8b-draft1b-k3 on 1× NVIDIA H100" in shown
    assert "The recording measured 1.60× against this run's" in shown and "most of the difference is in the" in shown
    assert LABEL in shown and "acceptance is synthetic" in shown and "Not the same prompt" in shown
    assert "64 token ids" in shown and "lesson-answer open" in last["lesson:answer"]


def test_the_bundled_lesson_without_the_shipped_recordings_leaves_them_out(monkeypatch, tmp_path):
    """An installed wheel carries no docs/: the bundled lesson loads without the step's recording, not a page
    that won't start."""
    from specplay.lesson import load
    from specplay.lesson.load import bundled_lesson

    monkeypatch.setattr(load, "RECORDINGS_DIR", tmp_path / "absent")
    lesson = bundled_lesson("cpu")
    assert len(lesson.steps) == len(load_lesson(default_lesson_path("cpu")).steps)
    assert lesson.recordings == {} and not any(s.beside or s.recording for s in lesson.steps)
