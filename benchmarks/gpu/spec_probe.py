#!/usr/bin/env python3
"""Plain-vLLM speculative-decoding probe: one engine config per process, decode tok/s at batch 1 and 8.

Does not import the project's package. On a GPU machine with vLLM installed (project root):
    python3 benchmarks/gpu/spec_probe.py --config draft-k3-v1 --out /tmp/r/draft-k3-v1.json
    python3 benchmarks/gpu/spec_probe.py --list                 # the named configs (the issue-17 table)
    python3 benchmarks/gpu/spec_probe.py --config pard-k5 --dry-config   # build and print the VllmConfig only
The whole table, several engines warming up at once and measured one at a time: benchmarks/gpu/probe_table.py.

Per config: LLM(load_format="dummy") on the configs in presets/models/ (or specplay/presets/data/models/) and
benchmarks/gpu/probe-models/, synthetic
acceptance (speculative_config rejection_sample_method "synthetic", rates a, a², …, a = 0.7), token-id prompts
(a random stretch repeated, so n-gram lookup finds matches), temperature 0, ignore_eos, 256 output tokens.
One warm-up at each batch size (same prompts, same length: every shape the timed runs use), then --runs timed
runs at each. Writes one JSON: the config, vLLM and torch versions, the model runner vLLM used (the front end's
vllm_config.use_v2_model_runner and the worker's model_runner class, read over collective_rpc), async
scheduling, tok/s per run, per-request decode tok/s (first to last token, engine-core timestamps) and the
spec-decode counters (drafts, draft tokens, accepted, per position) of each run.

--barrier DIR: after warm-up write DIR/NAME.ready and wait for DIR/NAME.go before the timed runs (the driver
lets one engine at a time measure while the others idle). --v1-during-start: VLLM_USE_V2_MODEL_RUNNER=0 set in
os.environ only around LLM(...), restored afterwards (the per-engine env override check).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

# the named configs live beside this script (run as a file, its folder is on sys.path)
from probe_configs import CONFIGS, rates


def make_prompts(n: int, length: int, period: int, seed: int = 17) -> list[list[int]]:
    """n token-id prompts, each a random stretch of `period` ids repeated up to `length` (ids valid in both vocabularies)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        stretch = [rng.randrange(1000, 100000) for _ in range(period)]
        out.append((stretch * (length // period + 1))[:length])
    return out


def spec_counters(llm) -> dict:
    """Sum of every spec-decode metric over its labels (counters: value; per-position vectors: values)."""
    out: dict = {}
    try:
        for m in llm.get_metrics():
            if "spec_decode" not in m.name:
                continue
            if hasattr(m, "values"):
                cur = out.get(m.name, [])
                vals = list(m.values)
                out[m.name] = [a + b for a, b in zip(cur + [0] * (len(vals) - len(cur)), vals)] if cur else vals
            elif hasattr(m, "value"):
                out[m.name] = out.get(m.name, 0) + m.value
    except Exception as e:  # noqa: BLE001
        out["error"] = repr(e)
    return out


def diff_counters(after: dict, before: dict) -> dict:
    d = {}
    for k, v in after.items():
        b = before.get(k)
        if isinstance(v, list):
            b = b or [0] * len(v)
            d[k] = [x - y for x, y in zip(v, b + [0] * (len(v) - len(b)))]
        elif isinstance(v, (int, float)):
            d[k] = v - (b or 0)
    return d


def worker_runner(self):  # runs in the worker (engine-core) process via collective_rpc
    import os as _os
    mr = getattr(self, "model_runner", None)
    drafter = getattr(mr, "drafter", None) or getattr(mr, "speculator", None)
    sched = None
    try:
        sched = self.vllm_config.scheduler_config.async_scheduling
    except Exception:  # noqa: BLE001
        pass
    return {"model_runner_class": f"{type(mr).__module__}.{type(mr).__qualname__}",
            "worker_use_v2_model_runner": getattr(self, "use_v2_model_runner", None),
            "drafter_class": None if drafter is None else f"{type(drafter).__module__}.{type(drafter).__qualname__}",
            "worker_env_VLLM_USE_V2_MODEL_RUNNER": _os.environ.get("VLLM_USE_V2_MODEL_RUNNER"),
            "worker_async_scheduling": sched, "worker_pid": _os.getpid()}


def runner_of(vllm_config):
    try:
        v = getattr(vllm_config, "use_v2_model_runner", None)
    except Exception as e:  # noqa: BLE001
        return f"error: {e!r}"
    return None if v is None else ("v2" if v else "v1")


def one_run(llm, prompts, sp):
    from vllm.inputs import TokensPrompt
    before = spec_counters(llm)
    t0 = time.perf_counter()
    outs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], sp, use_tqdm=False)
    wall = time.perf_counter() - t0
    after = spec_counters(llm)
    ntok = [len(o.outputs[0].token_ids) for o in outs]
    per_req = []
    for o, n in zip(outs, ntok):
        m = getattr(o, "metrics", None)
        first, last = getattr(m, "first_token_ts", 0.0), getattr(m, "last_token_ts", 0.0)
        per_req.append(round((n - 1) / (last - first), 2) if m is not None and last > first and n > 1 else None)
    c = diff_counters(after, before)
    drafts = c.get("vllm:spec_decode_num_drafts")
    acc = c.get("vllm:spec_decode_num_accepted_tokens")
    dtoks = c.get("vllm:spec_decode_num_draft_tokens")
    return {"wall_s": round(wall, 4), "output_tokens": sum(ntok), "tok_s": round(sum(ntok) / wall, 2),
            "per_request_decode_tok_s": per_req, "spec_counters": c,
            "mean_acceptance_length": round(1 + acc / drafts, 3) if drafts else None,
            "acceptance_rate": round(acc / dtoks, 3) if dtoks else None}


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", help="a name from --list")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--out", help="JSON to write")
    ap.add_argument("--name", help="name in the JSON and barrier files (default: --config)")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--warmups", type=int, default=1, help="warm-up runs at each batch size")
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--period", type=int, default=16, help="the prompt repeats a random stretch of this many ids")
    ap.add_argument("--acceptance", type=float, default=0.7)
    ap.add_argument("--k", type=int, help="override num_speculative_tokens (synthetic rates follow)")
    ap.add_argument("--max-model-len", type=int, default=1024)
    ap.add_argument("--max-num-seqs", type=int, default=8)
    ap.add_argument("--max-num-batched-tokens", type=int, default=2048)
    ap.add_argument("--gpu-memory-utilization", type=float, default=0.10,
                    help="only the free-memory check at start; the KV cache size is --kv-cache-gib")
    ap.add_argument("--kv-cache-gib", type=float, default=1.0, help="kv_cache_memory_bytes (bypasses profiling)")
    ap.add_argument("--v1-during-start", action="store_true",
                    help="VLLM_USE_V2_MODEL_RUNNER=0 only around LLM(...), restored afterwards")
    ap.add_argument("--engine-json", default="{}", help="extra LLM(...) keyword arguments, JSON")
    ap.add_argument("--spec-json", default="{}", help="merged into speculative_config, JSON")
    ap.add_argument("--barrier", help="directory: NAME.ready after warm-up, wait for NAME.go")
    ap.add_argument("--dry-config", action="store_true", help="build the VllmConfig, print it, start nothing")
    ap.add_argument("--target", help="replace the config's target model folder (e.g. a tiny config for a CPU test)")
    ap.add_argument("--draft", help="replace the config's speculative_config model folder")
    ap.add_argument("--profile-dir", help="after the timed runs, one batch-1 run of --profile-tokens under vLLM's "
                    "torch profiler (profiler_config), trace written here (benchmarks/gpu/step_profile.py reads it)")
    ap.add_argument("--profile-tokens", type=int, default=64)
    return ap.parse_args()


