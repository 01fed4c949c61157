"""Issue 37: `compare --preset-file` on the real CPU engines, a preset file outside the package."""

from __future__ import annotations

import json

import pytest

from specplay.core.paths import PRESETS_DIR
from tests.prompts import PROMPTS


@pytest.mark.engines
def test_cli_compare_runs_a_preset_file_outside_the_package(ngram_pair, tmp_path, capsys):
    """smollm2-ngram's YAML copied and renamed: validated as a shipped preset, and run like one (on the
    session's pair, whose engines are exactly this file's)."""
    from specplay.cli.main import main

    path = tmp_path / "my-pair.yaml"
    path.write_text((PRESETS_DIR / "smollm2-ngram.yaml").read_text().replace("name: smollm2-ngram", "name: my-pair"))
    args = ["compare", "--preset-file", str(path), "--max-tokens", "16", "--prompt", PROMPTS["rewrite-formal"], "--json"]
    assert main(args, pair=ngram_pair) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["preset"] == "my-pair" and result["identical"] and len(result["baseline"]["token_ids"]) == 16


def _cpu_takes_fp8_kv() -> bool:
    """vLLM's CPU attention takes an fp8 KV cache on x86 with AVX-512 or AMX only (v1/attention/backends/
    cpu_attn.py asks torch the same two questions); elsewhere the line keeps vLLM's default, auto."""
    import torch

    return bool(torch.cpu._is_avx512_supported() or torch.cpu._is_amx_tile_supported())


@pytest.mark.own_engines  # after the pool's pairs and its shutdown test, before the launched servers
@pytest.mark.order(1)
def test_compare_runs_on_a_preset_imported_from_a_users_serve_line(tmp_path, capsys):
    """Issue 41, done when 1, on the engines: the offline model's `vllm serve` line with --max-num-seqs,
    --enable-prefix-caching, an fp8 KV cache and --speculative-config, imported to a preset file, then
    `compare --preset-file` on the CPU engines started from it: identical at T=0, acceptance reported, and each
    engine's own vLLM config holds the line's arguments (plan and serve-cmd: tests/unit/test_import.py)."""
    import shlex

    from specplay.cli.main import main
    from specplay.core.events import BASELINE, SPECULATIVE
    from specplay.presets.catalog import load_user_file
    from specplay.presets.offline_model import OFFLINE_MODELS
    from specplay.run.pairs import open_pair
    from tests.conftest import suite_pair_layout

    kv = "fp8" if _cpu_takes_fp8_kv() else "auto"
    ngram = '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2}'
    # the KV space in front, as a CPU user sets it (vLLM's default, 4 GiB an engine, is 8 GiB of the suite's RAM)
    line = (f"VLLM_CPU_KVCACHE_SPACE=1 vllm serve {OFFLINE_MODELS['smollm2-135m-instruct'].path} --dtype float32 "
            "--max-model-len 2048 "
            f"--max-num-seqs 4 --enable-prefix-caching --kv-cache-dtype {kv} --speculative-config {shlex.quote(ngram)}")
    path = tmp_path / "mine.yaml"
    assert main(["import", "--serve-line", line, "--out", str(path)]) == 0, capsys.readouterr().err
    preset = load_user_file(path)
    assert preset.memory.cpu_kvcache_space_gib == 1
    with suite_pair_layout():
        pair = open_pair(preset)
    try:
        pair.start()
        for role in (BASELINE, SPECULATIVE):
            config = pair.engines[role]._llm.vllm_config  # what vLLM made of the preset's engine arguments
            assert (config.scheduler_config.max_num_seqs, config.cache_config.enable_prefix_caching,
                    config.cache_config.cache_dtype) == (4, True, kv), role
        capsys.readouterr()
        # compare's own prompt (its default, the one docs/cli.md ran): ~40 tokens with n-gram drafts
        assert main(["compare", "--preset-file", str(path), "--max-tokens", "48", "--schedule", "sequential",
                     "--json"], pair=pair) == 0
        result = json.loads(capsys.readouterr().out)
    finally:
        pair.shutdown()
    spec = result["speculative"]
    assert result["identical"] and 0 < len(result["baseline"]["token_ids"]) <= 48, \
        (result["first_divergence"], result["baseline"]["text"], result["speculative"]["text"])
    assert spec["num_drafts"] > 0 and 0 < spec["acceptance_rate"] <= 1, spec
    print(f"\nimported serve line (kv {kv}): {result['speedup']:.2f}x, acceptance {spec['acceptance_rate']:.2f} "
          f"over {spec['num_drafts']} drafts")
