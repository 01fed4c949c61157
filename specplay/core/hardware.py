"""What this machine offers the engines: NVIDIA GPUs (through NVML) or CPU cores."""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class Hardware:
    gpu_count: int
    gpu_name: str | None
    cpu_cores: tuple[int, ...]

    @property
    def device(self) -> str:
        return "gpu" if self.gpu_count else "cpu"

    def describe(self) -> str:
        if self.gpu_count:
            return f"{self.gpu_count}× {self.gpu_name}"
        return f"CPU, {len(self.cpu_cores)} core(s)"


# Peak memory bandwidth (bytes/s) by NVML name substring, most specific first: vendor datasheet figures
# (NVIDIA H200 / H100 / A100 / A10G / L4 / L40S / GeForce RTX 4090 product pages; 1 TB/s = 1e12 B/s).
MEMORY_BANDWIDTH = (
    ("H200", 4.8e12),
    ("H100 PCIe", 2.0e12),
    ("H100 NVL", 3.9e12),
    ("H100", 3.35e12),  # SXM5 ("NVIDIA H100 80GB HBM3")
    ("A100-SXM4-80GB", 2.039e12),
    ("A100 80GB", 1.935e12),  # PCIe
    ("A100", 1.555e12),  # 40 GB, SXM4 or PCIe
    ("A10G", 0.6e12),
    ("L40S", 0.864e12),
    ("L40", 0.864e12),
    ("L4", 0.3e12),
    ("RTX 4090", 1.008e12),
)


def memory_bandwidth(gpu_name: str | None) -> float | None:
    """The GPU's peak memory bandwidth in bytes/s, or None for a GPU not in the table (or no GPU)."""
    return next((bw for key, bw in MEMORY_BANDWIDTH if gpu_name and key.lower() in gpu_name.lower()), None)


def bandwidth_floor_s(weight_bytes: int | None, hardware: "Hardware", tensor_parallel: int = 1) -> float | None:
    """The shortest a decode step can be: every weight read once (each GPU its 1/tp share) at peak bandwidth."""
    bandwidth = memory_bandwidth(hardware.gpu_name) if hardware.gpu_count else None
    return weight_bytes / max(1, tensor_parallel) / bandwidth if weight_bytes and bandwidth else None


def nvml():
    """NVML, initialised (once per process; init is reference-counted and cheap to repeat), and the handle of
    every GPU: (pynvml, handles). Raises where there is no driver or library."""
    import pynvml

    pynvml.nvmlInit()
    return pynvml, [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]


def gpu_count_and_name() -> tuple[int, str | None]:
    if os.environ.get("PLAYGROUND_FORCE_CPU"):
        return 0, None
    try:
        pynvml, handles = nvml()
        name = pynvml.nvmlDeviceGetName(handles[0]) if handles else None
        return len(handles), name.decode() if isinstance(name, bytes) else name
    except Exception:  # no driver, no library: a CPU machine
        return 0, None


# The cores the first playground process found, for the processes it starts after pin_process has narrowed
# its own (and so their inherited) affinity: a page started from a pinned process still sees both cores.
CORES_ENV = "PLAYGROUND_CPU_CORES"


def usable_cores() -> tuple[int, ...]:
    cores = os.environ.get(CORES_ENV)
    return tuple(sorted(int(c) for c in cores.split(","))) if cores else tuple(sorted(os.sched_getaffinity(0)))


@lru_cache(maxsize=1)
def detect() -> Hardware:
    count, name = gpu_count_and_name()
    return Hardware(count, name, usable_cores())


@dataclass(frozen=True)
class CoreLayout:
    """Where each process runs on a CPU machine: `host` for this process (the page, the pair's loop, output
    handling) and the engines' schedulers (their engine-core processes, which inherit it); the two
    VLLM_CPU_OMP_THREADS_BIND values for the engines' workers. host None: this process unpinned; a bind
    None: left to vLLM (its default, or the operator's own VLLM_CPU_OMP_THREADS_BIND)."""

    host: tuple[int, ...] | None
    baseline: str | None
    speculative: str | None


