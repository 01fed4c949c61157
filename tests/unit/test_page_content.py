"""What the Compare tab offers a vLLM user, on a page built over a FakePair (no engines): examples drawn from
the bench's workload files, Shift+Enter in the prompt running like Run, the exports beside the results."""

from __future__ import annotations

import pytest

from specplay.page.inputs import token_examples, workload_examples
from tests.unit.test_visitors import _fake_manager


@pytest.fixture(scope="module")
def page():
    from specplay.page import ui
    from specplay.hosting import closing

    manager = _fake_manager()
    demo = ui.build_page(manager)
    yield demo
    closing.close(demo)
    manager.shutdown()


def _component(demo, elem_id):
    return next(c for c in demo.config["components"] if c.get("props", {}).get("elem_id") == elem_id)


def test_examples_come_from_the_workload_files_where_ngram_pays_first():
    examples = workload_examples()
    kinds = [label.split(":")[0] for label, _ in examples]
    assert kinds[:4] == ["qa", "qa", "summarize", "summarize"] and {"code", "chat", "rewrite"} <= set(kinds)
    from specplay.bench.workloads import load_workload

    assert examples[0][1] == load_workload("qa", 1)[0].prompt  # the file's own prompt, whole
    assert all(len(label) < 90 for label, _ in examples)
    assert all(ids.replace(",", " ").split()[0].isdigit() for _, ids in token_examples())


def test_the_page_shows_workload_examples_and_shift_enter_runs(page):
    text = _component(page, "examples-text")["props"]
    assert text["visible"] is True and any(label.startswith("qa: ") for label in text["sample_labels"])
    assert _component(page, "examples-ids")["props"]["visible"] is False  # smollm2-ngram takes text
    prompt = _component(page, "prompt")["id"]
    run_btn = _component(page, "run")["id"]
    run = next(d for d in page.config["dependencies"] if d.get("api_name") == "run")
    assert [run_btn, "click"] in [list(t) for t in run["targets"]]
    assert [prompt, "submit"] in [list(t) for t in run["targets"]]  # Gradio submits lines>1 on Shift+Enter


def test_exports_sit_beside_the_results(page):
    from specplay.page.compare_tab import RUN_OUTPUTS

    for elem_id in ("result-json", "summary-md", "bench-json", "bench-pngs", "bench-md", "bench-csv"):
        assert _component(page, elem_id)
    assert {"result_file", "summary_md"} <= set(RUN_OUTPUTS)


def test_the_runs_json_file_and_markdown_table(tmp_path):
    import json

    import pandas as pd

    from specplay.bench.outputs import markdown_table
    from specplay.core.events import GenerationRequest
    from specplay.hosting.files import session_token
    from specplay.hosting.session import session_stem
    from specplay.page.finished_run import FinishedRun, exports
    from specplay.page.live_run import LiveRun
    from specplay.presets.catalog import get_preset
    from specplay.run.result import RunResult
    from tests.ui_fixtures import synthetic_events

    live = LiveRun(get_preset("smollm2-ngram"), GenerationRequest(prompt="p", max_tokens=3), {})
    for event in synthetic_events([1, 2, 3], [[1], [2, 3]]):
        live.add(event)
    run = FinishedRun.of(live, "session-abc")
    summary = pd.DataFrame([["speedup", "", "2.00×"]], columns=["figure", "baseline", "speculative"])
    out = exports({"run": run, "summary": summary}, tmp_path)
    # one a session, named from the session the run holds (by this process's secret: not its stem)
    assert out["result_file"] == str(tmp_path / f"run-{session_token('session-abc')}.json")
    assert session_stem("session-abc") not in out["result_file"] and "session-abc" not in out["result_file"]
    back = RunResult.model_validate(json.loads(open(out["result_file"]).read()))  # the run's one reader
    assert back.model_dump(mode="json") == run.result.model_dump(mode="json") and back.identical is True
    assert out["summary_md"] == "| figure | baseline | speculative |\n|---|---|---|\n| speedup |  | 2.00× |"
    assert exports({"result": {"streaming": True}}, tmp_path) == {}  # frames before the last: nothing to export
    md = markdown_table(["figure", "baseline"], [["speedup", "1.5|2"]])
    assert md == "| figure | baseline |\n|---|---|\n| speedup | 1.5\\|2 |"


def test_a_token_id_preset_opens_with_a_prompt_it_accepts():
    """Loaded with a dummy-weight preset (token ids, no tokenizer), the page used to open with the English
    example in the box, so Run with the prompt as shown answered "this preset has no tokenizer" (seen on the
    H200: the screenshot's run never reached a verdict)."""
    from specplay.page import ui
    from specplay.hosting import closing
    from specplay.page.inputs import build_request
    from specplay.presets.catalog import get_preset

    preset = get_preset("dummy-llama8b-draft1b-k3")
    manager = _fake_manager(preset.name)
    demo = ui.build_page(manager)
    try:
        value = _component(demo, "prompt")["props"]["value"]
        request = build_request(preset, value, preset.default_max_tokens, 0.0)
        assert request.prompt_token_ids and len(request.prompt_token_ids) >= 8, value
    finally:
        closing.close(demo)
        manager.shutdown()
