"""`specplay import` (issue 41, item 2): a vLLM user's own `vllm serve` line(s) or `--config` YAML become a
preset file, validated as every preset is; `serve-cmd` of that preset gives the same engine arguments back.
Both sides are read by one reader, the installed vLLM's own parser (engine.vllm_serve_args). No engine starts."""

from __future__ import annotations

import json

import pytest
import yaml

from specplay.cli.main import main
from specplay.engine.probes import SERVER_PER_REQUEST_LEVEL, per_request_metrics_supported
from specplay.engine.vllm_serve_args import read_serve_line, read_vllm_config
from specplay.presets.engines import CPU_EAGER_ENV

MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"
NGRAM = '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2}'
TARGET = f"vllm serve {MODEL} --dtype float32 --max-model-len 2048 --kv-cache-dtype fp8 --max-num-seqs 8 " \
         "--no-enable-prefix-caching"
LINE = f"{TARGET} --port 8001 --speculative-config '{NGRAM}'"
BASELINE = f"{TARGET} --port 8000"


@pytest.fixture(autouse=True)
def users_environment(monkeypatch):
    """serve-cmd as a user gets it: the suite's CPU shortcut (enforce_eager on CPU engines) is not theirs."""
    monkeypatch.delenv(CPU_EAGER_ENV, raising=False)


def playground_adds() -> dict:
    """What serve-cmd puts on the speculative line of its own: per-request acceptance, where vLLM has it."""
    return {"per_request_spec_decode_metrics": SERVER_PER_REQUEST_LEVEL} if per_request_metrics_supported() else {}


def serve_cmd_args(path, capsys) -> dict:
    """serve-cmd's two lines for a preset file, read back by the same reader the import used."""
    capsys.readouterr()
    assert main(["serve-cmd", "--preset-file", str(path), "--json"]) == 0
    lines = json.loads(capsys.readouterr().out)
    return {role: read_serve_line(lines[role]).engine_args for role in ("baseline", "speculative")}


def import_(capsys, *args) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["import", *args])
    said = capsys.readouterr()
    return code, said.out, said.err


def test_a_serve_line_round_trips_through_a_preset(tmp_path, capsys):
    given = read_serve_line(LINE).engine_args
    # vLLM's parser read what the user wrote (the reader is not a pass-through of the text)
    assert given["kv_cache_dtype"] == "fp8" and given["max_num_seqs"] == 8 and given["enable_prefix_caching"] is False
    assert given["speculative_config"] == json.loads(NGRAM) and "port" not in given
    out = tmp_path / "mine.yaml"
    code, said, err = import_(capsys, "--serve-line", LINE, "--out", str(out))
    assert code == 0, err
    assert f"wrote {out}" in said and "--port" in err  # the server's port is said to be left out
    data = yaml.safe_load(out.read_text())
    assert data["name"] == "mine" and data["speculative_config"] == json.loads(NGRAM)
    assert data["target"] == {"model": MODEL, "dtype": "float32", "max_model_len": 2048, "kv_cache_dtype": "fp8",
                              "max_num_seqs": 8, "enable_prefix_caching": False}
    back = serve_cmd_args(out, capsys)
    assert back["speculative"] == {**given, **playground_adds()}
    assert back["baseline"] == {k: v for k, v in given.items() if k != "speculative_config"}


def test_two_lines_give_the_baseline_and_each_engines_gpu_share(tmp_path, capsys):
    code, said, err = import_(capsys, "--serve-line", f"{BASELINE} --gpu-memory-utilization 0.4",
                              "--serve-line", f"{LINE} --gpu-memory-utilization 0.45", "--name", "pair")
    assert code == 0, err
    data = yaml.safe_load(said)  # printed (its first line a YAML comment)
    assert data["memory"]["baseline_gpu_memory_utilization"] == 0.4
    assert data["memory"]["speculative_gpu_memory_utilization"] == 0.45
    assert data["gpus"] == 1 and "gpu_memory_utilization" not in data["target"]
    # vLLM's default 0.9 each: two servers alone on their GPUs, so the preset gives each its own
    code, said, err = import_(capsys, "--serve-line", BASELINE, "--serve-line", LINE, "--name", "pair")
    assert code == 0 and yaml.safe_load(said)["gpus"] == 2, err


def test_a_vllm_config_yaml_round_trips_through_a_preset(tmp_path, capsys):
    config = tmp_path / "serve.yaml"
    config.write_text(yaml.safe_dump({
        "model": MODEL, "dtype": "float32", "max-model-len": 1024, "max_num_seqs": 4, "kv-cache-dtype": "fp8",
        "port": 8001, "enable-prefix-caching": False,
        "speculative-config": {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3,
                               "prompt_lookup_min": 1}}))
    read = read_vllm_config(config)
    given = read.engine_args
    assert given["max_model_len"] == 1024 and given["max_num_seqs"] == 4 and given["kv_cache_dtype"] == "fp8"
    out = tmp_path / "from-config.yaml"
    code, _, err = import_(capsys, "--vllm-config", str(config), "--out", str(out))
    assert code == 0, err
    # `vllm serve --config` drops a false --no-flag (vllm#51401 on its top parser): the preset holds what the
    # server runs, and the import says so; where vLLM keeps it, it is the target's
    if "enable_prefix_caching" in given:
        assert given["enable_prefix_caching"] is False and not read.notes
    else:
        assert "enable-prefix-caching: false" in err and "--no-enable-prefix-caching" in err, err
    back = serve_cmd_args(out, capsys)
    assert back["speculative"] == {**given, **playground_adds()}
    assert back["baseline"] == {k: v for k, v in given.items() if k != "speculative_config"}


