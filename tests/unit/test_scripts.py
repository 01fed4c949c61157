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
