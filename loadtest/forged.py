"""Issue 36's reproductions against the real app on its real engines: an honest visitor's run timed alone,
then beside six connections that post a forged 41 kB run JSON (a thousand made-up steps of token ids) to
every unqueued handler, each call under a new invented session name. Before the run lived on the server,
the stepper decoded every such post (~4 CPU-s each) and each call made a session: the honest 3.4 s run took
164 s. Reported: both run times, the app's memory (RSS) before and after, and the calls made.

    .venv/bin/python -m loadtest.forged [--preset smollm2-ngram] [--seconds 40] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from pathlib import Path

from loadtest.app import machine, start_app, stop_app, wait_ready

STEP = {"start": 1, "tokens": 5, "accepted": 4, "drafted": 4, "proposed": [250, 251, 252, 253],
        "target_token": 254, "seconds": 0.01}
FORGED = {"run_id": "x", "speedup": 9.9, "preset": "smollm2-ngram",
          "speculative": {"token_ids": list(range(240, 6240)), "step_detail": [STEP] * 1000}}


def _unqueued(url: str) -> list[tuple[int, int]]:
    """(fn_index, number of inputs) of every unqueued handler, from the page's config."""
    import httpx

    config = httpx.get(f"{url}/config", timeout=30).json()
    return [(d["id"], len(d.get("inputs") or [])) for d in config["dependencies"]
            if d.get("queue") is False and d.get("backend_fn", True)]


def _flood(url: str, handlers, stop: threading.Event, worker: int, calls: list) -> None:
    import httpx

    with httpx.Client(timeout=60) as client:
        while not stop.is_set():
            for index, inputs in handlers:
                try:
                    client.post(f"{url}/gradio_api/run/predict", json={
                        "data": [FORGED] * inputs, "fn_index": index, "session_hash": f"forged-{worker}-{calls[0]}"})
                except httpx.HTTPError:
                    pass
                calls[0] += 1


def _timed_run(c, prompt: str, max_tokens: int) -> float:
    t = time.monotonic()
    c.predict(prompt, max_tokens, 0.0, "sequential", api_name="/run")
    return time.monotonic() - t


def main(argv=None) -> None:
    import psutil

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="smollm2-ngram")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--connections", type=int, default=6)
    parser.add_argument("--out", default="docs/results/forged-posts.json")
    args = parser.parse_args(argv)
    args.visitors = 1
    log = open("/tmp/forged-app.log", "w")
    app = start_app(args, log)
    url = f"http://127.0.0.1:{app.port}"
    report = {"machine": machine(), "preset": args.preset, "max_tokens": args.max_tokens,
              "connections": args.connections, "post_bytes": len(json.dumps(FORGED))}
    try:
        c = wait_ready(url, app, time.time() + 900)
        prompt = "Rewrite this sentence in plain words: the committee has reached a decision on the budget."
        _timed_run(c, prompt, args.max_tokens)  # warm: the first run compiles and caches
        report["alone_s"] = [round(_timed_run(c, prompt, args.max_tokens), 2) for _ in range(2)]
        rss = psutil.Process(app.pid).memory_info().rss
        stop, calls = threading.Event(), [0]
        handlers = _unqueued(url)
        floods = [threading.Thread(target=_flood, args=(url, handlers, stop, w, calls), daemon=True)
                  for w in range(args.connections)]
        for t in floods:
            t.start()
        time.sleep(2)
        report["beside_flood_s"] = [round(_timed_run(c, prompt, args.max_tokens), 2) for _ in range(2)]
        stop.set()
        for t in floods:
            t.join(timeout=60)
        report["forged_calls"] = calls[0]
        report["rss_mib"] = {"before_flood": round(rss / 2 ** 20), "after_flood":
                             round(psutil.Process(app.pid).memory_info().rss / 2 ** 20)}
    finally:
        report["stop"] = stop_app(app)["all_gone_s"]
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps({k: v for k, v in report.items() if k != "machine"}, indent=1))


if __name__ == "__main__":
    main()
