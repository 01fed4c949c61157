"""Shared helpers for the page tests: synthetic runs (no engines) and one real app server per test session.

The real server is `python app.py` in a subprocess on a free port, started on first use and stopped at
exit, so the e2e and browser tests share one engine start (~40-80 s on a CPU).
"""

from __future__ import annotations

import atexit
import dataclasses
import itertools
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from specplay.core.events import BASELINE, SPECULATIVE, RunFinished, RunStarted, SpecDecodeCounters, StepEvent
from specplay.core.hardware import CORE_LAYOUT_ENV, DEFAULT_CORE_LAYOUT
from specplay.engine.base import EngineInfo

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "tests" / "artifacts"
APP_PRESET = "smollm2-ngram"
SWITCH_PRESET = "smollm2-self-draft"
LOSING_PRESET = "smollm2-layerskip-draft"  # loses on the CPU: the browser test screenshots its explanation
READY_TIMEOUT_S = 600


def comparison_of(events, k=4, decode=None):
    """A Comparison fed these events (the page's and the CLI's view of a run)."""
    from specplay.run.comparison import Comparison

    c = Comparison(decode=decode, num_speculative_tokens=k)
    for e in events:
        c.add(e)
    return c


# -- synthetic runs ----------------------------------------------------------------------------------------
def synthetic_events(baseline_ids, spec_steps, k=4, dt=0.01, t0=100.0, cancelled=False, error=None):
    """A run's events: the baseline emits one token per step; the speculative engine emits `spec_steps`
    (lists of ids, first = prefill). Counters follow the step sizes as vLLM would count them."""
    events = [RunStarted("run-0", (1, 2, 3), "concurrent")]
    drafts = drafted = accepted = 0
    per_pos = [0] * k
    n = max(len(baseline_ids), len(spec_steps))
    for i in range(n):
        if i < len(baseline_ids):
            last = i == len(baseline_ids) - 1
            events.append(StepEvent(engine=BASELINE, step=i, token_ids=(baseline_ids[i],), text="",
                                    time=t0 + dt * (i + 1), submitted_at=t0, finished=last,
                                    finish_reason="length" if last else None))
        if i < len(spec_steps):
            if i > 0:
                a = len(spec_steps[i]) - 1
                drafts, drafted, accepted = drafts + 1, drafted + k, accepted + a
                for p in range(a):
                    per_pos[p] += 1
            last = i == len(spec_steps) - 1
            counters = SpecDecodeCounters(drafts, drafted, accepted, tuple(per_pos))
            events.append(StepEvent(engine=SPECULATIVE, step=i, token_ids=tuple(spec_steps[i]), text="",
                                    time=t0 + dt * (i + 1), submitted_at=t0, finished=last,
                                    finish_reason="length" if last else None, counters=counters))
    final = SpecDecodeCounters(drafts, drafted, accepted, tuple(per_pos))
    events.append(RunFinished("run-0", t0 + dt * (n + 1), final, cancelled=cancelled, error=error))
    return events


def run_with_acceptance():
    """A four-step speculative run (3, 0 and 3 drafts accepted) beside nine baseline steps, and its Comparison."""
    events = synthetic_events(list(range(9)), [[0], [1, 2, 3], [4], [5, 6, 7, 8]], k=4, dt=0.5)
    return events, comparison_of(events)


class FakeEngine:
    devices: tuple[int, ...] = ()  # engine/base.Backend's: no GPU of its own

    def __init__(self, vocab: dict[int, str] | None = None):
        self.vocab = vocab or {}

    def decode(self, ids) -> str:
        return "".join(self.vocab.get(i, f"<{i}>") for i in ids)

    def is_alive(self) -> bool:
        return True


class FakePair:
    """Stands in for EnginePair on the page (UI development, fast tests): replays synthetic events."""

    def __init__(self, events_for, preset=None, step_delay=0.02, load_s=0.2):
        self.events_for = events_for  # request -> list of events
        self.tag = preset
        self.load_s = load_s  # start()'s four progress stages in all (some 50 pages in the quick tier load one)
        self.engines = {BASELINE: FakeEngine(), SPECULATIVE: FakeEngine()}
        self.status = None
        self.step_delay = step_delay
        self._runs = itertools.count()  # run ids in the order runs start, as EnginePair gives them

    def start(self, progress=None):
        for i in range(4):
            if progress:
                progress(f"fake loading {i}", i / 4)
            time.sleep(self.load_s / 4)

    def stream(self, request, schedule="concurrent", cancel=None):
        submitted = time.monotonic()
        for event in self.events_for(request):
            if cancel is not None and cancel.is_set():
                if not isinstance(event, RunFinished):
                    continue
                event = dataclasses.replace(event, cancelled=True)  # as EnginePair says a stopped run ended
            if isinstance(event, RunStarted):
                event = RunStarted(f"run-{next(self._runs)}", event.prompt_token_ids, event.schedule)
            if isinstance(event, StepEvent):
                time.sleep(self.step_delay)
                event = dataclasses.replace(event, time=time.monotonic(), submitted_at=submitted)
            yield event

    def process_ids(self):
        return {BASELINE: [os.getpid()], SPECULATIVE: [os.getpid()]}

    def engine_info(self):
        return {BASELINE: EngineInfo(async_scheduling=False), SPECULATIVE: EngineInfo(async_scheduling=False)}

    def shutdown(self):
        pass