# The operator's choice of layout (app.py --core-layout sets it for the whole process): "fair", the
# default, keeps the comparison fair (the speedup is what the page teaches); "per-engine" gives each
# engine's worker its own core, faster in absolute tokens/s on 2 cores but with the app and schedulers
# floating onto either engine's core; "off" pins nothing and binds nothing.
CORE_LAYOUT_ENV = "PLAYGROUND_CORE_LAYOUT"
CORE_LAYOUTS = ("fair", "per-engine", "off")
DEFAULT_CORE_LAYOUT = "fair"


def layout_name(name: str | None = None) -> str:
    """`name`, else PLAYGROUND_CORE_LAYOUT, else fair; ValueError for anything not in CORE_LAYOUTS."""
    chosen = (name if name is not None else os.environ.get(CORE_LAYOUT_ENV) or DEFAULT_CORE_LAYOUT).strip().lower()
    if chosen not in CORE_LAYOUTS:
        raise ValueError(f"{CORE_LAYOUT_ENV} / --core-layout must be one of {', '.join(CORE_LAYOUTS)}, "
                         f"not {chosen!r}")
    return chosen


def core_layout(cores: tuple[int, ...], name: str | None = None) -> CoreLayout:
    """The layout `name` (layout_name: default fair) on these cores."""
    chosen = layout_name(name)
    if chosen == "off":
        return CoreLayout(None, None, None)
    if len(cores) < 2:  # nothing to split: both engines on the one core
        return CoreLayout(None, *(str(cores[0]),) * 2) if cores else CoreLayout(None, "0", "0")
    return _per_engine(cores) if chosen == "per-engine" else _fair(cores)


def _fair(cores: tuple[int, ...]) -> CoreLayout:
    """On 2 cores the first is the host's and both workers share the second: a scheduler busy-polls its
    worker (sched_yield) for the whole run, so with one worker per core the running engine's scheduler and
    the app float onto a worker's core and slow that engine (the baseline's step came out dearer than the
    speculative one's). The page runs one engine at a time by default, so each still gets a core free of
    the app; both at once share that core, as they share one GPU. From 3 cores on the first is kept for
    this process and the rest split into disjoint, equal shares (left to default, both engines land on
    core 0 and each runs half as fast)."""
    if len(cores) == 2:
        return CoreLayout((cores[0],), str(cores[1]), str(cores[1]))
    return _halves(cores[1:])


def _per_engine(cores: tuple[int, ...]) -> CoreLayout:
    """Every core split between the two workers, this process and the schedulers unpinned: on 2 cores
    12-15% more tokens/s for each engine than fair (docs/benchmarks.md, "Fair on 2 cores"), but the
    app and the busy-polling schedulers then run on the workers' cores, unevenly, and tilt the speedup."""
    return _halves(cores)


def _halves(cores: tuple[int, ...]) -> CoreLayout:
    half = len(cores) // 2
    return CoreLayout(None, _core_list(cores[:half]), _core_list(cores[half:2 * half]))


def split_cores(cores: tuple[int, ...]) -> tuple[str | None, str | None]:
    """VLLM_CPU_OMP_THREADS_BIND values for baseline and speculative (see core_layout)."""
    layout = core_layout(cores)
    return layout.baseline, layout.speculative


def pin_process(cores: tuple[int, ...]) -> None:
    """Pin every thread of this process to `cores` (sched_setaffinity is per thread on Linux); threads and
    processes started afterwards inherit it, the engines' schedulers included."""
    os.environ.setdefault(CORES_ENV, ",".join(map(str, usable_cores())))
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cores)
        except OSError:  # a thread that has just ended
            pass


def _core_list(cores: tuple[int, ...]) -> str:
    contiguous = list(cores) == list(range(cores[0], cores[-1] + 1))
    if contiguous:
        return str(cores[0]) if len(cores) == 1 else f"{cores[0]}-{cores[-1]}"
    return ",".join(map(str, cores))
