"""What an engine leaves once shut down (engine/processes.py): no zombie among this process's children and
no vLLM socket file, start after start. Single engines, not a pair: two starts cost one pair start."""

import asyncio
import shutil
import tempfile

from specplay.engine.vllm_engine import Engine
from specplay.presets.catalog import engine_settings, get_preset
from specplay.run.pairs import prepare
from tests.procs import socket_files, zombie_children

STARTS = 2


def test_engine_starts_leave_no_zombie_and_no_socket_file(monkeypatch):
    preset = get_preset("smollm2-ngram")
    prepare(preset)
    # a temp dir of the test's own, here and in the processes the engine spawns (short: a socket path must
    # fit in 107 bytes), so nothing else's files count
    tmp = tempfile.mkdtemp(prefix="sp-")
    monkeypatch.setenv("TMPDIR", tmp)
    monkeypatch.setattr(tempfile, "tempdir", tmp)
    settings = engine_settings(preset)[0]

    async def start_and_stop() -> list[str]:
        engine = Engine(settings)
        await engine.start()
        try:
            return socket_files(tmp)
        finally:
            engine.shutdown()

    try:
        for start in range(STARTS):
            live = asyncio.run(start_and_stop())
            assert live, "vLLM put no socket in the temp dir: the check looks in the wrong place"
            left = {"zombies": zombie_children(), "socket files": socket_files(tmp)}
            assert not any(left.values()), f"start {start} ({len(live)} sockets while it ran) left {left}"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
