"""Issue 42, 5: a room that watches one run, on the real CPU engines. Starts `python app.py` with a presenter
key (PLAYGROUND_PRESENTER_KEY), then times the presenter's run (a queued /run joined with ?presenter=KEY, read
to its end as a browser reads it) with no followers and beside `--followers` followers, alternated round by
round (A B B A ...). A follower is what a follower's browser sends: the room's poll at follow.FOLLOW_HZ and the
status poll at 1 Hz, unqueued /run/predict calls without the key, each under its own session; they run as
threads of one process at the app's niceness + 3 (`--nice`: their machines are not the server's; here they
share its 2 cores, and at nice 19 they starved while the engines ran, costing the page less than real
followers would).

Each follower draws what its polls return; after the run it polls once more, and its panes, badge and run JSON
must equal the presenter's last frame, and every streaming run JSON it saw must hold a prefix of the final
token ids (its streams are the presenter's, never another run's). Reported: the presenter's run seconds and
the engines' decode tokens/s per round, medians and their ratio, the followers' calls and their answers,
the app's CPU seconds per run, and the identity checks. Writes JSON to `--out`.

    PLAYGROUND_FORCE_CPU=1 PLAYGROUND_CPU_EAGER=1 OMP_NUM_THREADS=1 .venv/bin/python benchmarks/room.py
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
KEY = "bench-room-" + "0123456789abcdef"
PROMPT = "Rewrite this sentence in plain words: the committee has reached a decision on the budget."
DRAWN = ("baseline-pane", "speculative-pane", "badge", "result")


def page_calls(url: str) -> SimpleNamespace:
    """The fn indexes and output elem_ids of the run, the room's poll and the status poll, from /config."""
    import httpx

    config = httpx.get(f"{url}/config", timeout=30).json()
    elem = {c["id"]: (c.get("props") or {}).get("elem_id") for c in config["components"]}
    deps = config["dependencies"]
    key = next(i for i, e in elem.items() if e == "follow-key")
    status_key = next(i for i, e in elem.items() if e == "poll-key")
    follow = next(d for d in deps if d.get("queue") is False and d.get("inputs") == [key])
    status = next(d for d in deps if d.get("queue") is False and d.get("inputs") == [status_key])
    run = next(d for d in deps if d.get("api_name") == "run")
    return SimpleNamespace(run=run["id"], run_outputs=[elem.get(i) for i in run["outputs"]],
                           follow=follow["id"], follow_outputs=[elem.get(i) for i in follow["outputs"]],
                           status=status["id"])


def presenter_run(url: str, calls, max_tokens: int, schedule: str, session: str) -> tuple[float, dict]:
    """(seconds from join to the last frame, the last frame's outputs by elem_id)."""
    import httpx

    started = time.monotonic()
    body = {"data": [PROMPT, max_tokens, 0.0, schedule, None], "fn_index": calls.run, "session_hash": session,
            "event_data": None, "trigger_id": None}
    joined = httpx.post(f"{url}/gradio_api/queue/join", json=body, params={"presenter": KEY}, timeout=60)
    joined.raise_for_status()
    with httpx.stream("GET", f"{url}/gradio_api/queue/data", params={"session_hash": session}, timeout=600) as s:
        for line in s.iter_lines():
            message = json.loads(line[6:]) if line.startswith("data: ") else {}
            if message.get("msg") == "process_completed":
                if not message.get("success"):
                    raise RuntimeError(f"the presenter's run failed: {message}")
                return time.monotonic() - started, dict(zip(calls.run_outputs, message["output"]["data"]))
    raise RuntimeError("the presenter's run never completed")


def digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


def _skipped(value) -> bool:
    return (isinstance(value, dict) and value.get("__type__") == "update"
            and not set(value.get("props") or {}) - {"__type__"} and not set(value) - {"__type__", "props"})


def _token_ids(result) -> tuple | None:
    if not isinstance(result, dict):
        return None
    return tuple(tuple((result.get(role) or {}).get("token_ids") or ()) for role in ("baseline", "speculative"))


