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
    # by network address (loadtest/scenarios.py): all behind one address, then each its own, one report each
    python scripts/load_test.py --visitors 50 --max-tokens 16 --addresses 1,50 \\
        --out 'docs/results/cpu-load-50-{scenario}.json'
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
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

# the app's side (scripts/soak.py uses these through this module too)
from loadtest.app import (cpu_seconds, cpu_used, engine_core_pids, machine, solo_phase,  # noqa: E402,F401
                          start_app, stop_app, wait_ready)
from loadtest import by_address  # noqa: E402  (--addresses)


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
    p.add_argument("--addresses", help="N[,N...]: the visitors come from N network addresses (1: all behind one "
                   "NAT), through a proxy the page trusts (--trusted-proxies 127.0.0.1, X-Forwarded-For per "
                   "visitor); a refused visitor runs again --retry-s later until served; one report per N, "
                   "--out naming it with {scenario} (one-address, addresses)")
    p.add_argument("--retry-s", type=float, default=3.0, help="with --addresses: seconds before a refused "
                   "visitor presses Run again")
    p.add_argument("--ready-timeout", type=float, default=900, help="seconds for the engines to load (each time)")
    p.add_argument("--deadline-s", type=float, default=1800, help="seconds for the visitors' runs to finish")
    p.add_argument("--note", default="", help="a word on the machine (e.g. shared with other work)")
    p.add_argument("--log", help="the app's output (default: next to --out, .log)")
    p.add_argument("--out", required=True, help="the JSON report (its folder is created)")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    out = Path(args.out.replace("{scenario}", "by-address")).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    log_path = Path(args.log).resolve() if args.log else out.with_suffix(".log")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    report: dict = {
        "command": shlex.join([Path(sys.executable).name, "scripts/load_test.py", *(argv or sys.argv[1:])]),
        "environment": {k: os.environ[k] for k in ("PYTHONPATH", "VLLM_USE_FLASHINFER_SAMPLER",
                                                   "PLAYGROUND_FORCE_CPU", "PLAYGROUND_CPU_EAGER", "OMP_NUM_THREADS")
                        if k in os.environ},
        "machine": machine(args.note),
        "settings": {"visitors": args.visitors, "max_tokens": args.max_tokens, "preset": args.preset,
                     "schedule": args.schedule, "temperature": 0.0, "kill": args.kill,
                     "spacing_ms": args.spacing_ms, "addresses": args.addresses, "retry_s": args.retry_s},
        "checks": {},
    }
    log = open(log_path, "w")
    app = start_app(args, log, extra_args=["--trusted-proxies", "127.0.0.1"] if args.addresses else None)
    report["app_pid"] = app.pid
    # The visitors stand for browsers on other machines: on a small shared host, keep this process from
    # being starved by the engines (their workers busy-wait between steps), or its clicks and clocks lag.
    # The app keeps its normal priority (it was started before this).
    try:
        report["visitors_nice"] = os.nice(-10)
    except OSError:
        report["visitors_nice"] = os.nice(0)
    try:
        (by_address.run_test if args.addresses else run_test)(args, app, report)
    except Exception as exc:  # still stop the app and write what was measured
        report["exception"] = f"{type(exc).__name__}: {exc}"
    finally:
        report["stop"] = stop_app(app)
        log.close()
        # everything the app started is gone on its own within 30 s of SIGTERM (when: stop.all_gone_s)
        report["checks"]["no_process_left_after_sigterm"] = not report["stop"]["killed_after_30s"]
    passed = True
    for path, one in (by_address.reports(report, args.out) if args.addresses else [(out, report)]):
        passed = write_report(path, one) and passed
    if "exception" in report:
        print(f"load_test: {report['exception']}", file=sys.stderr)
    print(f"app log: {log_path}")
    return 0 if passed else 1


def write_report(path: Path, report: dict) -> bool:
    report["passed"] = bool(report["checks"]) and all(report["checks"].values()) and "exception" not in report
    path.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: report[k] for k in ("checks", "passed") if k in report} | {
        "summary": {k: v for k, v in (report.get("load") or {}).items() if k != "fifo"}}, indent=2))
    print(f"report: {path}")
    return report["passed"]


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


if __name__ == "__main__":
    sys.exit(main())
