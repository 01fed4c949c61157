"""Remote mode against servers that misbehave: small HTTP servers on loopback that answer like `vllm serve`
until they don't (slow, an error mid-stream, another tokenizer). No engines: the failures are the point."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from specplay.core.events import BASELINE, SPECULATIVE, GenerationRequest
from specplay.engine.vllm_engine import EngineStartError
from specplay.run.remote import open_remote_pair
from tests.ui_fixtures import comparison_of

SPEC_METRICS = 'vllm:spec_decode_num_drafts_total{engine="0",model_name="target"} 0.0\n'


def fake_server(behaviour: str, spec: bool, tokens=(1, 2, 3)):
    """A server answering /health, /v1/models, /metrics and /tokenize; its completions stream 3 tokens, or,
    after the first, stall ("slow") or break with an error chunk ("error")."""

    completions = []  # the first (the pair's warm-up) always succeeds

    class Handler(BaseHTTPRequestHandler):
        bodies: list = []

        def log_message(self, *args):
            pass

        def _send(self, body: str, kind="application/json"):
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body.encode())))
            self.end_headers()
            self.wfile.write(body.encode())

        def do_GET(self):
            if self.path == "/health":
                self._send("")
            elif self.path == "/v1/models":
                self._send(json.dumps({"data": [{"id": "target", "root": "/models/t", "max_model_len": 512}]}))
            elif self.path == "/metrics":
                self._send(SPEC_METRICS if spec else "vllm:num_requests_running 0.0\n", "text/plain")

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if self.path == "/tokenize":
                self._send(json.dumps({"tokens": list(tokens) if "prompt" in body else [5, 6, 7]}))
                return
            completions.append(body)
            Handler.bodies.append(body)
            now = behaviour if len(completions) > 1 else "ok"
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            if now == "slow":
                time.sleep(3)
            for i in range(3):
                last = i == 2 and now == "ok"
                chunk = {"choices": [{"text": f"t{i}", "token_ids": [10 + i], "finish_reason": "length" if last else None}]}
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
                if now == "error" and i == 1:
                    self.wfile.write(b'data: {"error": {"message": "CUDA out of memory", "code": 500}}\n\n')
                    return
            self.wfile.write(b'data: {"choices": [], "usage": {"completion_tokens": 3}}\n\ndata: [DONE]\n\n')

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    server.bodies = Handler.bodies  # what the client sent, for the tests to read
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@pytest.fixture
def servers(request):
    made = []

    def make(spec_behaviour="ok", spec_tokens=(1, 2, 3)):
        b, b_url = fake_server("ok", spec=False)
        s, s_url = fake_server(spec_behaviour, spec=True, tokens=spec_tokens)
        made.extend([b, s])
        make.speculative = s
        return b_url, s_url

    yield make
    for server in made:
        server.shutdown()


def _run(pair, schedule="concurrent"):
    return comparison_of(pair.run(GenerationRequest(prompt="hi", max_tokens=3), schedule=schedule))


@pytest.mark.parametrize("behaviour,detail", [("slow", "ReadTimeout"), ("error", "CUDA out of memory")])
def test_a_failing_server_is_named_and_its_partner_finishes(servers, behaviour, detail):
    pair = open_remote_pair(*servers(behaviour), timeout_s=1.0, start_timeout_s=5)
    pair.start()
    try:
        c = _run(pair)
        assert c.finished.error and "speculative server" in c.finished.error and detail in c.finished.error
        assert "127.0.0.1" not in c.finished.error  # the operator's addresses stay off the page
        assert c.baseline.finished and c.baseline.token_ids == [10, 11, 12]  # the other pane finishes
        assert _run(pair, "sequential").baseline.token_ids == [10, 11, 12]  # the baseline serves the next run
    finally:
        pair.shutdown()


def test_servers_with_different_tokenizers_are_refused_before_any_run(servers):
    pair = open_remote_pair(*servers(spec_tokens=(1, 2, 4)), start_timeout_s=5)
    with pytest.raises(EngineStartError, match="tokenize text differently"):
        pair.start()
    assert pair.status.state == "error"
    pair.shutdown()


def test_a_server_that_never_answers_health_times_out_naming_it():
    pair = open_remote_pair("http://127.0.0.1:9", "http://127.0.0.1:9", start_timeout_s=1.5)
    with pytest.raises(EngineStartError, match=f"{BASELINE} server did not answer /health within 2 s"):
        pair.start()
    pair.shutdown()


def test_a_healthy_pair_of_fakes_runs_identically(servers):
    pair = open_remote_pair(*servers(), start_timeout_s=5)
    pair.start()
    try:
        salted = pair.run(GenerationRequest(prompt="hi", max_tokens=3, cache_salt="s1"), schedule="sequential")
        assert comparison_of(salted).identical
        assert servers.speculative.bodies[-1]["cache_salt"] == "s1" and "prompt" in servers.speculative.bodies[-1]
        c = _run(pair, "sequential")
        assert c.identical and c.speculative.token_ids == [10, 11, 12] and not c.finished.error
        assert pair.engine_info()[SPECULATIVE].backend == "remote"
    finally:
        pair.shutdown()
