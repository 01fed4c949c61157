"""Remote mode: a server that dies while nobody runs is noticed by the page's watcher (a GET /health every
few seconds), shown in the status ("recovering", the engine named) and reconnected once it is back; it was
found only by the next visitor's failed run. Two small OpenAI-compatible servers on loopback, no engine; the
test waits for each state in turn."""

from __future__ import annotations

import pytest

from specplay.run.remote import open_remote_pair
from tests import fake_vllm_server
from tests.public_page_fixtures import PRESET, _wait

GUARD_S = 30  # a bound on each wait, so a broken watcher fails the test rather than hanging it


@pytest.fixture
def servers():
    sides = {role: fake_vllm_server.start(fake_vllm_server.Behaviour(spec=role == "speculative"))
             for role in ("baseline", "speculative")}
    yield sides
    for server, _ in sides.values():
        fake_vllm_server.stop(server)


def test_a_server_that_dies_while_idle_is_noticed_shown_and_reconnected(servers):
    from specplay.hosting.health import health_response
    from specplay.hosting.manager import PairManager
    from specplay.presets.catalog import get_preset

    (_, b_url), (_, s_url) = servers["baseline"], servers["speculative"]
    pairs = []

    def factory(preset, hardware=None, log=print):
        pairs.append(open_remote_pair(b_url, s_url, preset, start_timeout_s=GUARD_S))
        return pairs[-1]

    manager = PairManager({PRESET: get_preset(PRESET)}, PRESET, pair_factory=factory, log=lambda *a: None)
    try:
        manager.load(PRESET)
        assert _wait(lambda: manager.status().state == "ready", GUARD_S)
        manager.watch(interval_s=0.1)
        port = int(b_url.rsplit(":", 1)[1])
        fake_vllm_server.stop(servers["baseline"][0])  # killed; nobody is running

        assert _wait(lambda: manager.status().recovering, GUARD_S), manager.status()
        status = manager.status()
        assert status.state == "loading" and status.message.startswith("the baseline engine stopped"), status
        assert manager.pair is None  # Run is off until the server is back
        assert health_response(status) == (503, {"status": "recovering", "preset": PRESET})

        servers["baseline"] = fake_vllm_server.start(fake_vllm_server.Behaviour(), port=port)  # restarted
        assert _wait(lambda: manager.status().state == "ready", GUARD_S), manager.status()
        assert manager.pair is pairs[-1] and len(pairs) == 2
        assert health_response(manager.status())[0] == 200 and not manager.status().recovering
    finally:
        manager.shutdown()
