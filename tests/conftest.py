"""Test set-up: real vLLM CPU engines on the offline model, one pair alive at a time.

Engines take 30-90 s to start on a small CPU, so each preset's pair is started once per test session
(and the previous one shut down first: two pairs would fight over the same cores).
"""

import os

# Before anything imports torch: one OpenMP thread per process (each engine is pinned to its own core).
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("PLAYGROUND_FORCE_CPU", "1")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
# What gradio_client downloads in the tests goes under tests/artifacts, so a test can tell that the app
# server (which doesn't inherit this) writes nothing to /tmp/gradio.
os.environ.setdefault("GRADIO_TEMP_DIR", os.path.join(os.path.dirname(__file__), "artifacts", "client-downloads"))

import pytest  # noqa: E402


class PairPool:
    def __init__(self):
        self.name = None
        self.pair = None

    def get(self, preset_name: str):
        from playground.engine_pair import pair_for_preset
        from playground.presets import get_preset

        if self.name != preset_name:
            self.close()
            from tests.ui_fixtures import stop_shared_app

            stop_shared_app()
            pair = pair_for_preset(get_preset(preset_name))
            pair.start()
            self.name, self.pair = preset_name, pair
        return self.pair

    def close(self):
        if self.pair is not None:
            self.pair.shutdown()
        self.name = self.pair = None


@pytest.fixture(scope="session")
def pair_pool():
    pool = PairPool()
    yield pool
    pool.close()


@pytest.fixture(scope="module")
def app(pair_pool):
    """The real `python app.py` server (smollm2-ngram), shared by the UI test modules."""
    from tests.ui_fixtures import shared_app

    pair_pool.close()  # one set of engines on the cores at a time
    return shared_app()
