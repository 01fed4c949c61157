"""A long soak of the real page: starts `python app.py` on loopback (its own process, as the load test does),
then V visitors (gradio_client sessions, loadtest/soak.py) make N runs between them, every 5th stopped with
Stop once it streams, every 7th abandoned mid-run (the job cancelled and the session closed unread, as a
closed tab leaves it; that visitor comes back in a new session). Every K runs it samples the app's RSS and
its engine processes', their open descriptors and threads, and the bytes the page keeps on disk.

Where the page writes, so that what is counted is the page's alone (the machine may be shared): its cache
is a fresh folder (PLAYGROUND_CACHE) holding only a link to the prepared models, so its history, its
Gradio copies and vLLM's small caches are counted; its temp folder (TMPDIR, which Python, Gradio, vLLM's IPC
sockets and torch all use) is a fresh folder under /tmp. Both go at the end (--keep keeps them).

    python scripts/soak.py --runs 1000 --visitors 4 --max-tokens 32 --out docs/results/cpu-soak-1000.json

Exit status 0 when every run ended with an outcome and nothing grew past the limits (loadtest/soak.py's
`Limits`, explained in docs/benchmarks.md) between the warm-up's sample and the last.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=1000)
    p.add_argument("--visitors", type=int, default=4)
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--sample-every", type=int, default=100)
    p.add_argument("--warmup-runs", type=int, default=200, help="growth is judged from the first sample after these")
    p.add_argument("--stop-every", type=int, default=5, help="every n-th run is stopped with Stop (0: none)")
    p.add_argument("--abandon-every", type=int, default=7, help="every n-th run is abandoned mid-run (0: none)")
    p.add_argument("--preset", default="smollm2-ngram")
    p.add_argument("--session-capacity", type=int, help="the app's --session-capacity (default: the app's)")
    p.add_argument("--models", default=None, help="the prepared models folder (default: <cache>/models)")
    p.add_argument("--ready-timeout", type=float, default=900)
    p.add_argument("--stop-by", metavar="HH:MM", help="hand out no new run after this UTC time (a bounded soak)")
    p.add_argument("--keep", action="store_true", help="keep the page's cache and temp folders")
    p.add_argument("--note", default="", help="a word on the machine (e.g. shared with other work)")
    p.add_argument("--out", required=True, help="the JSON report (its folder is created)")
    return p.parse_args(argv)


def scratch(models: Path) -> dict:
    """A fresh cache (models linked, nothing else) and temp folder for the app."""
    root = Path(tempfile.mkdtemp(prefix="specplay-soak-"))
    (root / "cache").mkdir()
    (root / "tmp").mkdir()
    (root / "cache" / "models").symlink_to(models)
    return {"root": root, "cache": root / "cache", "tmp": root / "tmp"}


def main(argv=None) -> int:
    args = parse_args(argv)
    from loadtest import soak
    import load_test

    from specplay.core.paths import MODELS_DIR

    out = Path(args.out).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    plan = soak.Plan(runs=args.runs, visitors=args.visitors, max_tokens=args.max_tokens, stop_every=args.stop_every,
                     abandon_every=args.abandon_every, sample_every=args.sample_every, warmup_runs=args.warmup_runs)
    dirs = scratch(Path(args.models or MODELS_DIR).resolve())
    report: dict = {"command": shlex.join([Path(sys.executable).name, "scripts/soak.py", *(argv or sys.argv[1:])]),
                    "machine": load_test.machine(args.note), "plan": plan.__dict__, "limits": soak.Limits().__dict__,
                    "preset": args.preset,
                    "measured": {"cache": "the page's PLAYGROUND_CACHE, a fresh folder (models linked, not counted)",
                                 "tmp": "the page's TMPDIR, a fresh folder under /tmp",
                                 "rss": "RSS of app.py and of every process under it (engines), summed"}}
    tmp_before = set(os.listdir(tempfile.gettempdir()))
    log = open(out.with_suffix(".log"), "w")
    app = load_test.start_app(args, log, {"PLAYGROUND_CACHE": str(dirs["cache"]), "TMPDIR": str(dirs["tmp"])},
                              ["--session-capacity", str(args.session_capacity)] if args.session_capacity else [])
    try:
        drive(args, app, plan, dirs, report)
    except Exception as exc:  # still stop the app and write what was measured
        report["exception"] = f"{type(exc).__name__}: {exc}"
    finally:
        report["stop"] = load_test.stop_app(app)
        log.close()
        report["after_stop"] = after_stop(dirs, tmp_before, keep=args.keep)
    passed = report.get("verdict", {}).get("passed", False) and "exception" not in report
    report["passed"] = passed
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(soak.table(report.get("samples", [])))
    print(json.dumps({k: report.get(k) for k in ("verdict", "after_stop", "exception") if k in report}, indent=1))
    print(f"report: {out}")
    return 0 if passed else 1


def drive(args, app, plan, dirs: dict, report: dict) -> None:
    from loadtest import soak
    from loadtest.visitors import close_client
    import load_test

    url = f"http://127.0.0.1:{app.port}/"
    t0 = time.time()
    close_client(load_test.wait_ready(url, app, t0 + args.ready_timeout))
    report["app_ready_s"] = round(time.time() - t0, 1)
    sampler = soak.Sampler(app.pid, [dirs["cache"]], dirs["tmp"])
    run = soak.Soak(url, plan, sampler, on_sample=lambda s: print(json.dumps(s), flush=True),
                    stop_by=utc_today(args.stop_by) if args.stop_by else None)
    started = time.time()
    run.run()
    report["soak_s"] = round(time.time() - started, 1)
    report["samples"] = sampler.samples
    report["records"] = sorted(run.records, key=lambda r: r["run"])
    report["run_seconds"] = seconds_by_kind(run.records)
    report["verdict"] = soak.verdict(sampler.samples, run.records, plan)


def utc_today(hh_mm: str) -> float:
    """HH:MM UTC today, as time.time()."""
    from datetime import datetime, timezone

    hour, minute = map(int, hh_mm.split(":"))
    return datetime.now(timezone.utc).replace(hour=hour, minute=minute, second=0, microsecond=0).timestamp()


def seconds_by_kind(records: list) -> dict:
    """Median seconds of a run, by kind, as the visitor saw it (queue wait included)."""
    from statistics import median

    kinds = sorted({r["kind"] for r in records})
    return {k: round(median(r["seconds"] for r in records if r["kind"] == k), 2) for k in kinds}


def after_stop(dirs: dict, tmp_before: set, keep: bool) -> dict:
    """What the page left once stopped: its temp folder's entries, its cache's bytes, and new entries in the
    machine's /tmp beside them (any process's: the machine may be shared)."""
    from loadtest import soak

    left = sorted(str(p.relative_to(dirs["tmp"])) for p in dirs["tmp"].iterdir())
    found = {"tmp_entries_left": len(left), "tmp_left": left[:50],
             "cache_bytes": soak.tree_bytes(dirs["cache"])[0],
             "other_new_tmp_entries": sorted(set(os.listdir(tempfile.gettempdir())) - tmp_before
                                             - {dirs["root"].name})[:50]}
    if not keep:
        shutil.rmtree(dirs["root"], ignore_errors=True)
    return found


if __name__ == "__main__":
    sys.exit(main())
