"""What an engine leaves once shut down (engine/processes.py): no zombie among this process's children and
no vLLM socket file. One eager start here; test_engines.py's compiled engine checks the same after its own."""

import asyncio

from specplay.engine.vllm_engine import Engine
from specplay.presets.catalog import engine_settings, get_preset
from specplay.run.pairs import prepare
from tests.procs import left_behind, private_temp_dir, socket_files


def test_an_engine_start_leaves_no_zombie_and_no_socket_file(monkeypatch):
    preset = get_preset("smollm2-ngram")
    prepare(preset)
    settings = engine_settings(preset)[0]

    async def start_and_stop(tmp) -> list[str]:
        engine = Engine(settings)
        await engine.start()
        try:
            return socket_files(tmp)
        finally:
            engine.shutdown()

    with private_temp_dir(monkeypatch) as tmp:
        live = asyncio.run(start_and_stop(tmp))
        assert live, "vLLM put no socket in the temp dir: the check looks in the wrong place"
        assert not left_behind(tmp), f"{len(live)} sockets while it ran; left {left_behind(tmp)}"
