"""The README's commands answer --help without setting anything up."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_play_help_answers_without_running_set_up(tmp_path):
    # a copy of the scripts and app.py without .venv: set-up would create .venv (minutes); help must not
    (tmp_path / "scripts").mkdir()
    for name in ("scripts/play.sh", "scripts/setup.sh", "app.py"):
        (tmp_path / name).write_text((ROOT / name).read_text())
    (tmp_path / "specplay").symlink_to(ROOT / "specplay")
    done = subprocess.run(["bash", "scripts/play.sh", "--help"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert "usage: scripts/play.sh" in done.stdout and "--preset NAME" in done.stdout
    assert not (tmp_path / ".venv").exists()


def test_set_up_leaves_the_bytecode_of_what_every_process_imports():
    """Where PYTHONDONTWRITEBYTECODE is set (as on the CI machines), Python never writes a .pyc on import: without
    them set-up leaves, every engine process compiled vLLM, torch and Gradio afresh (47 s instead of 17 on 2
    cores). Files looked for by path: importing them here would hide the defect where bytecode may be written."""
    import importlib.util
    import sysconfig

    site = Path(sysconfig.get_paths()["purelib"])
    sources = [site / "vllm" / "entrypoints" / "llm.py", site / "torch" / "_tensor.py",
               site / "gradio" / "blocks.py", site / "vllm" / "v1" / "engine" / "core.py"]
    present = [s for s in sources if s.exists()]
    assert present, f"none of {sources} in {site}"
    missing = [str(s) for s in present if not Path(importlib.util.cache_from_source(str(s))).exists()]
    assert not missing, f"no .pyc for {missing}: scripts/setup.sh compiles .venv once"
