"""Issue 44, 4 and 5: what anonymous clients flooding the page's direct (unqueued) handlers cost a visitor, on
a page already serving (its real CPU engines, or the stand-in page). A visitor's run (gradio_client, the
page's /run) is timed alone, then beside `--connections` connections that post a value outside a component's
choices (~100 bytes; `--forged run-json`: issue 36's 41 kB run JSON) to every unqueued handler in turn, each call under a new invented session. The flood
says X-Forwarded-For, so a page served on loopback counts it as a remote client (a direct client on this
machine is the operator: hosting/guard.counted_address); the visitor doesn't. Reported: the run times and
their ratio (medians), the flood's calls by answer, the app's log bytes per refused call (a flood alone, as
the visitor's runs log lines of their own), and the app's memory (RSS) before, right after and 10 s after.
The flood's clients run in a process of their own at nice 19 (they share the machine's cores with the page). Results go under `--label` in `--out` (kept beside the others).

    PLAYGROUND_FORCE_CPU=1 PLAYGROUND_CPU_EAGER=1 OMP_NUM_THREADS=1 .venv/bin/python app.py --port 7861 > app.log 2>&1 &
    .venv/bin/python benchmarks/doors.py --url http://127.0.0.1:7861 --pid $! --log app.log --label after
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import sys
import threading
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PROMPT = "Rewrite this sentence in plain words: the committee has reached a decision on the budget."
FORGED = "not one of the choices"
STEP = {"start": 1, "tokens": 5, "accepted": 4, "drafted": 4, "proposed": [250, 251, 252, 253],
        "target_token": 254, "seconds": 0.01}
# issue 36's forged run JSON (loadtest/forged.py): 41 kB a value
RUN_JSON = {"run_id": "x", "speedup": 9.9, "preset": "smollm2-ngram",
            "speculative": {"token_ids": list(range(240, 6240)), "step_detail": [STEP] * 1000}}
PAYLOADS = {"choice": FORGED, "run-json": RUN_JSON}
REMOTE = {"X-Forwarded-For": "198.51.100.7"}  # a documentation address (RFC 5737)


def unqueued(url: str) -> list[tuple[int, int]]:
    """(fn_index, number of inputs) of every unqueued handler with a Python function, from the page's config."""
    import httpx

    config = httpx.get(f"{url}/config", timeout=30).json()
    return [(d["id"], len(d.get("inputs") or [])) for d in config["dependencies"]
            if d.get("queue") is False and d.get("backend_fn", True)]


def flood(url: str, handlers, stop, worker: int, codes: Counter, lock: threading.Lock, value=FORGED) -> None:
    import httpx

    n = 0
    with httpx.Client(timeout=60, headers=REMOTE) as client:
        while not stop.is_set():
            for index, inputs in handlers:
                n += 1
                try:
                    code = client.post(f"{url}/gradio_api/run/predict", json={
                        "data": [value] * inputs, "fn_index": index, "session_hash": f"flood-{worker}-{n}",
                        "event_data": None, "trigger_id": None}).status_code
                except httpx.HTTPError:
                    code = "error"
                with lock:
                    codes[code] += 1


