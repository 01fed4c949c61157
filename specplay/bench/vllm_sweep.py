"""A k sweep with vLLM's own tool, for where the playground can't run it: in remote mode each server runs the
speculative_config it was started with, while `vllm bench sweep serve` (vllm/benchmarks/sweep/serve.py)
starts `vllm serve` once per entry of --serve-params and runs `vllm bench serve` once per entry of
--bench-params against it (--num-runs times each, vLLM's default 3), writing each combination's results and a
summary.json that `vllm bench sweep plot` reads.

The serve params are one `speculative_config` per k, named "k=N" (the sweep puts the JSON in place of the
serve line's --speculative-config; vLLM's dotted form, --speculative-config.num_speculative_tokens, would
replace the whole config rather than merge into it); the bench params are one entry per workload file,
temperature and concurrency (or request rate), left unnamed so each result keeps the serve entry's name in
`_benchmark_name`: `vllm bench sweep plot DIR --var-x max_concurrency --var-y median_tpot_ms --curve-by
_benchmark_name` draws one curve per k. No engines, no vLLM import."""

from __future__ import annotations

import itertools
import json
import shlex
from pathlib import Path

SERVE_PARAMS, BENCH_PARAMS, SWEEP_DIR = "sweep_serve_params.json", "sweep_bench_params.json", "sweep"


def serve_params(preset, variants) -> list[dict]:
    """One entry per speculative variant: its speculative_config as the serve line writes it."""
    from specplay.bench.runner import variant_preset
    from specplay.core.events import SPECULATIVE
    from specplay.presets.engines import serve_line

    return [{"_benchmark_name": v.label.replace(", ", "-"),
             "speculative_config": serve_line(variant_preset(preset, v), SPECULATIVE).args["speculative_config"]}
            for v in variants]


def bench_params(settings, paths: list[Path]) -> list[dict]:
    """One entry per workload file × temperature × loop: closed loop at each concurrency (every request at
    once, at most c in flight), open loop at each request rate (every request allowed in flight)."""
    loops = [{"max_concurrency": c, "request_rate": "inf"} for c in settings.concurrency]
    loops += [{"max_concurrency": settings.n, "request_rate": "inf" if r == float("inf") else r}
              for r in settings.request_rate]
    return [{"dataset_path": str(path), "temperature": t, **loop}
            for path, t, loop in itertools.product(paths, settings.temperature, loops)]


def sweep_serve(preset, settings, variants, max_tokens: int, workloads, out_dir: Path) -> str | None:
    """The `vllm bench sweep serve` line that measures these speculative variants on `settings`' workload
    files, its two params files written under `out_dir`/vllm; None when no workload is a file (token ids)."""
    from specplay.bench.latency import vllm_bench_commands
    from specplay.bench.vllm_format import SUMMARY_DIR
    from specplay.core.events import SPECULATIVE
    from specplay.presets.engines import serve_line
    from specplay.bench.workloads import WorkloadError, workload_path

    paths = []
    for name in workloads:
        try:
            paths.append(workload_path(name)[1])
        except WorkloadError:
            continue
    lines = vllm_bench_commands(preset, settings, max_tokens, workloads)
    if not paths or not lines:
        return None
    serve = serve_line(preset, SPECULATIVE)  # the sweep runs its argv; its environment goes in front of ours
    bench_cmd = next(iter(lines.values()))[SPECULATIVE]
    folder = Path(out_dir) / SUMMARY_DIR
    folder.mkdir(parents=True, exist_ok=True)
    (folder / SERVE_PARAMS).write_text(json.dumps(serve_params(preset, variants), indent=1) + "\n")
    (folder / BENCH_PARAMS).write_text(json.dumps(bench_params(settings, paths), indent=1) + "\n")
    parts = ["vllm", "bench", "sweep", "serve", "--serve-cmd", shlex.join(serve.argv), "--bench-cmd", bench_cmd,
             "--serve-params", str(folder / SERVE_PARAMS), "--bench-params", str(folder / BENCH_PARAMS),
             "-o", str(folder / SWEEP_DIR)]
    return " ".join([f"{k}={shlex.quote(v)}" for k, v in serve.env] + [shlex.quote(p) for p in parts])