@pytest.mark.parametrize("lines, says", [
    ([f"{LINE} --frobnicate 3"], "--frobnicate"),  # vLLM's parser has no such flag
    ([BASELINE.replace("--max-num-seqs 8", "--max-num-seqs 16"), LINE], "--max-num-seqs"),  # two targets
    ([TARGET], "--speculative-config"),  # nothing to speculate with
    ([LINE, LINE], "--speculative-config"),  # which one is the baseline's?
    ([f"{LINE} --gpu-memory-utilization 0.95"], "field 'memory."),  # the preset's validation refuses it
    ([LINE.replace("--max-model-len 2048 ", "")], "--max-model-len"),
    ([f"python -m vllm.entrypoints.openai.api_server --model {MODEL}"], "vllm serve"),
], ids=["unknown-flag", "two-targets", "no-speculative-config", "two-speculative", "invalid-preset",
        "no-max-model-len", "not-vllm-serve"])
def test_what_cant_make_a_preset_is_one_line_and_exit_2(tmp_path, capsys, lines, says):
    out = tmp_path / "bad.yaml"
    code, _, err = import_(capsys, *[w for line in lines for w in ("--serve-line", line)], "--out", str(out))
    assert code == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1 and says in err, err
    assert not out.exists()


def test_a_vllm_config_is_read_bounded(tmp_path, capsys):
    """The user's file goes through core.reading: an alias is refused, as in every file the playground reads."""
    config = tmp_path / "serve.yaml"
    config.write_text(f"model: &m {MODEL}\nserved-model-name: *m\nspeculative-config: {NGRAM}\n")
    code, _, err = import_(capsys, "--vllm-config", str(config), "--name", "x")
    assert code == 2 and err.count("\n") == 1 and "aliases" in err and "--vllm-config" in err, err


def test_a_users_cpu_serve_line_gives_plan_and_serve_cmd_its_arguments(tmp_path, capsys):
    """Issue 41, done when 1, up to the engines: the offline model's serve line with --max-num-seqs,
    --enable-prefix-caching, an fp8 KV cache (which vLLM's CPU engine takes on x86 with AVX-512 or AMX) and
    --speculative-config becomes a preset; `plan` counts a quarter of float32's KV bytes a token for both
    engines, and `serve-cmd` gives the line's arguments back. `compare` on the engines started from that
    preset: tests/engines/test_own_pair_engines.py."""
    import shlex

    from specplay.plan.memory import kv_bytes_per_token_by_role
    from specplay.presets.catalog import get_preset, load_user_file
    from specplay.presets.offline_model import OFFLINE_MODELS

    model = str(OFFLINE_MODELS["smollm2-135m-instruct"].path)
    line = (f"vllm serve {model} --dtype float32 --max-model-len 2048 --max-num-seqs 4 --enable-prefix-caching "
            f"--kv-cache-dtype fp8 --speculative-config {shlex.quote(NGRAM)}")
    path = tmp_path / "mine.yaml"
    code, _, err = import_(capsys, "--serve-line", line, "--out", str(path))
    assert code == 0, err
    target = yaml.safe_load(path.read_text())["target"]
    assert {k: target.get(k) for k in ("max_num_seqs", "enable_prefix_caching", "kv_cache_dtype")} == \
        {"max_num_seqs": 4, "enable_prefix_caching": True, "kv_cache_dtype": "fp8"}, target
    mine = kv_bytes_per_token_by_role(load_user_file(path), "cpu")
    shipped = kv_bytes_per_token_by_role(get_preset("smollm2-ngram"), "cpu")
    assert mine and shipped and all(mine[role] * 4 == shipped[role] for role in shipped), (mine, shipped)
    capsys.readouterr()
    assert main(["plan", "--preset-file", str(path), "--ram-gib", "32"]) == 0, capsys.readouterr().err
    given, back = read_serve_line(line).engine_args, serve_cmd_args(path, capsys)["speculative"]
    assert {k: back[k] for k in given} == given, (given, back)


@pytest.mark.parametrize("bounds, window", [({}, (5, 5)), ({"prompt_lookup_max": 3}, (3, 3)),
                                            ({"prompt_lookup_min": 2}, (2, 2))])
def test_an_ngram_line_without_its_window_imports_and_the_window_is_vllms(bounds, window, tmp_path, capsys):
    """`--speculative-config '{"method": "ngram", "num_speculative_tokens": 4}'`, the n-gram line most users
    write, was refused ("prompt_lookup_min/max: expected integers ..., got (None, None)") though vLLM serves it,
    filling the window itself. Now the preset keeps the keys as written (serve-cmd gives the line back) and the
    step replay and the limits read the window vLLM resolves, checked against the installed vLLM's own."""
    from vllm.config.speculative import SpeculativeConfig

    from specplay.presets.catalog import load_user_file

    spec = json.dumps({"method": "ngram", "num_speculative_tokens": 4, **bounds})
    line = f"vllm serve {MODEL} --dtype float32 --max-model-len 2048 --speculative-config '{spec}'"
    path = tmp_path / "mine.yaml"
    code, _, err = import_(capsys, "--serve-line", line, "--out", str(path))
    assert code == 0, err
    preset = load_user_file(path)
    vllms = SpeculativeConfig(method="ngram", num_speculative_tokens=4, **bounds)
    assert preset.speculative_config.prompt_lookup == (vllms.prompt_lookup_min, vllms.prompt_lookup_max) == window
    assert serve_cmd_args(path, capsys)["speculative"]["speculative_config"] == json.loads(spec)  # as written
