#!/usr/bin/env python3
"""Driver for benchmarks/gpu/spec_probe.py: runs the issue-17 table, waves of engines on one GPU.

On the GPU machine (project root, vLLM importable; benchmarks/gpu/probe.sh sets the environment):
    python3 benchmarks/gpu/probe_table.py --label v032 --out $OUT/h200-v032-probe.json \
        --wave baseline,draft-k3-v2,draft-k3-v1,draft-k3-v1-during-start,pard-k5,eagle-k3 \
        --wave eagle3-k5,pard-k8,mimo-baseline,mtp-k3,ngram-k4,ngram_gpu-k4
Each wave starts its configs at once, one process each (small GPU share: kv_cache_memory_bytes bypasses the
memory profiling), lets them compile and warm up in parallel, waits until all are at the file barrier, then
lets ONE at a time run its timed runs while the others idle, and waits for it to exit before the next: each
figure is that engine alone on the GPU. A config that fails to start in a wave is retried alone afterwards if
--deadline-s leaves time. Results, merged with any earlier --out file of the same label, go to --out after
every config; logs to --logs (a folder; probe_table packs them into LOGS.tar.gz with --pack-logs).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROBE = HERE / "spec_probe.py"


def now() -> float:
    return time.monotonic()


def nvsmi() -> str:
    try:
        return subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception as e:  # noqa: BLE001
        return repr(e)


def summary(results: dict) -> list[str]:
    lines = [f"{'config':26} {'runner':6} {'async':5} {'b1 tok/s':22} {'x':5} {'b8 tok/s':24} {'x':5} MAL(b1)"]
    for name, r in results.items():
        if r.get("status") != "ok":
            lines.append(f"{name:26} {r.get('status')}: {str(r.get('error', ''))[:150]}")
            continue
        base = results.get(r.get("baseline"), {})
        row = [f"{name:26} {str(r.get('runner_used')):6} {str(r.get('async_scheduling')):5}"]
        for b in ("1", "8"):
            t = r["batches"].get(b, {}).get("tok_s")
            bt = base.get("batches", {}).get(b, {}).get("tok_s_median") if base.get("status") == "ok" else None
            med = r["batches"].get(b, {}).get("tok_s_median")
            row.append(f"{str(t):24} {(f'{med / bt:.2f}' if bt and med else '-'):5}")
        row.append(str(r["batches"].get("1", {}).get("mean_acceptance_length")))
        lines.append(" ".join(row))
    return lines


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("--label", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--wave", action="append", default=[], help="comma-separated config names, started together")
    ap.add_argument("--work", default="/tmp/probe-work")
    ap.add_argument("--logs", default=None, help="folder for per-config logs (default WORK/logs)")
    ap.add_argument("--pack-logs", help="write the logs of this call as a .tar.gz here")
    ap.add_argument("--start-timeout-s", type=float, default=420)
    ap.add_argument("--measure-timeout-s", type=float, default=150)
    ap.add_argument("--deadline-s", type=float, default=560, help="stop starting anything after this")
    ap.add_argument("--stagger-s", type=float, default=1.5)
    ap.add_argument("--probe-args", default="", help="extra arguments for every spec_probe.py")
    ap.add_argument("--copy-to", help="also copy the merged JSON here after every config (e.g. under $OUT)")
    ap.add_argument("--measure-reserve-s", type=float, default=35, help="time a config's timed runs need at most")
    return ap.parse_args()


def stop(p: subprocess.Popen, grace: float):
    """End a probe we started (its own process group: the probe and its engine core), by its id."""
    try:
        p.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()


def pack_logs(path: str, logs: Path, label: str) -> None:
    with tarfile.open(path, "w:gz") as tf:
        for f in sorted(logs.glob("*.log")):
            tf.add(f, arcname=f"{label}-logs/{f.name}")


class ProbeTable:
    """One call of the driver: its folders, the merged results (this call's record in them) and the waves."""

    def __init__(self, args: argparse.Namespace, t_start: float):
        self.args, self.t_start = args, t_start
        work = Path(args.work)
        self.bar = work / "barrier"
        self.res_dir = work / "results"
        self.logs = Path(args.logs) if args.logs else work / "logs"
        for d in (self.bar, self.res_dir, self.logs):
            d.mkdir(parents=True, exist_ok=True)
        self.out = Path(args.out)
        merged: dict = {}
        if self.out.exists():
            merged = json.loads(self.out.read_text())
        merged.setdefault("label", args.label)
        merged.setdefault("results", {})
        merged.setdefault("calls", []).append({"waves": args.wave, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                                            time.gmtime())})
        self.merged = merged
        self.call = merged["calls"][-1]
        try:
            self.call["gpu"] = subprocess.run(["nvidia-smi",
                                               "--query-gpu=name,memory.total,clocks.max.sm,driver_version",
                                               "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
        except Exception:  # noqa: BLE001
            pass

    def save(self):
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.out.write_text(json.dumps(self.merged, indent=1, default=str) + "\n")
        if self.args.copy_to:
            shutil.copyfile(self.out, self.args.copy_to)

    def collect(self, name: str, proc: subprocess.Popen | None, note: str = ""):
        f = self.res_dir / f"{name}.json"
        r = json.loads(f.read_text()) if f.exists() else {"name": name, "status": "no result"}
        if proc is not None and proc.poll() not in (0, None) and r.get("status") == "ok":
            r["exit_code"] = proc.returncode
        if proc is not None and r.get("status") not in ("ok",):
            r.setdefault("exit_code", proc.poll())
            tail = (self.logs / f"{name}.log").read_text(errors="replace").splitlines()[-25:] if (
                self.logs / f"{name}.log").exists() else []
            r["log_tail"] = tail
        if note:
            r["driver_note"] = note
        self.merged["results"][name] = r
        self.save()

    def launch(self, names: list[str]) -> dict:
        procs = {}
        for n in names:
            for suffix in (".ready", ".go"):
                (self.bar / f"{n}{suffix}").unlink(missing_ok=True)
            (self.res_dir / f"{n}.json").unlink(missing_ok=True)
            cmd = [sys.executable, str(PROBE), "--config", n, "--out", str(self.res_dir / f"{n}.json"),
                   "--barrier", str(self.bar)] + self.args.probe_args.split()
            log = open(self.logs / f"{n}.log", "w")
            procs[n] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            time.sleep(self.args.stagger_s)
        return procs

    def wait_until_ready(self, names: list[str], procs: dict, t0: float):
        """Until every probe is at the barrier or has exited, the start timeout, or too late to measure them."""
        while True:
            pending = [n for n, p in procs.items() if not (self.bar / f"{n}.ready").exists() and p.poll() is None]
            nready = sum((self.bar / f"{n}.ready").exists() for n in names)
            late = now() - self.t_start > self.args.deadline_s - max(nready, 1) * self.args.measure_reserve_s
            if not pending or now() - t0 > self.args.start_timeout_s or late:
                return
            time.sleep(1)

    def run_wave(self, names: list[str]) -> list[str]:
        """Start names together, measure one at a time; return those that failed to start."""
        t0 = now()
        print(f"== wave {names} at {t0 - self.t_start:.0f} s", flush=True)
        procs = self.launch(names)
        self.wait_until_ready(names, procs, t0)
        ready = [n for n in names if (self.bar / f"{n}.ready").exists()]
        failed = [n for n in names if n not in ready]
        self.call.setdefault("wave_start_s", []).append({"names": names, "all_ready_after_s": round(now() - t0, 1),
                                                          "ready": ready, "failed": failed, "nvidia_smi": nvsmi()})
        print(f"   ready after {now() - t0:.0f} s: {ready}; not ready: {failed}", flush=True)
        for n in failed:
            stop(procs[n], 0)
            self.collect(n, procs[n], note=f"not ready within the wave (started with {len(names)} at once)")
        for n in ready:
            self.measure(n, procs[n])
        return [n for n in failed if self.crowded(n)]

    def measure(self, n: str, p: subprocess.Popen):
        """Let one ready probe run its timed runs, alone on the GPU, and collect its result."""
        tm = now()
        if now() - self.t_start > self.args.deadline_s - self.args.measure_reserve_s:
            stop(p, 0)
            self.collect(n, p, note="ready but not measured: the call's deadline")
            return
        (self.bar / f"{n}.go").write_text("go")
        res = self.res_dir / f"{n}.json"
        while now() - tm < self.args.measure_timeout_s and p.poll() is None:
            try:
                if json.loads(res.read_text()).get("status") not in ("warm", "starting"):
                    break
            except Exception:  # noqa: BLE001
                pass
            time.sleep(0.25)
        stop(p, 12)  # a clean exit first; the next engine measures only once this one is gone
        self.collect(n, p)
        r = self.merged["results"][n]
        print(f"   {n}: {r.get('status')} in {now() - tm:.0f} s; b1 {r.get('batches', {}).get('1', {}).get('tok_s')}"
              f" b8 {r.get('batches', {}).get('8', {}).get('tok_s')} runner {r.get('runner_used')}"
              f" async {r.get('async_scheduling')}", flush=True)

    def crowded(self, n: str) -> bool:
        """Retry alone only what may have failed for sharing the GPU or the CPUs: memory, or no answer in time."""
        r = self.merged["results"][n]
        text = " ".join([str(r.get("error", ""))] + [str(x) for x in r.get("log_tail", [])]).lower()
        return r.get("status") in ("starting", "no result") or any(
            w in text for w in ("out of memory", "free memory", "cuda error", "timed out", "timeout"))

    def run_waves(self, waves: list[str]) -> list[str]:
        """Each wave unless the deadline is near; return the configs to retry alone."""
        retry: list[str] = []
        for w in waves:
            names = [n for n in w.split(",") if n]
            if now() - self.t_start > self.args.deadline_s - 150:
                print(f"== skipped wave {names}: deadline", flush=True)
                self.call.setdefault("skipped", []).extend(names)
                continue
            retry += self.run_wave(names)
        return retry

    def run_retries(self, retry: list[str]):
        for n in retry:
            if now() - self.t_start > self.args.deadline_s - 170:
                self.call.setdefault("skipped_retries", []).append(n)
                continue
            prev = self.merged["results"].get(n, {})
            self.merged["results"][f"{n}.first-try"] = prev
            self.run_wave([n])


def main() -> int:
    args = parse_args()
    table = ProbeTable(args, now())
    table.run_retries(table.run_waves(args.wave))
    table.call["wall_s"] = round(now() - table.t_start, 1)
    table.save()
    print("\n".join(summary(table.merged["results"])), flush=True)
    if args.pack_logs:
        pack_logs(args.pack_logs, table.logs, args.label)
    return 0


if __name__ == "__main__":
    sys.exit(main())
