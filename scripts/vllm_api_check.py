"""Does a vLLM release have every surface the engine layer uses? Read from its source, not by importing it,
so a release this machine can't run (the GPU build of a newer vLLM, unpacked from its wheel) is checked
too. The suite runs it on the installed vLLM (tests/unit/test_vllm_api.py).

    python scripts/vllm_api_check.py [SITE_OR_SOURCE_DIR]   # default: the installed vllm package
    unzip -q vllm-0.33.0-*.whl 'vllm/*' -d /tmp/v033 && python scripts/vllm_api_check.py /tmp/v033

Prints one line per surface (ok / MISSING) and exits 1 if any is missing.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

# (file under vllm/, what must be in it, what the playground uses it for)
SURFACES = (
    ("engine/arg_utils.py", r"per_request_spec_decode_metrics\s*:", "per-request acceptance (AsyncEngineArgs)"),
    ("engine/arg_utils.py", r"speculative_config\s*:", "the speculative engine's config"),
    ("v1/engine/async_llm.py", r"def from_engine_args\(", "AsyncLLM.from_engine_args"),
    ("v1/engine/async_llm.py", r"stat_loggers", "a stat logger of our own per engine"),
    ("v1/engine/async_llm.py", r"def abort\(", "Stop aborts a request"),
    ("v1/engine/async_llm.py", r"def shutdown\(", "engines shut down"),
    ("v1/metrics/loggers.py", r"class StatLoggerBase", "StatLoggerBase"),
    ("v1/metrics/loggers.py", r"def record\(\s*self,\s*scheduler_stats[^)]*iteration_stats", "record(scheduler_stats, iteration_stats, ...)"),
    ("v1/metrics/stats.py", r"spec_decoding_stats", "SchedulerStats.spec_decoding_stats"),
    ("v1/metrics/stats.py", r"kv_cache_usage", "SchedulerStats.kv_cache_usage (the live KV line)"),
    ("v1/spec_decode/metrics.py", r"num_accepted_tokens_per_pos", "per-position acceptance"),
    ("outputs.py", r"spec_decode_metrics\s*:", "CompletionOutput.spec_decode_metrics"),
    ("sampling_params.py", r"class RequestOutputKind", "DELTA streaming"),
    ("sampling_params.py", r"logprobs\s*:", "top candidates at a divergence"),
    ("config/vllm.py", r"def use_v2_model_runner|def _validate_model_runner",
     "the model runner read-out (0.34: V2 alone)"),
    ("config/speculative.py", r"parallel_drafting\s*:", "PARD presets"),
    ("config/speculative.py", r"rejection_sample_method\s*:", "synthetic acceptance (dummy presets)"),
    ("config/speculative.py", r"synthetic_acceptance_rates\s*:", "synthetic acceptance rates"),
    ("config/speculative.py", r'"ngram_gpu"', "method ngram_gpu"),
    ("config/speculative.py", r'"mtp"', "method mtp"),
    ("entrypoints/openai/completion/protocol.py", r"return_token_ids\s*:", "remote mode: token ids"),
    ("entrypoints/openai/completion/protocol.py", r"cache_salt\s*:", "remote mode: the session's salt"),
    ("entrypoints/generate/base/protocol.py", r"acceptance_histogram\s*:", "remote mode: per-request acceptance"),
)


def package_dir(root: str | None) -> Path:
    if root is None:
        import importlib.util

        spec = importlib.util.find_spec("vllm")
        if spec is None or not spec.submodule_search_locations:
            raise SystemExit("no vllm installed: give the folder a wheel was unpacked into")
        return Path(list(spec.submodule_search_locations)[0])
    root_path = Path(root)
    return root_path / "vllm" if (root_path / "vllm").is_dir() else root_path


def check(vllm_dir: Path) -> list[tuple[str, str, bool]]:
    """(surface, its use, present) for every surface."""
    results = []
    for rel, pattern, use in SURFACES:
        path = vllm_dir / rel
        text = path.read_text(errors="replace") if path.is_file() else ""
        results.append((f"{rel}: {pattern}", use, bool(re.search(pattern, text))))
    return results


def version(vllm_dir: Path) -> str:
    path = vllm_dir / "_version.py"
    found = re.search(r"version\s*=\s*['\"]([^'\"]+)", path.read_text()) if path.is_file() else None
    return found.group(1) if found else "?"


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    vllm_dir = package_dir(argv[0] if argv else None)
    results = check(vllm_dir)
    print(f"vLLM {version(vllm_dir)} at {vllm_dir}")
    for surface, use, ok in results:
        print(f"{'ok     ' if ok else 'MISSING'} {use:<50} {surface}")
    return 0 if all(ok for _, _, ok in results) else 1


if __name__ == "__main__":
    sys.exit(main())
