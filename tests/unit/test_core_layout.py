"""On 2 cores (a free CPU Space) the page's speedup is fair only if neither engine's worker shares its core
with the app or a busy-polling scheduler: the app and both engine-core processes keep to one core, both
workers to the other (one runs at a time in the page's default schedule). docs/benchmarks.md, "Fair on 2
cores", has the figures; these tests hold the configuration that makes them."""

import json
import os
import subprocess
import sys

import pytest

from specplay.core.hardware import CORE_LAYOUT_ENV, CORES_ENV, Hardware, core_layout
from specplay.presets.catalog import engine_settings, load_presets


@pytest.mark.parametrize("cores", [(0, 1), (1, 0), (2, 5)])
def test_two_cores_give_the_app_one_and_both_workers_the_other(cores):
    cores = tuple(sorted(cores))
    baseline, speculative = engine_settings(load_presets()["smollm2-ngram"], Hardware(0, None, cores))
    binds = {s.env["VLLM_CPU_OMP_THREADS_BIND"] for s in (baseline, speculative)}
    # the same core for both: which engine gets which core can't tilt the speedup
    assert binds == {str(cores[1])}
    assert baseline.host_cores == speculative.host_cores == (cores[0],)
    assert str(cores[0]) not in binds


def test_other_core_counts_leave_the_app_unpinned():
    assert core_layout((0,)).host is None and core_layout((0, 1, 2, 3)).host is None


def _cpu_settings(cores, monkeypatch, layout=None):
    if layout is None:
        monkeypatch.delenv(CORE_LAYOUT_ENV, raising=False)
    else:
        monkeypatch.setenv(CORE_LAYOUT_ENV, layout)
    return engine_settings(load_presets()["smollm2-ngram"], Hardware(0, None, cores))


@pytest.mark.parametrize("layout", [None, "fair", " Fair "])
def test_fair_is_the_default_layout(monkeypatch, layout):
    baseline, speculative = _cpu_settings((0, 1), monkeypatch, layout)
    assert baseline.host_cores == speculative.host_cores == (0,)
    assert baseline.env["VLLM_CPU_OMP_THREADS_BIND"] == speculative.env["VLLM_CPU_OMP_THREADS_BIND"] == "1"


@pytest.mark.parametrize("cores, binds", [((0, 1), ("0", "1")), ((3, 7), ("3", "7")), ((0, 1, 2, 3), ("0-1", "2-3")),
                                          ((0, 1, 2), ("0", "1")), ((5,), ("5", "5"))])
def test_per_engine_gives_each_worker_its_own_cores_and_pins_nothing_else(monkeypatch, cores, binds):
    baseline, speculative = _cpu_settings(cores, monkeypatch, "per-engine")
    assert (baseline.env["VLLM_CPU_OMP_THREADS_BIND"], speculative.env["VLLM_CPU_OMP_THREADS_BIND"]) == binds
    assert baseline.host_cores is speculative.host_cores is None  # the app and the schedulers float


def test_off_pins_nothing_and_leaves_the_binding_to_vllm(monkeypatch):
    for settings in _cpu_settings((0, 1), monkeypatch, "off"):
        assert settings.host_cores is None and "VLLM_CPU_OMP_THREADS_BIND" not in settings.env
        assert settings.env["VLLM_CPU_KVCACHE_SPACE"]  # the rest of the CPU settings stay


def test_an_unknown_layout_is_refused_by_name(monkeypatch):
    with pytest.raises(ValueError, match="fair, per-engine, off"):
        _cpu_settings((0, 1), monkeypatch, "fast")


def test_the_app_takes_the_layout_from_its_flag_over_the_environment(monkeypatch):
    from specplay.hosting.options import parse_args, resolve_options

    monkeypatch.setenv(CORE_LAYOUT_ENV, "off")
    assert resolve_options(parse_args([])).core_layout == "off"
    assert resolve_options(parse_args(["--core-layout", "per-engine"])).core_layout == "per-engine"
    monkeypatch.delenv(CORE_LAYOUT_ENV)
    assert resolve_options(parse_args([])).core_layout == "fair"
    monkeypatch.setenv(CORE_LAYOUT_ENV, "fast")
    with pytest.raises(SystemExit, match="per-engine"):
        resolve_options(parse_args([]))
    with pytest.raises(SystemExit):  # argparse's own refusal
        parse_args(["--core-layout", "fast"])


def test_gpu_engines_pin_nothing():
    settings = engine_settings(load_presets()["dummy-llama8b-eagle-k3"], Hardware(1, "NVIDIA H200", (0, 1)))
    assert all(s.host_cores is None for s in settings)


CHILD = """
import json, multiprocessing as mp, os, sys, threading
from specplay.core.hardware import detect, pin_process, usable_cores

def report(queue):
    queue.put(sorted(os.sched_getaffinity(0)))

if __name__ == "__main__":
    held = threading.Event()  # the thread lives until its affinity is read (a 2 s sleep ended first under load)
    before = threading.Thread(target=held.wait, args=(600,), daemon=True)
    before.start()  # started before pinning: pinned too
    pin_process((int(sys.argv[1]),))
    ctx = mp.get_context("spawn")  # as vLLM starts its engine-core processes
    queue = ctx.Queue()
    child = ctx.Process(target=report, args=(queue,))
    child.start()
    spawned = queue.get(timeout=240)
    child.join()
    print(json.dumps({"main": sorted(os.sched_getaffinity(0)), "thread": sorted(os.sched_getaffinity(before.native_id)),
                      "spawned": spawned, "cores_env": os.environ.get("CORES_ENV_NAME"), "usable": list(usable_cores())}))
    held.set()
"""


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores to pin one")
def test_pinning_covers_every_thread_and_what_the_process_spawns(tmp_path):
    cores = sorted(os.sched_getaffinity(0))
    script = tmp_path / "child.py"
    script.write_text(CHILD.replace("CORES_ENV_NAME", CORES_ENV))
    env = {k: v for k, v in os.environ.items() if k != CORES_ENV}
    env["PYTHONPATH"] = os.getcwd()
    # generous bounds, and the child's stderr when it fails: this runs while the app server loads vLLM on the
    # same core (clean-clone runs, 2026-12-07: the child's thread, a 2 s sleep, had ended before it was read)
    done = subprocess.run([sys.executable, str(script), str(cores[0])], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["main"] == seen["thread"] == seen["spawned"] == [cores[0]]
    # what a page started from here would see: all the cores, not the one this process was narrowed to
    assert seen["usable"] == cores and seen["cores_env"] == ",".join(map(str, cores))