def flood_process(url: str, handlers, connections: int, stop, out, value=FORGED) -> None:
    """The flood's clients, in a process of their own at the lowest priority: an attacker's client runs on
    its own machine; here it shares the 2 cores, and a client looping on quick 429s would otherwise take
    them from the page it is measured against."""
    os.nice(19)
    codes, lock = Counter(), threading.Lock()
    threads = [threading.Thread(target=flood, args=(url, handlers, stop, w, codes, lock, value), daemon=True)
               for w in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out.put(dict(codes))


class Flood:
    """`connections` flooding connections in a niced process, from `with` to its end; `codes` after."""

    def __init__(self, url: str, handlers, connections: int, value=FORGED):
        context = multiprocessing.get_context("spawn")
        self.stop, self.out = context.Event(), context.Queue()
        self.process = context.Process(target=flood_process, args=(url, handlers, connections, self.stop, self.out,
                                                                              value))
        self.codes: dict = {}

    def __enter__(self):
        self.process.start()
        self.started = time.monotonic()
        return self

    def __exit__(self, *_):
        self.stop.set()
        self.codes = {str(k): v for k, v in sorted(self.out.get(timeout=120).items(), key=str)}
        self.seconds = round(time.monotonic() - self.started, 1)
        self.process.join(timeout=30)


def timed_run(c, max_tokens: int) -> float:
    t = time.monotonic()
    c.predict(PROMPT, max_tokens, 0.0, "sequential", api_name="/run")
    return round(time.monotonic() - t, 2)


def measure(args) -> dict:
    import psutil

    from loadtest.app import machine
    from loadtest.visitors import client, close_client

    c = client(args.url)
    app = psutil.Process(args.pid)
    rss = lambda: round(sum(p.memory_info().rss for p in [app]) / 2 ** 20)  # noqa: E731 (the app process only)
    log = Path(args.log)
    report = {"machine": machine(), "url": args.url, "max_tokens": args.max_tokens, "forged": args.forged,
              "connections": args.connections}
    try:
        deadline = time.monotonic() + 900
        while c.predict(api_name="/status")["state"] != "ready":  # the engines load behind the page
            if time.monotonic() > deadline:
                raise TimeoutError("the engines were not ready in 15 minutes")
            time.sleep(3)
        timed_run(c, args.max_tokens)  # warm
        report["alone_s"] = [timed_run(c, args.max_tokens) for _ in range(args.runs)]
        report["rss_mib"] = {"before_flood": rss()}
        handlers = unqueued(args.url)
        with Flood(args.url, handlers, args.connections, PAYLOADS[args.forged]) as beside:
            time.sleep(2)
            report["beside_flood_s"] = [timed_run(c, args.max_tokens) for _ in range(args.runs)]
        report["flood_beside_runs"] = {"seconds": beside.seconds, "calls": beside.codes}
        report["rss_mib"]["right_after_flood"] = rss()
        time.sleep(2)
        log_before = log.stat().st_size  # the log of a flood alone: the visitor's runs log their own lines
        with Flood(args.url, handlers, args.connections, PAYLOADS[args.forged]) as alone:
            time.sleep(args.log_window_s)
        time.sleep(1)
        logged = log.stat().st_size - log_before
        refused = sum(v for k, v in alone.codes.items() if k != "200")
        report["flood_alone"] = {"seconds": alone.seconds, "calls": alone.codes, "log_bytes": logged,
                                 "log_bytes_per_refused_call": round(logged / max(1, refused), 1)}
        time.sleep(10)
        report["rss_mib"]["10s_after_flood"] = rss()
        report["slowdown"] = round(sorted(report["beside_flood_s"])[len(report["beside_flood_s"]) // 2]
                                   / sorted(report["alone_s"])[len(report["alone_s"]) // 2], 2)
    finally:
        close_client(c)
    return report


def stop_after_reload(args) -> dict:
    """An engine core killed (SIGKILL), the page's reload waited for, then a run of 256 tokens started and,
    once it streams, Stop pressed as the browser does (a direct call of the `stop` handler under the run's
    session): how long Stop's request took to be answered, and the run to end after it."""
    import signal

    import httpx

    from loadtest import visitors as vis
    from loadtest.app import engine_core_pids

    c = vis.client(args.url)
    try:
        os.kill(engine_core_pids(args.pid)[-1], signal.SIGKILL)
        killed = time.monotonic()
        while c.predict(api_name="/status")["state"] == "ready" and time.monotonic() - killed < 60:
            time.sleep(0.5)
        while c.predict(api_name="/status")["state"] != "ready":
            if time.monotonic() - killed > 900:
                raise TimeoutError("the engines were not back in 15 minutes")
            time.sleep(2)
        reloaded = round(time.monotonic() - killed, 1)
        config = httpx.get(f"{args.url}/config", timeout=30).json()
        stop_index = next(d["id"] for d in config["dependencies"] if d.get("api_name") == "stop")
        flood = Flood(args.url, unqueued(args.url), args.connections, PAYLOADS[args.forged]) if args.with_flood \
            else contextlib.nullcontext()
        with flood:
            return {"reload_s": reloaded, "flood": args.forged if args.with_flood else None,
                    **_stop_mid_run(args, c, stop_index)}
    finally:
        vis.close_client(c)


def _stop_mid_run(args, c, stop_index: int) -> dict:
    import httpx

    from loadtest import visitors as vis

    job = c.submit(PROMPT, 256, 0.0, "sequential", api_name="/run")
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not job.done():
        updates = job.outputs()
        if updates and vis.tokens_so_far(updates[-1][vis.API_OUTPUTS.index("result")], "baseline") >= 1:
            break
        time.sleep(0.05)
    pressed = time.monotonic()
    answer = httpx.post(f"{args.url}/gradio_api/run/predict", timeout=120, json={
        "data": [], "fn_index": stop_index, "session_hash": c.session_hash, "event_data": None,
        "trigger_id": None})
    answered = round(time.monotonic() - pressed, 2)
    while not job.done() and time.monotonic() - pressed < 120:
        time.sleep(0.02)
    ended = round(time.monotonic() - pressed, 2)
    return {"stop_status": answer.status_code, "stop_answered_s": answered, "run_ended_s": ended}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--pid", type=int, required=True, help="the app's process id (its memory is read)")
    parser.add_argument("--log", required=True, help="the app's log file (its growth is counted)")
    parser.add_argument("--label", default="after")
    parser.add_argument("--note", default="")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--connections", type=int, default=6)
    parser.add_argument("--forged", choices=sorted(PAYLOADS), default="choice",
                        help="what the flood posts: a value outside the choices, or issue 36's 41 kB run JSON")
    parser.add_argument("--log-window-s", type=float, default=6.0, help="a flood alone, for its log")
    parser.add_argument("--out", default="docs/results/public-page-doors.json")
    parser.add_argument("--stop-after-reload", action="store_true",
                        help="instead: kill an engine, wait for the reload, press Stop mid-run")
    parser.add_argument("--with-flood", action="store_true", help="--stop-after-reload beside the flood")
    args = parser.parse_args(argv)
    report = stop_after_reload(args) if args.stop_after_reload else measure(args)
    if args.note:
        report["note"] = args.note
    out = Path(args.out)
    kept = json.loads(out.read_text()) if out.exists() else {}
    kept[args.label] = report
    out.write_text(json.dumps(kept, indent=1) + "\n")
    print(json.dumps({k: v for k, v in report.items() if k != "machine"}, indent=1))


if __name__ == "__main__":
    main()