def probe_config(args) -> tuple[dict, str, dict | None, bool]:
    """The named config with the command line's overrides: (config, name, speculative_config, v1_during_start);
    sets the config's env in this process, before vLLM is imported."""
    cfg = dict(CONFIGS[args.config])
    name = args.name or args.config
    for k, v in cfg.get("env", {}).items():
        os.environ[k] = v
    os.environ.setdefault("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")  # collective_rpc with a callable
    if args.target:
        cfg["target"] = args.target
    sc = cfg["spec"] and dict(cfg["spec"])
    if sc and args.draft and "model" in sc:
        sc["model"] = args.draft
    if sc:
        if args.k:
            sc["num_speculative_tokens"] = args.k
        sc.update(json.loads(args.spec_json))
        if sc.get("rejection_sample_method") == "synthetic":
            sc["synthetic_acceptance_rates"] = rates(args.acceptance, sc["num_speculative_tokens"])
        else:
            sc.pop("synthetic_acceptance_rates", None)
    return cfg, name, sc, args.v1_during_start or cfg.get("v1_during_start", False)


def engine_kwargs(args, cfg: dict, sc: dict | None, name: str) -> dict:
    engine_kw = dict(model=cfg["target"], load_format="dummy", dtype="bfloat16", skip_tokenizer_init=True,
                     max_model_len=args.max_model_len, max_num_seqs=args.max_num_seqs,
                     max_num_batched_tokens=args.max_num_batched_tokens,
                     gpu_memory_utilization=args.gpu_memory_utilization,
                     kv_cache_memory_bytes=int(args.kv_cache_gib * 2**30), disable_log_stats=False, seed=0)
    engine_kw.update(cfg.get("engine", {}))
    engine_kw.update(json.loads(args.engine_json))
    if sc:
        engine_kw["speculative_config"] = sc
    if args.profile_dir:  # vLLM's own profiler (`vllm serve --profiler-config ...`), worker side only
        try:
            from vllm.config import ProfilerConfig
            known = getattr(ProfilerConfig, "__dataclass_fields__", None) or getattr(ProfilerConfig, "model_fields", {})
        except ImportError:
            known = ("profiler", "torch_profiler_dir", "torch_profiler_with_stack")
        pc = {"profiler": "torch", "torch_profiler_dir": str(Path(args.profile_dir).resolve() / name),
              "torch_profiler_with_stack": False, "ignore_frontend": True}
        engine_kw["profiler_config"] = {k: v for k, v in pc.items() if k in known}  # older vLLMs lack some keys
    return engine_kw


