"""Telemetry, the pair manager, and app.py's options (no engines)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest


from specplay.core.events import BASELINE, SPECULATIVE
from specplay.presets.catalog import get_preset
from specplay.engine.telemetry import MemorySampler, rss_bytes
from tests.ui_fixtures import FakePair, ROOT



# -- telemetry ------------------------------------------------------------------------------------------------
def test_rss_sampler_sums_processes_and_keeps_series():
    child = subprocess.Popen([sys.executable, "-c", "b = bytearray(200 * 1024 * 1024); print('ok', flush=True); "
                              "import time; time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ok"  # allocated and touched
        sampler = MemorySampler(lambda: {BASELINE: [os.getpid()], SPECULATIVE: [child.pid]}, hz=20).start()
        time.sleep(0.5)
        sampler.stop()
        series = sampler.series()
        assert sampler.kind == "rss" and "RSS" in sampler.label
        assert len(series[BASELINE].times) >= 3
        assert series[SPECULATIVE].latest >= 200 * 1024 * 1024
        assert series[SPECULATIVE].latest == pytest.approx(rss_bytes([child.pid]), rel=0.1)
        later = sampler.series(since=series[BASELINE].times[-1])
        assert len(later[BASELINE].times) == 1
    finally:
        child.kill()


def test_pair_manager_loads_in_background_and_refuses_other_presets():
    from specplay.hosting.manager import PairManager, PresetNotAllowed

    preset = get_preset("smollm2-ngram")
    manager = PairManager({preset.name: preset}, preset.name,
                          pair_factory=lambda p, hw, log=print: FakePair(lambda r: [], p, load_s=2.0))
    manager.load(preset.name)  # a 2 s load: still loading when asked at once, however busy the machine
    assert manager.status().state == "loading" and manager.pair is None
    deadline = time.monotonic() + 10
    while manager.status().state != "ready" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert manager.status().state == "ready" and manager.pair is not None
    with pytest.raises(PresetNotAllowed):
        manager.load("llama31-8b-eagle")
    with manager.run_lock:  # a run holds the engines: no switch under it
        with pytest.raises(RuntimeError, match="run is in progress"):
            manager.load(preset.name)
    manager.shutdown()


def test_app_help_is_light():
    out = subprocess.run([sys.executable, "app.py", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0
    for option in ("--presets", "--preset", "--config", "--host", "--port", "--share", "--auth"):
        assert option in out.stdout
    probe = subprocess.run([sys.executable, "-c", "from specplay.hosting import options; options.parse_args(['--help'])"],
                           cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert probe.returncode == 0
    # the main module as vLLM's engine processes re-import it, and the options and entry point: all light
    heavy = subprocess.run([sys.executable, "-c", "import sys, app, specplay.hosting.options, specplay.hosting.server, specplay.page.entry; "
                            "print(sorted(m for m in ('vllm', 'torch', 'gradio') if m in sys.modules))"], cwd=ROOT,
                           capture_output=True, text=True, timeout=30)
    assert heavy.stdout.strip() == "[]", heavy.stderr


def test_app_options_from_config_and_flags(tmp_path, monkeypatch):
    from specplay.hosting import options as opts

    config = tmp_path / "page.yaml"
    config.write_text("presets: [smollm2-ngram, smollm2-self-draft]\nport: 9000\nauth: a:b\n")
    monkeypatch.delenv("PLAYGROUND_AUTH", raising=False)
    options = opts.resolve_options(opts.parse_args(["--config", str(config), "--port", "9001"]))
    assert options.presets == ["smollm2-ngram", "smollm2-self-draft"]
    assert options.port == 9001 and options.auth == ("a", "b")
    monkeypatch.setenv("PLAYGROUND_AUTH", "u:p")
    assert opts.resolve_options(opts.parse_args([])).auth == ("u", "p")
    with pytest.raises(SystemExit):
        opts.resolve_options(opts.parse_args(["--auth", "nopassword"]))
    presets, initial, _ = opts.offered_presets(opts.AppSettings(presets="smollm2-ngram,smollm2-self-draft"))
    assert initial == "smollm2-ngram" and set(presets) == {"smollm2-ngram", "smollm2-self-draft"}
    with pytest.raises(SystemExit, match="unknown preset"):
        opts.offered_presets(opts.AppSettings(presets=["../../etc/passwd"]))


def test_operator_settings_keep_switching_to_a_page_served_to_this_machine(capsys):
    from specplay.hosting.options import AppSettings, settings_from_options

    assert settings_from_options(AppSettings()).allow_switching is True  # 127.0.0.1
    public = settings_from_options(AppSettings(host="0.0.0.0", max_run_seconds=60, queue_size=4))
    assert (public.allow_switching, public.max_run_seconds, public.queue_size) == (False, 60.0, 4)
    assert settings_from_options(AppSettings(host="0.0.0.0", allow_switching=True)).allow_switching
    settings_from_options(AppSettings(share=True))
    assert "--share without --auth" in capsys.readouterr().err


def test_app_py_only_wires_the_entry_point():
    import ast

    tree = ast.parse((ROOT / "app.py").read_text())
    assert not [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    guard = [n for n in tree.body if isinstance(n, ast.If)]
    assert len(guard) == 1 and "__main__" in ast.unparse(guard[0].test)  # vLLM re-imports the main module


@pytest.mark.parametrize("entry", [["app.py"], ["-c", "from specplay.page.entry import main; main()"]])
def test_a_refused_option_ends_the_entry_point_with_its_message_and_status_2(entry):
    out = subprocess.run([sys.executable, *entry, "--auth", "nopassword"], cwd=ROOT, capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 2 and "USER:PASS" in out.stderr


def test_gradios_server_name_and_port_are_honoured_and_flags_win(monkeypatch):
    from specplay.hosting.options import parse_args, resolve_options

    monkeypatch.setenv("GRADIO_SERVER_NAME", "0.0.0.0")
    monkeypatch.setenv("GRADIO_SERVER_PORT", "7999")
    options = resolve_options(parse_args([]))
    assert (options.host, options.port) == ("0.0.0.0", 7999)
    assert resolve_options(parse_args(["--port", "7001"])).port == 7001
    monkeypatch.setenv("GRADIO_SERVER_PORT", "web")
    with pytest.raises(SystemExit, match="--port \\(or GRADIO_SERVER_PORT\\): Input should be a valid integer"):
        resolve_options(parse_args([]))
