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