def spec_keys_present() -> dict | str:
    """Whether the installed vLLM's SpeculativeConfig has the keys these configs use."""
    try:
        import vllm.config.speculative as vcs
        fields = getattr(vcs.SpeculativeConfig, "__dataclass_fields__", None) or getattr(
            vcs.SpeculativeConfig, "model_fields", {})
        return {k: k in fields for k in (
            "rejection_sample_method", "synthetic_acceptance_rates", "parallel_drafting")}
    except Exception as e:  # noqa: BLE001
        return repr(e)


def print_dry_config(engine_kw: dict, name: str) -> None:
    from vllm.engine.arg_utils import EngineArgs
    ea = EngineArgs(**{k: v for k, v in engine_kw.items()})
    vc = ea.create_engine_config()
    print(json.dumps({"name": name, "runner": runner_of(vc),
                      "async_scheduling": vc.scheduler_config.async_scheduling,
                      "speculative_config": repr(vc.speculative_config),
                      "parallel_drafting": getattr(vc.speculative_config, "parallel_drafting", None),
                      "rates": getattr(vc.speculative_config, "synthetic_acceptance_rates", None),
                      "draft_arch": getattr(getattr(vc.speculative_config, "draft_model_config", None),
                                            "architectures", None)}, default=str))


def start_llm(llm_class, engine_kw: dict, v1_during_start: bool, result: dict, write):
    """LLM(**engine_kw), its load time in result; a failed start written to the result before it is raised."""
    t0 = time.perf_counter()
    try:
        if v1_during_start:
            saved = os.environ.get("VLLM_USE_V2_MODEL_RUNNER")
            os.environ["VLLM_USE_V2_MODEL_RUNNER"] = "0"
            try:
                llm = llm_class(**engine_kw)
                result["runner_frontend_during_start"] = runner_of(llm.llm_engine.vllm_config)
            finally:
                if saved is None:
                    os.environ.pop("VLLM_USE_V2_MODEL_RUNNER", None)
                else:
                    os.environ["VLLM_USE_V2_MODEL_RUNNER"] = saved
        else:
            llm = llm_class(**engine_kw)
    except Exception as e:  # noqa: BLE001
        result.update(status="start failed", error=f"{type(e).__name__}: {e}"[:4000])
        write()
        raise
    result["load_s"] = round(time.perf_counter() - t0, 1)
    return llm