def follower(url: str, calls, name: str, stop, hz: float, out: list, lock) -> None:
    """One follower's page: the room's poll at `hz`, the status poll at 1 Hz, until `stop`, then a last poll."""
    import httpx

    key, status_key, shown, snapshots, codes = None, None, {}, [], {}
    next_status, polls, started = 0.0, 0, time.monotonic()
    with httpx.Client(timeout=60) as client:
        def post(fn_index, data):
            answer = client.post(f"{url}/gradio_api/run/predict", json={
                "data": data, "fn_index": fn_index, "session_hash": name, "event_data": None, "trigger_id": None})
            codes[answer.status_code] = codes.get(answer.status_code, 0) + 1
            return answer.json()["data"] if answer.status_code == 200 else None

        def poll():
            nonlocal key
            data = post(calls.follow, [key])
            for elem_id, value in zip(calls.follow_outputs, data or ()):
                if not _skipped(value):
                    shown[elem_id] = value
            key = shown.get("follow-key", key)
            if isinstance(shown.get("result"), dict) and shown["result"].get("streaming"):
                snapshots.append(_token_ids(shown["result"]))
        while not stop.is_set():
            poll()
            polls += 1
            if time.monotonic() >= next_status:
                data = post(calls.status, [status_key])
                status_key = data[-1] if data and not _skipped(data[-1]) else status_key
                next_status = time.monotonic() + 1.0
            stop.wait(1.0 / hz)
        poll()
    final = _token_ids(shown.get("result"))
    prefixes = all(final and all(f[:len(s)] == s for f, s in zip(final, snap)) for snap in snapshots)
    with lock:
        out.append({"name": name, "digests": {n: digest(shown.get(n)) for n in DRAWN}, "calls": codes,
                    "streaming_snapshots": len(snapshots),
                    "polls_per_s": round(polls / (time.monotonic() - started), 2), "snapshots_prefix_of_final": bool(prefixes)})


def followers_process(url: str, calls_dict: dict, n: int, hz: float, stop, results, nice: int) -> None:
    os.nice(max(0, nice - os.nice(0)))
    calls, out, lock = SimpleNamespace(**calls_dict), [], threading.Lock()
    threads = [threading.Thread(target=follower, args=(url, calls, f"follower-{i}", stop, hz, out, lock), daemon=True)
               for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    results.put(out)


def one_run(url: str, calls, args, followers: int, number: int, app_pid: int) -> dict:
    from loadtest.app import cpu_seconds, cpu_used
    from specplay.page.follow import FOLLOW_HZ

    context = multiprocessing.get_context("spawn")
    stop, results = context.Event(), context.Queue()
    crowd = None
    if followers:
        crowd = context.Process(target=followers_process,
                                args=(url, vars(calls), followers, FOLLOW_HZ, stop, results, args.nice))
        crowd.start()
        time.sleep(3)  # every follower polling before the run starts
    before, t = cpu_seconds(app_pid) if app_pid else {}, time.monotonic()
    seconds, last = presenter_run(url, calls, args.max_tokens, args.schedule, f"presenter-{number}")
    cpu = cpu_used(before, cpu_seconds(app_pid), time.monotonic() - t) if app_pid else {"by_process": {}}
    result = last["result"]
    row = {"followers": followers, "run_s": round(seconds, 2),
           "tok_s": {r: (result.get(r) or {}).get("tokens_per_s") for r in ("baseline", "speculative")},
           "speedup": result.get("speedup"), "identical": result.get("identical"),
           "app_cpu_s": next((v for k, v in cpu["by_process"].items() if k.startswith("app.py")), None)}
    if crowd is not None:
        time.sleep(1.5)  # a poll or two after the last frame
        stop.set()
        seen = results.get(timeout=120)
        crowd.join(30)
        presenter = {n: digest(last.get(n)) for n in DRAWN}
        row["followers_identical"] = sum(1 for f in seen if f["digests"] == presenter)
        row["followers_prefixes_ok"] = sum(1 for f in seen if f["snapshots_prefix_of_final"])
        row["follower_streaming_snapshots"] = sorted(f["streaming_snapshots"] for f in seen)
        row["follower_polls_per_s"] = sorted(f["polls_per_s"] for f in seen)
        calls_by_code: dict = {}
        for f in seen:
            for code, count in f["calls"].items():
                calls_by_code[str(code)] = calls_by_code.get(str(code), 0) + count
        row["follower_calls"] = calls_by_code
    print(json.dumps(row), flush=True)
    return row


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="smollm2-ngram")
    parser.add_argument("--followers", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=4, help="runs of each kind, alternated A B B A ...")
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--schedule", default="sequential")
    parser.add_argument("--out", help="default: docs/results/cpu-room-N-followers-HZhz.json")
    parser.add_argument("--nice", type=int, default=None,
                        help="the followers' niceness (default: the app's + 3; they share the server's cores here, "
                             "and at 19 they starved while the engines ran)")
    parser.add_argument("--url", help="measure a page already serving with the key (no app started; no CPU seconds)")
    args = parser.parse_args(argv)
    args.nice = os.nice(0) + 3 if args.nice is None else args.nice  # the app runs at this script's niceness
    from loadtest.app import machine
    from specplay.page.follow import FOLLOW_HZ

    args.out = args.out or str(ROOT / "docs" / "results" / f"cpu-room-{args.followers}-followers-{FOLLOW_HZ:g}hz.json")

    rows = []
    if args.url:
        rows = measure(args.url, args, None)
    else:
        rows = started_and_measured(args)
    report = {"follow_hz": FOLLOW_HZ, "machine": machine(), "followers_nice": args.nice, "preset": args.preset,
              "max_tokens": args.max_tokens, "schedule": args.schedule, "followers": args.followers, "rows": rows, "summary": summary(rows, args.followers)}
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report["summary"], indent=1))


