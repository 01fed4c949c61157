"""The app right after a reload (an engine core killed with SIGKILL): the old engines' processes reaped (no
zombies until exit), their vLLM sockets gone, and SIGTERM ends the app well within Docker's 10 s. Its own
app (one preset), before the shared one starts loading; test_app_e2e.py times a SIGTERM after runs."""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.error
import urllib.request

import pytest

from tests.procs import socket_files, zombie_children
from tests.ui_fixtures import AppServer, engine_core_pids

STOP_BOUND_S = 10.0  # docker stop's SIGKILL comes 10 s after its SIGTERM


def health(server: AppServer) -> str | None:
    try:
        with urllib.request.urlopen(f"{server.url}health", timeout=5) as response:
            return json.load(response)["status"]
    except urllib.error.HTTPError as error:  # 503 while loading or recovering
        return json.load(error)["status"]
    except (OSError, ValueError):
        return None


def wait_for(server: AppServer, wanted: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert server.proc.poll() is None, f"the app exited; see {server.log_path}"
        if health(server) == wanted:
            return
        time.sleep(1)
    pytest.fail(f"/health not {wanted!r} within {timeout} s; see {server.log_path}")


@pytest.mark.own_engines  # before the shared app server starts loading in the background
def test_after_a_reload_no_zombie_no_stale_socket_and_sigterm_exits_within_10_s():
    server = AppServer(args=["--presets", "smollm2-ngram"], log_name="app_stop.log")
    try:
        server.wait_ready()
        old = engine_core_pids(server.proc)
        assert len(old) == 2
        os.kill(old[0], signal.SIGKILL)
        wait_for(server, "recovering", 60)
        wait_for(server, "ok", 600)
        assert not set(engine_core_pids(server.proc)) & set(old)  # both engines are new
        assert zombie_children(server.proc.pid) == []  # the old engines' processes were reaped
        live = len(socket_files(server.tmp_dir))
        started = time.monotonic()
        server.proc.terminate()
        code = server.proc.wait(timeout=60)
        took = time.monotonic() - started
        print(f"SIGTERM to exit right after a reload: {took:.2f} s")
        assert code == 0 and took < STOP_BOUND_S, (code, took)
        assert socket_files(server.tmp_dir) == [], f"{live} sockets while serving"
    finally:
        server.stop()
