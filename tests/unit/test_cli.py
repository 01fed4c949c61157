"""The command line without engines: subcommands collected from their modules, --version, --json, exit
codes in each help, the report in plain text when not a terminal, and the one stream loop."""

from __future__ import annotations

import json

import pytest

from specplay.cli import main as cli
from specplay.core.events import BASELINE, SPECULATIVE, GenerationRequest, RunFinished, StepEvent
from tests.ui_fixtures import FakePair, run_with_acceptance, synthetic_events


def test_subcommands_register_from_their_modules():
    names = [cmd.name for cmd in cli.subcommands()]
    assert names == ["presets", "serve-cmd", "import", "prepare", "compare", "plan", "bench", "launch", "diff"]
    parser = cli._parser()
    for name in names:
        sub = parser._subparsers._group_actions[0].choices[name]
        assert sub.epilog.startswith("exit codes: 0 "), name
    assert "3 they don't, 4 can't tell" in parser._subparsers._group_actions[0].choices["plan"].epilog


def test_version(capsys):
    import specplay

    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.split()[-1] in (cli.version(), specplay.__version__)
    assert specplay.__version__ == "0.5.0"


def test_presets_and_serve_cmd_as_json(capsys):
    assert cli.main(["presets", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    ngram = next(p for p in listed["presets"] if p["name"] == "smollm2-ngram")
    assert ngram["method"] == "ngram" and ngram["k"] == 4 and ngram["runnable"] is True and listed["machine"]
    assert cli.main(["serve-cmd", "--preset", "smollm2-ngram", "--json"]) == 0
    lines = json.loads(capsys.readouterr().out)
    assert lines["preset"] == "smollm2-ngram" and lines[BASELINE].startswith("VLLM_")
    assert "vllm serve" in lines[SPECULATIVE]
    assert cli.main(["serve-cmd", "--preset", "no-such-preset", "--json"]) == 2


def test_report_is_plain_text_when_not_a_terminal():
    import io

    from specplay.cli.report import print_report
    from specplay.presets.catalog import get_preset
    from specplay.run.result import RunResult

    result = RunResult.of(run_with_acceptance()[1], get_preset("smollm2-ngram"), load_seconds={BASELINE: 1.0})
    out = io.StringIO()
    print_report(result, out)
    text = out.getvalue()
    assert "\x1b[" not in text and "IDENTICAL: both engines produced the same 9 tokens" in text
    rows = {line.split("  ")[0]: line.split() for line in text.splitlines() if line.startswith(("steps", "speedup"))}
    assert rows["steps"][-2:] == ["9", "4"] and rows["speedup"][-1] == "2.67×"
    assert "why: Speculation pays (2.67×)" in text and "steps counted from" in text


def test_one_stream_loop_feeds_the_comparison_and_calls_back():
    from specplay.run import stream

    events = synthetic_events(list(range(5)), [[0], [1, 2], [3, 4]])
    pair = FakePair(lambda request: events, step_delay=0)
    seen = []
    c = stream.compare(pair, GenerationRequest(prompt="x"), on_event=lambda e, comp: seen.append(
        (type(e).__name__, len(comp.speculative.token_ids))))
    assert c.done and c.identical and c.run_id == "run-0"
    assert seen[0] == ("RunStarted", 0) and seen[-1] == ("RunFinished", 5) and len(seen) == len(events)
    # events() yields each event after the comparison has it (the page redraws between them)
    live = stream.new_comparison(pair, 4)
    for event in stream.events(pair, GenerationRequest(prompt="x"), comparison=live):
        if isinstance(event, StepEvent) and event.engine == SPECULATIVE:
            assert live.speculative.token_ids[-1] == event.token_ids[-1]
    assert isinstance(event, RunFinished) and live.done


def test_bad_arguments_exit_2_before_any_engine_starts(capsys):
    assert cli.main(["compare", "--preset", "llama31-8b-eagle3"]) == 2  # needs a GPU
    assert "can't run here" in capsys.readouterr().err
    assert cli.main(["compare", "--preset", "smollm2-ngram", "--prompt-token-ids", "1,x"]) == 2
    assert "expected integers" in capsys.readouterr().err
    assert cli.main(["bench", "--preset", "smollm2-ngram", "--k", "two"]) == 2
    assert "--k: expected ints" in capsys.readouterr().err


def test_the_bandwidth_floor_comes_from_the_memory_plan_and_the_gpu_table():
    from specplay.core.hardware import Hardware
    from specplay.plan.memory import target_step_floor_s as step_floor_s  # the page's and compare's, one place
    from specplay.presets.catalog import get_preset

    h200, unknown = Hardware(1, "NVIDIA H200", (0,)), Hardware(1, "Some Future GPU", (0,))
    eight_b = get_preset("llama31-8b-eagle3")
    assert step_floor_s(eight_b, h200) == pytest.approx(16.06e9 / 4.8e12, rel=0.02)  # bf16 8B: 3.3 ms
    assert step_floor_s(eight_b, unknown) is None and step_floor_s(eight_b, Hardware(0, None, (0,))) is None


def test_plan_keeps_its_exit_codes_and_bad_arguments_exit_2(capsys):
    assert cli.main(["plan", "--preset", "smollm2-ngram", "--json"]) in (0, 3)
    assert json.loads(capsys.readouterr().out)["preset"] == "smollm2-ngram"
    assert cli.main(["plan", "--preset", "llama31-8b-eagle3", "--gpu-gib", "80"]) == 0
    assert cli.main(["plan", "--preset", "smollm2-ngram", "--gpus", "2"]) == 2  # --gpus needs --gpu-gib
    assert "--gpu-gib" in capsys.readouterr().err


def test_compare_defaults_to_sequential_like_the_page_and_serve_cmd_speaks_hub_ids(capsys):
    args = cli._parser().parse_args(["compare"])
    assert args.schedule == "sequential"
    assert cli.main(["serve-cmd", "--preset", "smollm2-layerskip-draft"]) == 0
    text = capsys.readouterr().out
    assert "vllm serve HuggingFaceTB/SmolLM2-135M-Instruct" in text and "# smollm2-135m-instruct-skip12-17 has no hub id" in text
    assert cli.main(["serve-cmd", "--preset", "smollm2-layerskip-draft", "--json"]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert notes[BASELINE] == [] and "no hub id" in notes[SPECULATIVE][0]


# -- what compare says when the pair can't run or can't start ----------------------------------------------
@pytest.mark.parametrize("spec, expected", [
    ('{"method": "dflash", "num_speculative_tokens": 9}',
     "field 'speculative_config.model': expected the draft model for method 'dflash'"),
    ('{"method": "ngram_gpu", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 4}',
     "adhoc can't run here: method ngram_gpu runs on a GPU only; none here"),
    ('{"method": "lilicorr", "num_speculative_tokens": 4}',
     "adhoc can't run here: needs a vLLM with speculative method 'lilicorr'; vLLM "),
])
def test_an_adhoc_method_this_machine_cant_run_says_what_is_missing_in_one_sentence(capsys, spec, expected):
    """Not the schema's "got 'dflash'" (a list of 7 methods, before vLLM's own list was asked): what is
    missing, in one line, exit 2, before any engine starts."""
    from specplay.presets.capabilities import installed_facts

    if "lilicorr" in spec and installed_facts() is None:
        pytest.skip("without vLLM its methods can't be asked")
    code = cli.main(["compare", "--json", "--model", "HuggingFaceTB/SmolLM2-135M-Instruct", "--speculative-config",
                     spec])
    err = capsys.readouterr()
    assert code == 2 and expected in err.err and "got 'dflash'" not in err.err
    assert len(err.err.strip().splitlines()) == 1 and "Traceback" not in err.err
    if "can't run here" in expected:  # a pair refused before starting: --json still prints one object
        [line] = err.out.splitlines()
        refused = json.loads(line)
        assert refused["runnable"] is False and refused["preset"] == "adhoc" and expected in refused["error"]
    else:  # the options themselves are wrong: nothing to describe
        assert err.out == ""


def test_a_pair_that_fails_to_start_still_prints_one_json_object(tmp_path):
    """On vLLM 0.34 the product's own preset failed to start (EngineStartError), exit 1, and --json printed
    nothing: the bench and scripts read nothing. A real vLLM refusal here: a target whose architecture vLLM
    doesn't have (refused while building the config, before any engine process)."""
    import subprocess
    import sys

    pytest.importorskip("vllm")
    model = tmp_path / "no-such-model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"architectures": ["NoSuchForCausalLM"], "model_type": "llama",
                                                   "hidden_size": 64, "num_hidden_layers": 1,
                                                   "num_attention_heads": 1, "vocab_size": 64}))
    spec = '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 4}'
    done = subprocess.run([sys.executable, "-m", "specplay", "compare", "--json", "--model", str(model),
                           "--load-format", "dummy", "--max-model-len", "256", "--speculative-config", spec],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stderr[-2000:]
    [line] = done.stdout.strip().splitlines()  # one JSON object, nothing else on stdout
    failed = json.loads(line)
    assert failed["started"] is False and failed["preset"] == "adhoc" and failed["method"] == "ngram"
    assert "engine failed to start" in failed["error"] and "NoSuchForCausalLM" in failed["error"]
    assert "Traceback" not in done.stderr