def started_and_measured(args) -> list:
    """The app started with the key (loopback, a free port), measured, stopped."""
    from loadtest.app import start_app, stop_app, wait_ready
    from loadtest.visitors import close_client

    log = open(Path(tempfile.gettempdir()) / "room-bench-app.log", "w")
    app = start_app(SimpleNamespace(preset=args.preset, visitors=args.followers), log,
                    extra_env={"PLAYGROUND_PRESENTER_KEY": KEY})
    try:
        close_client(wait_ready(f"http://127.0.0.1:{app.port}", app, time.time() + 900))
        return measure(f"http://127.0.0.1:{app.port}", args, app.pid)
    finally:
        stop_app(app)
        log.close()


def measure(url: str, args, app_pid: int | None) -> list:
    """A warm-up run, then 2 × rounds runs alternating no followers and the crowd (A B B A ...)."""
    calls = page_calls(url)
    presenter_run(url, calls, args.max_tokens, args.schedule, "warm-up")
    order = [0, args.followers, args.followers, 0] * ((args.rounds + 1) // 2)
    return [one_run(url, calls, args, followers, number, app_pid)
            for number, followers in enumerate(order[:2 * args.rounds])]


def summary(rows: list, followers: int) -> dict:
    def median(kind, pick):
        values = [pick(r) for r in rows if r["followers"] == kind and pick(r) is not None]
        return round(statistics.median(values), 3) if values else None

    out = {}
    for kind in (0, followers):
        out[f"{kind}_followers"] = {"run_s": median(kind, lambda r: r["run_s"]),
                                    "baseline_tok_s": median(kind, lambda r: r["tok_s"]["baseline"]),
                                    "speculative_tok_s": median(kind, lambda r: r["tok_s"]["speculative"]),
                                    "speedup": median(kind, lambda r: r["speedup"]),
                                    "app_cpu_s": median(kind, lambda r: r["app_cpu_s"])}
    alone, crowd = out["0_followers"]["run_s"], out[f"{followers}_followers"]["run_s"]
    out["run_s_ratio"] = round(crowd / alone, 3) if alone and crowd else None
    with_crowd = [r for r in rows if r["followers"]]
    out["followers_identical"] = f"{sum(r['followers_identical'] for r in with_crowd)} of {followers * len(with_crowd)}"
    out["streams_prefix_ok"] = f"{sum(r['followers_prefixes_ok'] for r in with_crowd)} of {followers * len(with_crowd)}"
    return out


if __name__ == "__main__":
    main()
