"""Many visitors at once against the real app, on loopback only: N simulated visitors (gradio_client) press
Run with short prompts at nearly the same moment. Checks: no error, no lost or mixed stream (every output
equals its prompt's solo run at T=0), first come first served, and the queue wait and time to first token
each visitor saw. Optionally kills an engine process mid-load (--kill baseline|speculative): the page must
report it, both engines come back without restarting the app, and later runs equal the solo runs.

    python scripts/load_test.py --visitors 50 --max-tokens 12 --out docs/results/cpu-load-50.json
    python scripts/load_test.py --visitors 16 --kill baseline --out docs/results/cpu-fault-baseline.json

Bounded: one run per visitor, a deadline for the whole test, and the app is stopped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TOPICS = ["tea", "rain", "chess", "bread", "maps", "owls", "bikes", "glass", "salt", "kites"]


def prompts(n: int) -> list[str]:
    """Distinct short prompts (a mixed-up stream would show as another prompt's answer)."""
    return [f"In one sentence, what is special about {TOPICS[i % len(TOPICS)]}? (visitor {i})" for i in range(n)]


def percentile(values: list[float], q: float) -> float | None:
    values = sorted(values)
    return round(values[min(len(values) - 1, int(q * len(values)))], 3) if values else None


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--visitors", type=int, default=50)
    p.add_argument("--max-tokens", type=int, default=12)
    p.add_argument("--preset", default="smollm2-ngram")
    p.add_argument("--kill", choices=["baseline", "speculative"], help="kill -9 this engine mid-load")
    p.add_argument("--deadline-s", type=float, default=1800)
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)

    from gradio_client import Client

    from playground.live_run import API_OUTPUTS
    from tests.ui_fixtures import engine_core_pids, free_port

    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    log = open(Path(args.out).with_suffix(".log"), "w")
    app = subprocess.Popen([sys.executable, "app.py", "--presets", args.preset, "--port", str(port),
                            "--queue-size", str(max(32, args.visitors + 8))],
                           cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                           env=dict(os.environ, OMP_NUM_THREADS="1", GRADIO_ANALYTICS_ENABLED="False"))
    started = time.monotonic()
    try:
        client = _wait_ready(Client, url, started + 900)
        texts = prompts(args.visitors)
        distinct = sorted(set(t.split(" (visitor")[0] for t in texts))

        def one_run(c, prompt):
            out = dict(zip(API_OUTPUTS, c.predict(prompt, args.max_tokens, 0.0, "sequential", api_name="/run")))
            return out

        solo = {}  # each visitor's prompt alone, before the load: what its output must equal
        for text in texts:
            solo[text] = one_run(client, text)["result"]["baseline"]["token_ids"]
        print(f"solo runs done ({len(texts)}), {len(distinct)} topics", flush=True)

        results: dict[int, dict] = {}
        submitted: dict[int, float] = {}
        clients = [Client(url, verbose=False) for _ in range(args.visitors)]
        jobs = {}
        for i, text in enumerate(texts):  # submitted in order, 20 ms apart: the order FIFO must keep
            submitted[i] = time.monotonic()
            jobs[i] = clients[i].submit(text, args.max_tokens, 0.0, "sequential", api_name="/run")
            time.sleep(0.02)
        killed = None
        if args.kill:
            time.sleep(2.0)
            cores = engine_core_pids(app)
            killed = cores[0 if args.kill == "baseline" else 1]
            os.kill(killed, signal.SIGKILL)
            print(f"killed the {args.kill} engine core (pid {killed})", flush=True)

        def waiter(i):
            job = jobs[i]
            first = None
            while not job.done():
                if first is None and job.outputs():
                    first = time.monotonic()
                time.sleep(0.01)
            try:
                out = dict(zip(API_OUTPUTS, job.result(timeout=60)))
            except Exception as exc:
                results[i] = {"exception": str(exc)[:300]}
                return
            first = first or time.monotonic()
            results[i] = {"first_update": first, "out": out}

        threads = [threading.Thread(target=waiter, args=(i,)) for i in range(args.visitors)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=max(1.0, started + args.deadline_s - time.monotonic()))

        rows = []
        for i, text in enumerate(texts):
            r = results.get(i, {"exception": "no result before the deadline"})
            row = {"visitor": i}
            if "exception" in r:
                row["error"] = r["exception"]
            else:
                result, error = r["out"]["result"], r["out"]["error"]
                ttft = (result.get("baseline") or {}).get("ttft_s")
                row.update({
                    "error": error or None,
                    "equal_to_solo": (result.get("baseline") or {}).get("token_ids") == solo[text]
                    and result.get("identical") is True,
                    "ttft_s": ttft,
                    "queue_wait_s": round(r["first_update"] - submitted[i] - (ttft or 0.0), 3),
                    "started_order_key": r["first_update"],
                })
            rows.append(row)
        ok = [r for r in rows if not r.get("error")]
        order = [r["visitor"] for r in sorted(ok, key=lambda r: r["started_order_key"])]
        inversions = sum(1 for a, b in zip(order, order[1:]) if a > b)
        after = None
        if args.kill:  # the engines came back: a run equal to its solo run, in the same app
            _wait_ready(Client, url, time.monotonic() + 600)
            after = one_run(client, texts[0])["result"]["baseline"]["token_ids"] == solo[texts[0]]
        waits = [r["queue_wait_s"] for r in ok]
        ttfts = [r["ttft_s"] for r in ok if r["ttft_s"] is not None]
        summary = {
            "visitors": args.visitors, "max_tokens": args.max_tokens, "preset": args.preset,
            "errors": sum(1 for r in rows if r.get("error")),
            "equal_to_solo": sum(1 for r in ok if r["equal_to_solo"]),
            "fifo_inversions": inversions,
            "queue_wait_p50_s": percentile(waits, 0.5), "queue_wait_p95_s": percentile(waits, 0.95),
            "ttft_p50_s": percentile(ttfts, 0.5), "ttft_p95_s": percentile(ttfts, 0.95),
            "killed": args.kill, "runs_equal_to_solo_after_recovery": after,
            "wall_s": round(time.monotonic() - started, 1),
        }
        for r in rows:
            r.pop("started_order_key", None)
        Path(args.out).write_text(json.dumps({"summary": summary, "rows": rows}, indent=2) + "\n")
        print(json.dumps(summary, indent=2))
        if args.kill:
            return 0 if after else 1
        return 0 if summary["errors"] == 0 and summary["equal_to_solo"] == args.visitors and inversions == 0 else 1
    finally:
        app.terminate()
        try:
            app.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(app.pid, 9)
        log.close()


def _wait_ready(Client, url: str, deadline: float):
    client = None
    while time.monotonic() < deadline:
        try:
            client = client or Client(url, verbose=False)
            status = client.predict(api_name="/status")
            if status["state"] == "ready":
                return client
        except Exception:
            client = None
        time.sleep(2)
    raise TimeoutError("the app did not become ready")


if __name__ == "__main__":
    sys.exit(main())
