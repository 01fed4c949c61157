"""The Lesson tab's run of a step, on a page over a FakePair (no engines): the step's prompt and settings go
through the Compare tab's run, the answer opens only after that run finished; a step on another preset
switches first where the page allows it, and says why not where it doesn't."""

from __future__ import annotations

import tempfile
import time

import pytest

from specplay.lesson.load import default_lesson_path, load_lesson
from specplay.hosting.cancel import CancelRegistry
from specplay.page.compare_run import RunPlace
from specplay.hosting.settings import PageSettings
from specplay.presets.catalog import get_preset
from tests.ui_fixtures import FakePair
from tests.unit.test_visitors import _prompt_echo

LESSON = load_lesson(default_lesson_path("cpu"))
SELF_DRAFT_STEP = next(i for i, s in enumerate(LESSON.steps) if s.preset == "smollm2-self-draft")
LAYERSKIP_STEP = next(i for i, s in enumerate(LESSON.steps) if s.preset == "smollm2-layerskip-draft")
seen_requests = []


def _events(request):
    seen_requests.append(request)
    return _prompt_echo(request)


@pytest.fixture
def manager():
    from specplay.hosting.manager import PairManager

    presets = {n: get_preset(n) for n in ("smollm2-ngram", "smollm2-self-draft")}
    manager = PairManager(presets, "smollm2-ngram",
                          pair_factory=lambda p, hw, log=print: FakePair(_events, p, step_delay=0.001))
    manager.load("smollm2-ngram")
    deadline = time.monotonic() + 10
    while manager.pair is None and time.monotonic() < deadline:
        time.sleep(0.05)
    yield manager
    manager.shutdown()


def _run(manager, index, allow_switching=True, history_dir=None):
    from specplay.page.lesson_tab import run_step
    from specplay.page.ui import switch_refusal

    settings = PageSettings(allow_switching=allow_switching)
    place = RunPlace(manager, CancelRegistry(), history_dir or tempfile.mkdtemp(prefix="lesson-test-"), settings)
    frames = list(run_step(place, LESSON, lambda name: switch_refusal(manager, settings, name), index,
                           "sequential", [], [], "session-1"))
    return frames, {k: v for f in frames for k, v in f.items()}


def test_a_step_runs_its_prompt_and_opens_its_answer_after_the_run(manager):
    seen_requests.clear()
    frames, last = _run(manager, 0)
    step = LESSON.steps[0]
    assert [(r.prompt, r.max_tokens, r.temperature) for r in seen_requests] == [
        (step.prompt, step.max_tokens, step.temperature)]
    assert "Identical" in last["badge"] and "lesson-answer open" in last["lesson:answer"]
    assert last["lesson:answered"] == [0]
    first_answer = next(i for i, f in enumerate(frames) if "lesson:answer" in f)
    last_run_frame = max(i for i, f in enumerate(frames) if "badge" in f)
    assert first_answer > last_run_frame  # opened after the run's last frame, never while it streamed
    assert step.answer.split()[0] in last["lesson:answer"]


def test_a_steps_exports_are_served_under_names_without_the_session_stem(manager, tmp_path):
    """The lesson's run is served as the Compare tab's (compare_run.served): its history CSV and run JSON are
    named by this process's secret, not by the session's stem (its prefix-cache salt: anyone
    who learnt it could fetch the session's files; the lesson's were left under it), and its JSON is the
    session's finished run, read back by the run's one reader."""
    import json
    from pathlib import Path

    from specplay.hosting.files import session_token
    from specplay.hosting.session import session_stem
    from specplay.run.result import RunResult

    _, last = _run(manager, 0, history_dir=str(tmp_path))
    stem, token = session_stem("session-1"), session_token("session-1")
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == sorted([f"history-{token}.csv", f"run-{token}.json"]), names
    assert all(stem not in name for name in names)
    assert Path(last["history_file"]).name == f"history-{token}.csv"
    assert Path(last["result_file"]).name == f"run-{token}.json"
    back = RunResult.model_validate(json.loads(Path(last["result_file"]).read_text()))
    assert back.model_dump(mode="json") == last["result"] and back.preset == LESSON.steps[0].preset


def test_a_step_on_another_preset_switches_first_then_runs(manager):
    seen_requests.clear()
    frames, last = _run(manager, SELF_DRAFT_STEP)
    assert manager.status().preset == "smollm2-self-draft"
    assert any("Loading smollm2-self-draft" in f.get("lesson:progress", "") for f in frames)
    assert len(seen_requests) == 1 and "lesson-answer open" in last["lesson:answer"]


def test_no_switching_or_a_preset_not_offered_says_why_and_runs_nothing(manager):
    seen_requests.clear()
    frames, last = _run(manager, SELF_DRAFT_STEP, allow_switching=False)
    assert "switching presets is off on this page" in last["lesson:progress"]
    assert "this page can't run the step" in last["lesson:answer"]  # the presenter still gets it
    frames, last = _run(manager, LAYERSKIP_STEP)
    assert "which this page doesn&#x27;t offer" in last["lesson:progress"]
    assert seen_requests == [] and manager.status().preset == "smollm2-ngram"
    assert "badge" not in last and "lesson:answered" not in last


def test_the_page_has_a_lesson_tab_whose_step_text_is_escaped(manager):
    from specplay.lesson.load import Lesson
    from specplay.page import ui
    from specplay.hosting import closing
    from specplay.page.lesson_tab import answer_html, step_html

    demo = ui.build_page(manager)
    try:
        ids = {c.get("props", {}).get("elem_id") for c in demo.config["components"]}
        assert {"lesson-steps", "lesson-step", "lesson-run", "lesson-answer", "lesson-next"} <= ids
        assert any(d.get("api_name") == "lesson_step" for d in demo.config["dependencies"])
    finally:
        closing.close(demo)
    step = LESSON.steps[0].model_copy(update={"question": "<script>x()</script>", "answer": "<b>bold</b>"})
    lesson = Lesson("t", "", "cpu", (step,), LESSON.source)
    assert "<script>" not in step_html(lesson, 0, None) and "&lt;script&gt;" in step_html(lesson, 0, None)
    assert "<b>bold" not in answer_html(lesson, 0)
