"""`specplay launch` on a CPU starts both servers at once (about half the wait: a server's start is mostly
one process at a time), on a GPU one after the other (vLLM profiles the GPU's memory at start). The
servers here are small real HTTP processes that answer /health after a delay, in place of `vllm serve`."""

from __future__ import annotations

import sys

import pytest

from specplay.core.hardware import Hardware

SERVER = """
import http.server, sys, time
time.sleep(float(sys.argv[2]))
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


@pytest.mark.parametrize("hardware, together", [(Hardware(0, None, (0, 1)), True),
                                                (Hardware(1, "NVIDIA H200", (0, 1)), False)])
def test_launch_starts_the_servers_at_once_on_a_cpu_and_in_turn_on_a_gpu(monkeypatch, tmp_path, hardware, together):
    import specplay.run.launch as launch_module
    from specplay.presets.catalog import get_preset

    monkeypatch.setattr(launch_module, "server_supports_per_request_metrics", lambda: True)
    monkeypatch.setattr(launch_module, "LOG_DIR", tmp_path)
    monkeypatch.setattr(launch_module, "server_argv", lambda args, port, per_request=None, served_as=None:
                        [sys.executable, "-c", SERVER, str(port), "0.5"])
    lines: list[str] = []
    servers = launch_module.launch(get_preset("smollm2-ngram"), hardware,
                                   ports={"baseline": 0, "speculative": 0}, log=lines.append, timeout_s=60)
    try:
        events = [line.split(" server")[0] for line in lines if " server" in line]
        assert events[:2] == (["starting the baseline", "starting the speculative"] if together
                              else ["starting the baseline", "baseline"]), lines
        assert sorted(events) == sorted(["starting the baseline", "starting the speculative", "baseline",
                                         "speculative"]), lines
    finally:
        servers.stop(grace_s=2)
    assert all(p.poll() is not None for p in servers.processes.values())