# -- the real app, once per session ------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class AppServer:
    def __init__(self, preset: str = APP_PRESET, args: list[str] | None = None, log_name: str = "app_server.log"):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        self.log_path = ARTIFACTS / log_name
        self.ready = False  # its engines were ready once (later tests may switch or reload them)
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", GRADIO_ANALYTICS_ENABLED="False")
        env.pop("GRADIO_TEMP_DIR", None)  # the test client's setting: the app chooses its own (in .cache)
        env[CORE_LAYOUT_ENV] = DEFAULT_CORE_LAYOUT  # the suite's in-process pairs run per-engine (conftest)
        # a temp folder of its own (short: vLLM's IPC sockets live there), so a test can see all it leaves
        self.tmp_dir = Path(tempfile.mkdtemp(prefix="specplay-app-"))
        env["TMPDIR"] = str(self.tmp_dir)
        self._log = open(self.log_path, "w")
        # A second preset sharing the target, so switching can be tested (it reloads only one engine).
        offered = f"{preset},{SWITCH_PRESET},{LOSING_PRESET}"
        args = args if args is not None else ["--presets", offered, "--preset", preset]
        self.proc = subprocess.Popen([sys.executable, "app.py", *args, "--port", str(self.port)],
                                     cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        atexit.register(self.stop)

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> "AppServer":
        from gradio_client import Client

        deadline = time.monotonic() + timeout
        client = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"app exited with {self.proc.returncode}; see {self.log_path}")
            try:
                client = client or Client(self.url, verbose=False)
                status = client.predict(api_name="/status")
                if status["state"] == "ready":
                    self.ready = True
                    return self
                if status["state"] == "error":
                    raise RuntimeError(f"engines failed to load: {status['message']}")
            except (ConnectionError, OSError, ValueError):
                client = None
            except Exception as exc:  # httpx errors while the server comes up
                if "engines failed" in str(exc):
                    raise
                client = None
            time.sleep(1.0)
        raise TimeoutError(f"app not ready within {timeout} s; see {self.log_path}")

    def client(self):
        from gradio_client import Client

        return Client(self.url, verbose=False)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()  # app.py shuts both engines down on the way out
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
        self._log.close()
        shutil.rmtree(self.tmp_dir, ignore_errors=True)


_server: AppServer | None = None
_server_lock = threading.Lock()


def start_shared_app() -> AppServer:
    """Start the session's app server if it isn't running, without waiting for its engines: the engine-free
    tests run on the core the engine starts leave idle."""
    global _server
    with _server_lock:
        if _server is None:
            _server = AppServer()
        return _server


def shared_app() -> AppServer:
    """The session's app server, started on first call (whichever test module asks first), once ready."""
    global _server
    server = start_shared_app()
    if server.ready:
        return server
    _after_the_engine_free_tests()
    try:
        return server.wait_ready()
    except Exception:
        with _server_lock:
            server.stop()
            if _server is server:
                _server = None
        raise


def _after_the_engine_free_tests(limit_s: float = 1800) -> None:
    """scripts/test.sh runs the engine-free tests in another process while this one loads the app server, and
    names the file their end writes (PLAYGROUND_TESTS_AFTER): the page's tests wait for it, so they never share
    the cores with those (beside them, both took minutes longer)."""
    flag = os.environ.get("PLAYGROUND_TESTS_AFTER")
    deadline = time.monotonic() + limit_s
    while flag and not Path(flag).exists() and time.monotonic() < deadline:
        time.sleep(0.5)


def stop_shared_app() -> None:
    """Stop the app server (if running) so engines started elsewhere get the cores to themselves."""
    global _server
    with _server_lock:
        if _server is not None:
            _server.stop()
            _server = None


def engine_core_pids(proc: subprocess.Popen) -> list[int]:
    """The app's vLLM engine-core processes, oldest first (the baseline engine starts first and stays when a
    switch replaces only the speculative one). /status doesn't show process ids to visitors."""
    import psutil

    cores = [c for c in psutil.Process(proc.pid).children(recursive=True)
             if "EngineCore" in " ".join(_cmdline(c))]
    return [c.pid for c in sorted(cores, key=lambda c: c.create_time())]


def _cmdline(process) -> list[str]:
    import psutil

    try:
        return process.cmdline() or [process.name()]
    except psutil.Error:
        return []
