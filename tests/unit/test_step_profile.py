"""benchmarks/gpu/step_profile.py on a small trace in the torch profiler's format: decode steps split at vLLM's
per-step annotation, the GPU's busy time per step as the union of its kernels, the host's launches counted."""

from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu" / "step_profile.py"


def _module():
    spec = importlib.util.spec_from_file_location("step_profile", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _trace(steps: int = 4, period: float = 10_000.0) -> list[dict]:
    events = [{"ph": "X", "cat": "user_annotation", "name": "execute_context_1(16)_generation_0(0)", "ts": -5000.0,
               "dur": 3000.0}]  # the prefill step: not a decode step
    for i in range(steps):
        t = i * period
        events += [
            {"ph": "X", "cat": "user_annotation", "name": "execute_context_0(0)_generation_1(4)", "ts": t, "dur": 3000},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "ts": t + 10, "dur": 20},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": t + 40, "dur": 5},
            {"ph": "X", "cat": "cpu_op", "name": "_vllm_fa3_C::fwd", "ts": t + 50, "dur": 60},
            {"ph": "X", "cat": "kernel", "name": "gemm", "ts": t + 100, "dur": 3000},
            {"ph": "X", "cat": "kernel", "name": "gemm-overlapping", "ts": t + 2000, "dur": 2000},  # union: 3900
        ]
    return events


def test_a_step_is_split_into_gpu_work_and_gpu_idle(tmp_path):
    sp = _module()
    out = sp.summarize(_trace())
    med = out["per_step_median"]
    assert out["decode_steps"] == 4 and out["tokens_per_request_step"] == 4
    assert med["period_ms"] == 10.0 and med["gpu_busy_ms"] == 3.9 and med["gpu_idle_ms"] == 6.1
    assert med["gpu_busy_fraction"] == 0.39
    assert (med["graph_launches"], med["kernel_launches"], med["attention_calls"]) == (1, 1, 1)
    assert med["attention_calls_cpu_ms"] == 0.06


def test_the_command_reads_one_folder_per_config(tmp_path):
    sp = _module()
    for name in ("baseline", "draft"):
        (tmp_path / name).mkdir()
        with gzip.open(tmp_path / name / "rank0.1.pt.trace.json.gz", "wt") as f:
            json.dump({"traceEvents": _trace(period=5000.0 if name == "baseline" else 10_000.0)}, f)
    (tmp_path / "empty").mkdir()
    assert sp.main([str(tmp_path), "--out", str(tmp_path / "s.json")]) == 0
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["baseline"]["per_step_median"]["period_ms"] == 5.0
    assert summary["draft"]["per_step_median"]["period_ms"] == 10.0
    assert summary["empty"] == {"error": "no trace"}
