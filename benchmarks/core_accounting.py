"""Where the CPU time goes during one sequential comparison on a CPU machine: per thread of this process, the
engine-core processes (schedulers) and their workers, the CPU seconds used and the core last run on, under
the core layouts of benchmarks/bench_fair.py (re-pinned at run time, the same engines). Shows what a layout
leaves to each worker's core: the running engine's scheduler busy-polls its worker for the whole run.

    python benchmarks/core_accounting.py [--layouts split,host0] [--max-tokens 96]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def thread_times(pids) -> dict[int, tuple]:
    """tid -> (pid, name, CPU ticks, last core) for every thread of these processes."""
    out = {}
    for pid in pids:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()
            out[int(tid)] = (pid, stat[stat.index("(") + 1:stat.rindex(")")],
                             int(fields[11]) + int(fields[12]), int(fields[36]))
    return out


def account(pair, request, layout: str) -> None:
    import psutil

    from bench_fair import apply_layout
    from specplay.run import stream
    from specplay.run.result import RunResult

    apply_layout(pair, layout)
    time.sleep(1.2)  # past the schedulers' 1 s busy-poll after their last read
    pids = [os.getpid()] + [c.pid for c in psutil.Process().children(recursive=True)]
    before, t0 = thread_times(pids), time.monotonic()
    result = RunResult.of(stream.compare(pair, request, "sequential")).model_dump(mode="json")
    after, wall = thread_times(pids), time.monotonic() - t0
    roles = {pid: role for role, ids in pair.process_ids().items() for pid in ids}
    print(f"\n{layout}: wall {wall:.2f} s, speedup {result['speedup']}×, step-cost ratio {result['step_cost_ratio']}, "
          + ", ".join(f"{r} {result[r]['tokens_per_s']} tok/s" for r in ("baseline", "speculative")))
    tick = os.sysconf("SC_CLK_TCK")
    for tid, (pid, name, ticks, core) in sorted(after.items(), key=lambda kv: before.get(kv[0], (0, 0, 0))[2] - kv[1][2]):
        used = (ticks - before.get(tid, (0, 0, 0))[2]) / tick
        if used >= 0.05:
            owner = roles.get(pid) or roles.get(psutil.Process(pid).ppid(), "app") if pid != os.getpid() else "app"
            print(f"  {owner:11s} {name:16s} pid {pid} tid {tid}: {used:.2f} CPU s, last on core {core}, "
                  f"allowed {sorted(os.sched_getaffinity(tid))}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layouts", default="split,host0")
    p.add_argument("--max-tokens", type=int, default=96)
    args = p.parse_args()
    from specplay.page.inputs import EXAMPLES, build_request
    from specplay.presets.catalog import DEFAULT_PRESET, get_preset
    from specplay.run import stream
    from specplay.run.pairs import open_pair

    preset = get_preset(DEFAULT_PRESET)
    pair = open_pair(preset)
    pair.start()
    try:
        request = build_request(preset, next(iter(EXAMPLES.values())), args.max_tokens, 0.0)
        stream.compare(pair, request, "sequential")  # first-use costs out
        for layout in args.layouts.split(","):
            account(pair, request, layout)
        return 0
    finally:
        pair.shutdown()


if __name__ == "__main__":  # vLLM spawns engine processes that re-import the main module
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    code = main()
    sys.stdout.flush()
    os._exit(code)
