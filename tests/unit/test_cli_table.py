"""The CLI's command table (as vLLM's entrypoints/cli): one module per command, only the chosen command's
module imported, and `compare` a thin command over the run layer's one compare flow."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from specplay.cli import main as cli

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import contextlib, io, json, runpy, sys
sys.argv = ["specplay", *json.loads(sys.argv[1])]
with contextlib.redirect_stdout(io.StringIO()):
    try:
        runpy.run_module("specplay", run_name="__main__")
    except SystemExit:
        pass
print(json.dumps(sorted(sys.modules)))
"""


def modules_loaded_by(*argv: str) -> set[str]:
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argv)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.splitlines()[-1]))


def test_presets_imports_only_its_own_command():
    loaded = modules_loaded_by("presets", "--json")
    assert "specplay.cli.presets" in loaded  # the probe really ran the command
    heavy = sorted(m for m in loaded if m.startswith(("specplay.bench", "specplay.page", "specplay.run", "vllm",
                                                      "gradio")))
    other_commands = sorted(set(cli.CMD_MODULES) - {"specplay.cli.presets"} & loaded)
    assert not heavy and not other_commands, (heavy, other_commands)


def test_help_still_lists_every_command_in_table_order():
    done = subprocess.run([sys.executable, "-m", "specplay", "--help"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0
    assert "{" + ",".join(cli.COMMANDS) + "}" in done.stdout
    assert "launch" in done.stdout.split("positional arguments:")[1]


def test_table_names_match_the_modules_commands():
    for name, module in cli.COMMANDS.items():
        assert [cmd.name for cmd in cli.subcommands([name])] == [name], module


def test_compare_is_a_thin_command_over_the_run_layer():
    """The CLI's compare neither streams nor types a result itself: specplay.run.compare_prompt does."""
    tree = ast.parse((ROOT / "specplay" / "cli" / "compare.py").read_text())
    calls = {ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    assert "compare_prompt" in calls
    assert not {"stream.compare", "RunResult.of", "pair.start", "pair.shutdown"} & calls
