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


@lru_cache(maxsize=1)
def detect() -> Hardware:
    count, name = gpu_count_and_name()
    return Hardware(count, name, tuple(sorted(os.sched_getaffinity(0))))


def split_cores(cores: tuple[int, ...]) -> tuple[str, str]:
    """VLLM_CPU_OMP_THREADS_BIND values for baseline and speculative: disjoint, equal shares of this
    process's cores (left to default, both engines land on core 0 and each runs half as fast). From 3 cores
    on, the first is kept for this process (the page, the engines' output handling), so rendering never
    takes time from an engine."""
    if len(cores) < 2:
        return (str(cores[0]),) * 2 if cores else ("0", "0")
    usable = cores[1:] if len(cores) >= 3 else cores
    half = len(usable) // 2
    return _core_list(usable[:half]), _core_list(usable[half:2 * half])


def _core_list(cores: tuple[int, ...]) -> str:
    contiguous = list(cores) == list(range(cores[0], cores[-1] + 1))
    if contiguous:
        return str(cores[0]) if len(cores) == 1 else f"{cores[0]}-{cores[-1]}"
    return ",".join(map(str, cores))
