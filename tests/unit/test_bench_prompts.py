"""benchmarks/bench_prompts.py's report: it carries each preset's engines as the engine contract's EngineInfo,
and is written after each preset. On the H200 (2026-12-03) its first run measured 14 prompts and then lost
them all: json.dumps raised "Object of type EngineInfo is not JSON serializable" at the end."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import SimpleNamespace

from specplay.core.hardware import Hardware
from specplay.engine.base import EngineInfo
from specplay.presets.catalog import get_preset

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "bench_prompts.py"


def _script():
    spec = importlib.util.spec_from_file_location("bench_prompts", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_report_with_engine_info_is_written_as_json(tmp_path):
    script = _script()
    engines = {"baseline": EngineInfo(async_scheduling=True, model_runner="v2", dtype="bfloat16"),
               "speculative": EngineInfo(method="ngram_gpu", num_speculative_tokens=4)}
    pair = SimpleNamespace(engine_info=lambda: engines, status=SimpleNamespace(load_seconds={"baseline": 1.0}))
    rows = [{"identical": True, "speedup": 1.5}, {"identical": False, "speedup": 0.9}]
    record = script.preset_record(pair, get_preset("smollm2-ngram"), Hardware(gpu_count=0, gpu_name=None, cpu_cores=(0, 1)), rows)
    out = tmp_path / "r.json"
    script.write_report({"presets": {"smollm2-ngram": record}}, out)
    written = json.loads(out.read_text())["presets"]["smollm2-ngram"]
    assert written["engines"]["baseline"]["model_runner"] == "v2"
    assert written["engines"]["speculative"]["method"] == "ngram_gpu"
    assert written["identical"] == "1/2" and written["speedup_median"] == 1.2
