"""Does this host freeze while CPU engines run? Serve the page (`app.py`, one preset), start one long run, and
meanwhile time a plain `sleep(0.02)` loop pinned to each core, plus one at nice -10 on the app's core. A loop
that wakes late by seconds, at any priority, means the core itself stopped (the VM's vCPU), not the scheduler.
  .venv/bin/python benchmarks/freeze_probe.py [--preset smollm2-ngram] [--seconds 40] [--out FILE.json]
Prints one JSON object: per loop the worst wake-up delay and every delay over 0.3 s (start, length)."""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STORY = "Write a long story about a lighthouse keeper who talks to the sea. Make it at least ten paragraphs."
LOOP = """
import json, os, sys, time
os.sched_setaffinity(0, {int(sys.argv[1])})
t0 = last = time.monotonic(); worst, late = 0.0, []
while time.monotonic() - t0 < float(sys.argv[2]):
    time.sleep(0.02); now = time.monotonic(); worst = max(worst, now - last)
    if now - last > 0.3: late.append([round(last - t0, 1), round(now - last, 2)])
    last = now
print(json.dumps({"worst_s": round(worst, 2), "late": late}))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(client_cls, url: str, proc, timeout: float = 900.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"app.py exited with {proc.returncode}")
        try:
            client = client_cls(url, verbose=False)
            if client.predict(api_name="/status")["state"] == "ready":
                return client
        except Exception:  # not serving yet
            pass
        time.sleep(2)
    raise SystemExit(f"the page was not ready within {timeout:.0f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="smollm2-ngram")
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    from gradio_client import Client

    port = free_port()
    app = subprocess.Popen([sys.executable, "app.py", "--presets", args.preset, "--port", str(port)], cwd=ROOT,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        client = wait_ready(Client, f"http://127.0.0.1:{port}/", app)
        app_core = min(os.sched_getaffinity(app.pid))
        cores = sorted(os.sched_getaffinity(0))
        loops = {f"core {c}, nice 0": ["nice", "-n", "0", sys.executable, "-c", LOOP, str(c)] for c in cores}
        loops[f"core {app_core} (the app's), nice -10"] = ["nice", "-n", "-10", sys.executable, "-c", LOOP,
                                                           str(app_core)]
        procs = {name: subprocess.Popen([*argv, str(args.seconds)], stdout=subprocess.PIPE, text=True)
                 for name, argv in loops.items()}
        job = client.submit(STORY, 900, 0.0, "sequential", api_name="/run")
        result = {name: json.loads(p.communicate()[0]) for name, p in procs.items()}
        client.predict(api_name="/stop")
        job.result(timeout=600)
        out = {"preset": args.preset, "seconds": args.seconds, "app_core": app_core, "loops": result}
        print(json.dumps(out, indent=1))
        if args.out:
            with open(args.out, "w") as f:
                json.dump(out, f, indent=1)
        return 0
    finally:
        app.terminate()
        try:
            app.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(app.pid, 9)


if __name__ == "__main__":
    sys.exit(main())
