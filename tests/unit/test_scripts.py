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


def test_failing_engine_free_tests_still_release_the_engine_tests(tmp_path):
    """scripts/test.sh runs the engine-free tests beside the engine tests, which wait for their flag file
    (PLAYGROUND_TESTS_AFTER). When those tests failed, `set -e` ended their subshell before it wrote the flag,
    and CI's engine tests waited out their 30-minute limit (3008 s). Here a stand-in pytest fails the engine-free
    run; the other run reports the flag it read, at once."""
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "test.sh").write_text((ROOT / "scripts" / "test.sh").read_text())
    (tmp_path / "scripts" / "setup.sh").write_text("#!/usr/bin/env bash\nexit 0\n")
    (tmp_path / "scripts" / "setup.sh").chmod(0o755)
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(
        "#!/usr/bin/env bash\n"
        'case " $* " in *" -n 4 "*) echo "1 failed"; exit 1;; esac\n'  # the engine-free run: a failure
        'for _ in $(seq 200); do [ -s "$PLAYGROUND_TESTS_AFTER" ] && break; sleep 0.1; done\n'
        'echo "flag: $(cat "$PLAYGROUND_TESTS_AFTER" 2>/dev/null || echo none)"\n')
    python.chmod(0o755)
    done = subprocess.run(["bash", "scripts/test.sh"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert "flag: 1" in done.stdout, done.stdout + done.stderr
    assert "1 failed" in done.stdout  # the engine-free log is printed after
    assert done.returncode != 0


def test_uv_gets_the_package_sources_pip_is_configured_with(tmp_path):
    """Set-up installs with uv (scripts/setup.sh), which reads no pip.conf and no PIP_* variable: without
    scripts/uv_env.py it would ask PyPI alone and miss a machine's wheel folder, extra indexes, constraints and
    CA bundle (this machine's torch 2.13.0+cpu comes from such a folder). pip's configuration files and
    variables go through, several values in the separator uv reads, and an unset option not at all."""
    import os
    import sys

    config = tmp_path / "pip.conf"
    config.write_text("[global]\nextra-index-url = file:///srv/a/simple file:///srv/b/simple\ncert = /etc/ca.pem\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    env.update(PIP_CONFIG_FILE=str(config), PIP_FIND_LINKS="/opt/one /opt/two", PIP_CONSTRAINT="/etc/c.txt",
               PIP_INDEX_URL="https://pypi.example/simple")  # each set here: the machine's own files don't count
    done = subprocess.run([sys.executable, "scripts/uv_env.py"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "export UV_INDEX_STRATEGY=unsafe-best-match",
        "export UV_INDEX_URL=https://pypi.example/simple",
        "export UV_EXTRA_INDEX_URL='file:///srv/a/simple file:///srv/b/simple'",
        "export UV_FIND_LINKS=/opt/one,/opt/two",
        "export UV_CONSTRAINT=/etc/c.txt",
        "export SSL_CERT_FILE=/etc/ca.pem",
    ]
