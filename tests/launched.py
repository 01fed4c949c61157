"""`specplay launch` as a user runs it, for the remote tests (tests/engines/test_remote.py): its two `vllm
serve` processes and the page on them. The launch can start early (`start_early`), beside the last
in-process tests before the remote ones: a server's start is mostly one process at a time importing (a core
idle), and those tests leave a core idle too (2026-12-07: 28 of 82 core-seconds idle in the own-pair test,
then 51 s waiting on the launch). The remote module's fixture takes the early one, or starts it then."""

from __future__ import annotations

import subprocess
import sys

from specplay.core.events import BASELINE, SPECULATIVE

_early: "Launched | None" = None


def start_early() -> None:
    """Start the launch now (once) with the suite's core layout: `take()` hands it to the remote tests."""
    global _early
    if _early is None:
        _early = _started()


def take() -> "Launched":
    """The launch started early, else one started now; either way the caller owns it (and stops it)."""
    global _early
    launched, _early = _early or _started(), None
    return launched


def stop_early() -> None:
    """A launch started early that no test took (the remote tests deselected or failed before it): stopped."""
    global _early
    if _early is not None:
        _early.stop()
        _early = None


def _started() -> "Launched":
    from tests.conftest import suite_pair_layout
    from tests.ui_fixtures import free_port, stop_shared_app

    stop_shared_app()
    with suite_pair_layout():  # what the launched servers' workers get: a core each (conftest says why)
        return Launched(free_port(), (free_port(), free_port()))


class Launched:
    """`specplay launch` running: its output so far (read by a thread, so the page never blocks on a full
    pipe), the two servers' URLs and processes, the page's URL, and every process it started."""

    def __init__(self, page_port: int, server_ports: tuple[int, int]):
        import threading

        self.page_url = f"http://127.0.0.1:{page_port}/"
        self.urls = {BASELINE: f"http://127.0.0.1:{server_ports[0]}", SPECULATIVE: f"http://127.0.0.1:{server_ports[1]}"}
        self.proc = subprocess.Popen([sys.executable, "-m", "specplay", "launch", "--preset", "smollm2-ngram",
                                      "--port", str(page_port), "--server-ports", ",".join(map(str, server_ports))],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        self.lines: list[str] = []
        threading.Thread(target=lambda: self.lines.extend(self.proc.stdout), daemon=True).start()
        self.servers: dict = {}
        self.family: list[int] = []

    def wait_ready(self, timeout: float = 600.0) -> "Launched":
        import time

        import httpx
        import psutil

        deadline, health = time.monotonic() + timeout, None
        while time.monotonic() < deadline and health != 200:
            assert self.proc.poll() is None, "".join(self.lines[-40:])
            try:
                health = httpx.get(f"{self.page_url}health", timeout=5).status_code
            except httpx.HTTPError:
                pass
            time.sleep(1)
        assert health == 200, "".join(self.lines[-40:])  # the page's pair (the two servers) is ready
        children = psutil.Process(self.proc.pid).children(recursive=True)
        servers = [p for p in children if "vllm.entrypoints.openai.api_server" in " ".join(p.cmdline())]
        ports = {p.pid: next(c.laddr.port for c in p.net_connections("tcp") if c.status == "LISTEN") for p in servers}
        self.servers = {role: next(p for p in servers if f":{ports[p.pid]}" in url) for role, url in self.urls.items()}
        self.family = [self.proc.pid] + [p.pid for p in children]
        return self

    def pids(self) -> dict[str, list[int]]:
        return {role: [p.pid] for role, p in self.servers.items()}

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=60)
