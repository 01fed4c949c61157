"""A preset's target section takes any engine argument of the installed vLLM (issue 41, item 1): the keys
are asked of vLLM's own EngineArgs (read from its source; the 0.34 fixture from the real wheel), reach both
engines, the `vllm serve` lines and `launch`'s servers verbatim, and the memory plan reads kv_cache_dtype.
A typo names its close matches, a wrong value the field's own help; trust_remote_code needs the operator's
leave on a page served to others. No engine starts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from specplay.core.events import BASELINE, SPECULATIVE
from specplay.core.hardware import Hardware
from specplay.core.paths import PRESETS_DIR
from specplay.engine.probes import vllm_facts
from specplay.engine.vllm_facts import VllmFacts
from specplay.plan.memory import kv_bytes_per_token_by_role
from specplay.presets.capabilities import INSTALLED
from specplay.presets.catalog import PresetError, engine_settings, load_file
from specplay.presets.engine_args import remote_code_problem
from specplay.presets.engines import draft_engine_settings, serve_line
from specplay.run.launch import server_argv

GPU = Hardware(1, "NVIDIA H200", tuple(range(16)))
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-0.34-facts.json"
NAME = "dummy-llama8b-draft1b-k3"  # a bundled-shape pair: its configs are in the repository
# The issue's list: what a vLLM user gives a server and a preset couldn't.
EXTRAS = {"kv_cache_dtype": "fp8", "trust_remote_code": True, "revision": "main", "max_num_seqs": 8,
          "max_num_batched_tokens": 4096, "enable_prefix_caching": False, "attention_backend": "FLASH_ATTN",
          "tokenizer": "meta-llama/Llama-3.1-8B-Instruct"}


def _load(tmp_path, target: dict, facts=INSTALLED):
    data = yaml.safe_load((PRESETS_DIR / f"{NAME}.yaml").read_text())
    data["target"].update(target)
    path = tmp_path / f"{NAME}.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_file(path, facts)


def _error(tmp_path, target: dict, facts=INSTALLED) -> str:
    with pytest.raises(PresetError) as err:
        _load(tmp_path, target, facts)
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{NAME}.yaml: field 'target."), message
    return message


@pytest.fixture(scope="module")
def v034() -> VllmFacts:
    return VllmFacts.from_dict(json.loads(FIXTURE.read_text()))


def test_the_installed_vllm_says_its_engine_arguments():
    args = vllm_facts().engine_args
    assert {"fp8", "fp8_e5m2", "auto"} <= set(args["kv_cache_dtype"]["choices"])
    assert args["trust_remote_code"]["kinds"] == ["bool"] and "remote code" in args["trust_remote_code"]["help"]
    assert args["max_num_seqs"]["kinds"] == ["int", "none"]
    assert args["max_num_seqs"]["help"].startswith("Maximum number of sequences")
    assert "str" in args["revision"]["kinds"] and "tokenizer" in args["tokenizer"]["help"]


@pytest.mark.parametrize("facts", ["installed", "0.34"])
def test_every_engine_argument_of_the_issue_loads(tmp_path, facts, v034):
    preset = _load(tmp_path, EXTRAS, INSTALLED if facts == "installed" else v034)
    assert preset.vllm_problem is None
    for settings in engine_settings(preset, GPU):
        assert {k: settings.engine_args[k] for k in EXTRAS} == EXTRAS, settings.role


def test_they_reach_the_serve_lines_and_launchs_servers(tmp_path):
    preset = _load(tmp_path, EXTRAS)
    for role in (BASELINE, SPECULATIVE):
        argv = serve_line(preset, role, GPU, per_request=False).argv
        assert argv[argv.index("--kv-cache-dtype") + 1] == "fp8"
        assert argv[argv.index("--max-num-seqs") + 1] == "8"
        assert "--trust-remote-code" in argv and "--no-enable-prefix-caching" in argv  # false reaches vLLM
        assert argv[argv.index("--revision") + 1] == "main"
    served = server_argv(engine_settings(preset, GPU)[1].engine_args, 8001)
    assert served[served.index("--attention-backend") + 1] == "FLASH_ATTN" and "--no-enable-prefix-caching" in served


def test_the_draft_engine_keeps_the_settings_but_not_the_targets_files(tmp_path):
    draft = draft_engine_settings(_load(tmp_path, EXTRAS), GPU).engine_args
    assert draft["kv_cache_dtype"] == "fp8" and draft["max_num_seqs"] == 8
    assert "revision" not in draft and "tokenizer" not in draft  # the target's, not the draft's


def test_a_typo_names_its_close_matches(tmp_path):
    message = _error(tmp_path, {"kv_cache_dype": "fp8"})
    assert "close matches: kv_cache_dtype" in message and "'kv_cache_dype'" in message


def test_a_wrong_value_gets_the_fields_description(tmp_path):
    message = _error(tmp_path, {"max_num_seqs": "many"})
    assert "Maximum number of sequences" in message and "got 'many'" in message
    message = _error(tmp_path, {"kv_cache_dtype": "fp9"})
    assert "Data type for kv cache storage" in message and "fp8_e5m2" in message
    assert "expected a bool (Trust remote code" in _error(tmp_path, {"trust_remote_code": "yes"})
    assert "expected an int or null (Maximum number of sequences" in _error(tmp_path, {"max_num_seqs": 1.5})


def test_a_key_of_another_section_is_sent_there(tmp_path):
    assert "memory.baseline_gpu_memory_utilization" in _error(tmp_path, {"gpu_memory_utilization": 0.5})
    assert "speculative_config section" in _error(tmp_path, {"speculative_config": {}})


def test_another_vllms_argument_loads_and_says_it_cannot_run_here(tmp_path, v034):
    preset = _load(tmp_path, {"totally_new_engine_flag_xyz": 3}, v034)
    assert preset.vllm_problem == ("needs a vLLM whose engine arguments have 'totally_new_engine_flag_xyz'; "
                                   "vLLM 0.34.0 has no such argument")


def test_without_vllms_engine_arguments_the_keys_go_unjudged(tmp_path, v034):
    facts = VllmFacts.from_dict({**v034.to_dict(), "engine_args": None})
    preset = _load(tmp_path, {"max_num_seqs": "many"}, facts)
    assert engine_settings(preset, GPU)[0].engine_args["max_num_seqs"] == "many"  # vLLM says, at start


def test_fp8_kv_cache_halves_the_plans_kv_bytes(tmp_path):
    plain = kv_bytes_per_token_by_role(_load(tmp_path, {}), "gpu")
    fp8 = kv_bytes_per_token_by_role(_load(tmp_path, {"kv_cache_dtype": "fp8"}), "gpu")
    # bf16 8B (32 layers x 8 KV heads x 128 x 2 x 2 B) = 131072 B a token; the 1B draft's cache too
    assert plain[BASELINE] == 131072 and fp8[BASELINE] == 65536
    assert fp8[SPECULATIVE] * 2 == plain[SPECULATIVE]


def test_trust_remote_code_needs_the_operators_leave_on_a_page_served_to_others(tmp_path):
    remote = _load(tmp_path, {"trust_remote_code": True}).target
    problem = remote_code_problem(remote, served_to_others=True, allowed=False)
    assert problem and "trust_remote_code" in problem and "--allow-remote-code" in problem
    assert remote_code_problem(remote, served_to_others=False, allowed=False) is None
    assert remote_code_problem(remote, served_to_others=True, allowed=True) is None
    plain = _load(tmp_path, {}).target
    assert remote_code_problem(plain, served_to_others=True, allowed=False) is None


def test_vllms_own_cli_reads_the_serve_line_back_to_the_presets_values(tmp_path):
    """The flags as vLLM's `vllm serve` parses them (its parser, its EngineArgs): false stays false."""
    from vllm import AsyncEngineArgs
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(prog="vllm")
    command = ServeSubcommand()
    command.subparser_init(parser.add_subparsers(dest="subparser"))
    args = parser.parse_args(serve_line(_load(tmp_path, EXTRAS), SPECULATIVE, GPU, per_request=False).argv[1:])
    args.model = args.model_tag  # what `vllm serve MODEL` does
    parsed = AsyncEngineArgs.from_cli_args(args)
    assert {key: getattr(parsed, key) for key in EXTRAS} == EXTRAS


def test_app_py_refuses_a_remote_code_target_served_to_others_unless_the_operator_allows_it(tmp_path):
    """The rule at app.py's door (hosting/options.py): an own pair whose target sets trust_remote_code stops the
    app with the rule's one line on 0.0.0.0, not on 127.0.0.1 or with --allow-remote-code (there the gate goes on
    to its own checks: this GPU-shaped pair can't run on the CPU, which is a different line)."""
    from specplay.hosting.app_settings import AppSettings
    from specplay.hosting.options import offered_presets

    data = yaml.safe_load((PRESETS_DIR / f"{NAME}.yaml").read_text())
    data["target"]["trust_remote_code"] = True
    path = tmp_path / f"{NAME}.yaml"
    path.write_text(yaml.safe_dump(data))

    def refusal(**given) -> str:
        try:
            offered_presets(AppSettings(preset_file=str(path), **given))
        except SystemExit as exc:
            return str(exc)
        return ""

    said = refusal(host="0.0.0.0")
    assert said.startswith("app.py: ") and "trust_remote_code" in said and "--allow-remote-code" in said, said
    for given in ({"host": "127.0.0.1"}, {"host": "0.0.0.0", "allow_remote_code": True}):
        assert "trust_remote_code" not in refusal(**given), given
