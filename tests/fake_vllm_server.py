"""A small OpenAI-compatible server on loopback that answers like `vllm serve` (GET /health, /v1/models, /metrics;
POST /tokenize, /v1/completions streamed as SSE), for remote-mode tests that need real sockets but no engine.
Its token pacing is set on the server side (each chunk sent at a fixed offset from the request's arrival), so
two of them stream at one rate whatever the client does."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SPEC_METRICS = ('vllm:spec_decode_num_drafts_total{engine="0",model_name="target"} 0.0\n'
                'vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="target"} 0.0\n'
                'vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="target"} 0.0\n')


@dataclass
class Behaviour:
    """How the server answers; the test may change it while the server runs."""

    spec: bool = False  # /metrics carries spec-decode counters (a speculative config)
    texts: tuple[str, ...] = ("a", "b", "c")  # one chunk each
    send_token_ids: bool = True  # vLLM's `return_token_ids`; other servers send text only
    first_id: int = 10  # chunk i carries token id first_id + i
    offsets_s: tuple[float, ...] | None = None  # chunk i sent this long after the request came; None: at once
    metrics_delay_s: float = 0.0  # how long GET /metrics takes
    metrics_text: str | None = None  # what GET /metrics answers (None: spec-decode counters at 0, if `spec`)
    healthy: bool = True  # GET /health answers 200 (else 503)
    # called before a GET /metrics that comes while a completion streams is answered (a test holds it there)
    metrics_hook: Callable[[], None] | None = None
    streaming: int = 0  # completions being streamed now
    requests: list = field(default_factory=list)  # (path, monotonic time) of every request, in order


class _Handler(BaseHTTPRequestHandler):
    """Answers as `vllm serve` would; `behaviour` is set per server (start) and read on every request."""

    behaviour: Behaviour

    def log_message(self, *args):
        pass

    def _send(self, body: str, kind="application/json", code=200):
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.behaviour.requests.append((self.path, time.monotonic()))
        if self.path == "/health":
            self._send("", code=200 if self.behaviour.healthy else 503)
        elif self.path == "/v1/models":
            self._send(json.dumps({"data": [{"id": "target", "root": "/models/t", "max_model_len": 512}]}))
        elif self.path == "/metrics":
            time.sleep(self.behaviour.metrics_delay_s)
            if self.behaviour.streaming and self.behaviour.metrics_hook is not None:
                self.behaviour.metrics_hook()
            text = SPEC_METRICS if self.behaviour.spec else "vllm:num_requests_running 0.0\n"
            self._send(text if self.behaviour.metrics_text is None else self.behaviour.metrics_text, "text/plain")
        else:
            self._send("{}", code=404)

    def do_POST(self):
        arrived = time.monotonic()
        self.behaviour.requests.append((self.path, arrived))
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path == "/tokenize":
            self._send(json.dumps({"tokens": [1, 2, 3] if "prompt" in body else [5, 6, 7]}))
            return
        if self.path == "/detokenize":
            self._send(json.dumps({"prompt": "".join(f"<{t}>" for t in body["tokens"])}))
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.behaviour.streaming += 1
        try:
            self._stream(self.behaviour.texts, arrived)
        finally:
            self.behaviour.streaming -= 1

    def _stream(self, texts, arrived):
        for i, text in enumerate(texts):
            if self.behaviour.offsets_s is not None:
                time.sleep(max(0.0, arrived + self.behaviour.offsets_s[i] - time.monotonic()))
            choice = {"index": 0, "text": text,
                      "finish_reason": "length" if i == len(texts) - 1 else None}
            if self.behaviour.send_token_ids:
                choice["token_ids"] = [self.behaviour.first_id + i]
            self._event({"choices": [choice]})
        self._event({"choices": [], "usage": {"completion_tokens": len(texts)}})
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True

    def _event(self, event: dict):
        self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
        self.wfile.flush()


def start(behaviour: Behaviour, port: int = 0):
    """(server, base URL) on `port` (0: any free one); `stop(server)` ends it. HTTP/1.0: one connection a
    request, so a stopped server answers nothing more, as a killed one."""
    handler = type("Handler", (_Handler,), {"behaviour": behaviour})
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def stop(server) -> None:
    """End the server and close its socket: what a killed `vllm serve` leaves (connections refused)."""
    server.shutdown()
    server.server_close()