def describe_engine(llm, result: dict) -> None:
    """What vLLM made of the config: model runner, async scheduling, the resolved speculative config, CUDA graphs,
    the worker's classes, the GPU memory left."""
    import torch

    vc = llm.llm_engine.vllm_config
    result["runner_frontend"] = runner_of(vc)
    result["async_scheduling"] = vc.scheduler_config.async_scheduling
    result["speculative_config"] = repr(vc.speculative_config)
    result["resolved_spec"] = None if vc.speculative_config is None else {
        k: getattr(vc.speculative_config, k, None) for k in (
            "method", "num_speculative_tokens", "parallel_drafting", "rejection_sample_method",
            "synthetic_acceptance_rates", "prompt_lookup_min", "prompt_lookup_max")}
    try:
        result["cudagraph_mode"] = str(vc.compilation_config.cudagraph_mode)
        result["cudagraph_capture_sizes"] = vc.compilation_config.cudagraph_capture_sizes
    except Exception:  # noqa: BLE001
        pass
    try:
        result["worker"] = llm.collective_rpc(worker_runner)[0]
    except Exception as e:  # noqa: BLE001
        result["worker"] = {"error": repr(e)[:500]}
    mrc = str(result["worker"].get("model_runner_class", ""))
    result["runner_used"] = ("v2" if ".gpu.model_runner" in mrc else "v1" if "gpu_model_runner" in mrc
                             else result["runner_frontend"])
    try:
        free, total = torch.cuda.mem_get_info() if torch.cuda.is_available() else (None, None)
        result["gpu_free_gib_at_ready"] = None if free is None else round(free / 2**30, 1)
    except Exception:  # noqa: BLE001
        pass


def main() -> int:
    args = parse_args()
    if args.list:
        for n, c in CONFIGS.items():
            print(n, json.dumps({k: v for k, v in c.items() if k != "target"} | {"target": Path(c["target"]).name}))
        return 0
    cfg, name, sc, v1_during_start = probe_config(args)

    import torch
    import vllm
    from vllm import LLM

    engine_kw = engine_kwargs(args, cfg, sc, name)
    result = {"name": name, "config": args.config, "baseline": cfg["baseline"], "vllm": vllm.__version__,
              "torch": torch.__version__, "engine_args": {k: v for k, v in engine_kw.items()},
              "process_env": {k: os.environ.get(k) for k in ("VLLM_USE_V2_MODEL_RUNNER", "VLLM_USE_FLASHINFER_SAMPLER")},
              "v1_during_start": v1_during_start, "batches": {}, "status": "starting"}
    result["spec_keys_present"] = spec_keys_present()

    def write():
        if args.out:
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text(json.dumps(result, indent=1, default=str) + "\n")

    if args.dry_config:
        print_dry_config(engine_kw, name)
        return 0

    llm = start_llm(LLM, engine_kw, v1_during_start, result, write)
    describe_engine(llm, result)

    try:
        measure(llm, args, result, write, name)
    except Exception as e:  # noqa: BLE001
        result.update(status=f"failed while {result['status']}", error=f"{type(e).__name__}: {e}"[:4000])
        write()
        raise
    return 0


def measure(llm, args, result, write, name):
    from vllm import SamplingParams
    batches = [int(b) for b in args.batches.split(",")]
    prompts = make_prompts(max(batches), args.prompt_len, args.period)
    sp = SamplingParams(temperature=0.0, max_tokens=args.max_tokens, ignore_eos=True, detokenize=False)
    tw = time.perf_counter()
    for b in batches:  # warm-up: the same prompts and lengths as the timed runs
        for _ in range(args.warmups):
            result["batches"].setdefault(str(b), {}).setdefault("warmup", []).append(one_run(llm, prompts[:b], sp))
    result["warmup_s"] = round(time.perf_counter() - tw, 1)
    result["status"] = "warm"
    write()
    if args.barrier:
        bar = Path(args.barrier)
        (bar / f"{name}.ready").write_text(json.dumps({"load_s": result["load_s"], "pid": os.getpid()}))
        tb = time.perf_counter()
        while not (bar / f"{name}.go").exists():
            time.sleep(0.2)
        result["barrier_wait_s"] = round(time.perf_counter() - tb, 1)
    for b in batches:
        runs = [one_run(llm, prompts[:b], sp) for _ in range(args.runs)]
        r = result["batches"][str(b)]
        r["runs"] = runs
        r["tok_s"] = [x["tok_s"] for x in runs]
        r["tok_s_median"] = sorted(r["tok_s"])[len(runs) // 2]
        r["mean_acceptance_length"] = [x["mean_acceptance_length"] for x in runs]
        print(f"[{name}] batch {b}: tok/s {r['tok_s']}  MAL {r['mean_acceptance_length']}", flush=True)
    if args.profile_dir:
        from vllm import SamplingParams as _SP
        llm.start_profile()
        r = one_run(llm, prompts[:1], _SP(temperature=0.0, max_tokens=args.profile_tokens, ignore_eos=True,
                                          detokenize=False))
        llm.stop_profile()
        result["profiled_run"] = r
        print(f"[{name}] profiled: {r['tok_s']} tok/s", flush=True)
    result["status"] = "ok"
    write()


if __name__ == "__main__":
    sys.exit(main())
