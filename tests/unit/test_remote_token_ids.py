"""Remote mode against a server that streams text but no token ids (another OpenAI-compatible server, or a
vLLM older than `return_token_ids`): identity is checked on token ids, so such a server can't be judged,
and says so. It once made every run "✓ Identical, the same 0 tokens", whatever the texts. Two small real
HTTP servers on loopback that stream OpenAI completions (different texts on each side), no engine."""

from __future__ import annotations

import pytest

from specplay.core.events import BASELINE, GenerationRequest
from specplay.engine.vllm_engine import EngineStartError
from specplay.run.remote import open_remote_pair
from tests import fake_vllm_server
from tests.ui_fixtures import comparison_of


@pytest.fixture
def text_only_servers():
    made = []
    for spec, texts in ((False, ("The", " cat", " sat")), (True, ("A", " dog", " ran"))):
        made.append(fake_vllm_server.start(fake_vllm_server.Behaviour(spec=spec, texts=texts,
                                                                      send_token_ids=False)))
    yield [url for _, url in made]
    for server, _ in made:
        server.shutdown()


def test_servers_without_token_ids_fail_the_load_saying_why(text_only_servers):
    pair = open_remote_pair(*text_only_servers, start_timeout_s=5)
    try:
        with pytest.raises(EngineStartError, match="warm-up failed") as failure:
            pair.start()
        assert f"the {BASELINE} server streams text without token ids" in str(failure.value)
        assert "127.0.0.1" not in str(failure.value)  # the operator's addresses stay off the page
        assert pair.status.state == "error"
    finally:
        pair.shutdown()


@pytest.mark.parametrize("schedule", ["sequential", "concurrent"])
def test_a_run_on_them_is_never_called_identical(text_only_servers, schedule):
    from specplay.cli.report import verdict
    from specplay.run.result import RunResult

    pair = open_remote_pair(*text_only_servers, start_timeout_s=5, warmup=False)
    pair.start()
    try:
        c = comparison_of(pair.run(GenerationRequest(prompt="hi", max_tokens=3), schedule=schedule))
        assert not c.identical
        assert "without token ids" in c.finished.error, c.finished.error
        result = RunResult.of(c)
        assert not result.identical and not result.model_dump(mode="json")["identical"]
        assert verdict(result).startswith("ERROR: ") and "IDENTICAL" not in verdict(result)
    finally:
        pair.shutdown()
