"""Memory per engine over time, sampled in a background thread: what each engine costs to keep resident.

On a GPU: NVML's per-process used memory for the engine's processes (engine core and its workers). Where
NVML can't see them (a container's pid namespace hides them) it falls back to each device's used memory.
On a CPU: resident set size (RSS) summed over the engine's processes, labelled as RSS (it is not VRAM).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable

import psutil

from specplay.core.hardware import nvml

PROCESS_REFRESH_S = 10.0
PidsSource = Callable[[], dict[str, list[int]]]


@dataclass(frozen=True)
class MemorySeries:
    """One engine's samples: time.monotonic() stamps and bytes."""

    role: str
    times: tuple[float, ...]
    values: tuple[int, ...]
    # the engine's KV cache in use (0-1, vLLM's scheduler stats) at each sample; None where not reported
    kv_cache_usage: tuple[float | None, ...] = ()

    @property
    def latest(self) -> int | None:
        return self.values[-1] if self.values else None


def _with_children(pids: list[int]) -> list[int]:
    """The engine's own processes plus their workers (tensor-parallel ranks are children of the core)."""
    found = []
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            found.append(pid)
            found.extend(child.pid for child in proc.children(recursive=True))
        except psutil.Error:  # exited between listing and reading: nothing to count
            continue
    return sorted(set(found))


def _rss(process: psutil.Process) -> int:
    try:
        return process.memory_info().rss
    except psutil.Error:  # exited since it was listed
        return 0


def rss_bytes(pids: list[int]) -> int:
    total = 0
    for pid in _with_children(pids):
        try:
            total += _rss(psutil.Process(pid))
        except psutil.Error:
            continue
    return total


class NvmlReader:
    """Per-process GPU memory through NVML; `per_process` turns False when no engine pid is visible."""

    def __init__(self, devices_by_role: dict[str, list[int]] | None = None):
        self._nvml, self._handles = nvml()
        self._devices_by_role = devices_by_role or {}
        self.per_process = True

    def _process_memory(self) -> dict[int, int]:
        used: dict[int, int] = {}
        for handle in self._handles:
            try:
                procs = self._nvml.nvmlDeviceGetComputeRunningProcesses(handle)
            except self._nvml.NVMLError:
                continue
            for proc in procs:
                if proc.usedGpuMemory is not None:
                    used[proc.pid] = used.get(proc.pid, 0) + proc.usedGpuMemory
        return used

    def read(self, pids_by_role: dict[str, list[int]], with_children: bool = True) -> dict[str, int]:
        used = self._process_memory()
        expanded = ({role: _with_children(pids) for role, pids in pids_by_role.items()} if with_children
                    else pids_by_role)
        if any(pid in used for pids in expanded.values() for pid in pids):
            self.per_process = True
            return {role: sum(used.get(pid, 0) for pid in pids) for role, pids in expanded.items()}
        # Fallback: the engines' devices as a whole (when both share one GPU both read the same total).
        self.per_process = False
        out = {}
        for role in pids_by_role:
            devices = self._devices_by_role.get(role) or range(len(self._handles))
            out[role] = sum(self._nvml.nvmlDeviceGetMemoryInfo(self._handles[i]).used for i in devices)
        return out

    def close(self) -> None:
        try:
            self._nvml.nvmlShutdown()
        except Exception:
            pass


class MemorySampler:
    """Samples every engine's memory at `hz` in a daemon thread, keeping the last `window_s` seconds."""

    def __init__(self, pids: PidsSource, gpu: bool = False, hz: float = 4.0, window_s: float = 900.0,
                 devices_by_role: dict[str, list[int]] | None = None,
                 kv_usage: Callable[[], dict[str, float | None]] | None = None):
        self._pids = pids
        self._kv_usage = kv_usage  # per role, the KV cache in use (0-1), sampled beside the memory
        self._interval = 1.0 / hz
        self._samples: dict[str, deque] = {}
        self._maxlen = int(window_s * hz)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nvml = None
        self._process_cache: dict[str, list[psutil.Process]] = {}
        self._process_key: tuple | None = None
        self._process_at = 0.0
        if gpu:
            try:
                self._nvml = NvmlReader(devices_by_role)
            except Exception:  # no NVML after all: RSS is still worth showing
                self._nvml = None

    @property
    def kind(self) -> str:
        if self._nvml is None:
            return "rss"
        return "nvml" if self._nvml.per_process else "nvml-device"

    @property
    def label(self) -> str:
        return {
            "rss": "resident memory (RSS, CPU)",
            "nvml": "GPU memory per engine process (NVML)",
            "nvml-device": "GPU memory used on the engine's device(s) (NVML)",
        }[self.kind]

    def _processes(self) -> dict[str, list[psutil.Process]]:
        """Each engine's processes with their workers. Finding children scans all of /proc (about 1 ms an
        engine process: several percent of a core at 4 Hz, on a CPU the engines need), so the list is
        kept until the engines change or PROCESS_REFRESH_S passes."""
        pids = self._pids()
        key = tuple(sorted((role, tuple(p)) for role, p in pids.items()))
        now = time.monotonic()
        if key != self._process_key or now - self._process_at > PROCESS_REFRESH_S:
            procs = {}
            for role, role_pids in pids.items():
                procs[role] = []
                for pid in _with_children(role_pids):
                    try:
                        procs[role].append(psutil.Process(pid))
                    except psutil.Error:
                        continue
            self._process_cache, self._process_key, self._process_at = procs, key, now
        return self._process_cache

    def sample_once(self) -> dict[str, int]:
        procs = self._processes()
        if self._nvml:
            values = self._nvml.read({role: [p.pid for p in ps] for role, ps in procs.items()}, with_children=False)
        else:
            values = {role: sum(_rss(p) for p in ps) for role, ps in procs.items()}
        kv = {}
        if self._kv_usage is not None:
            try:
                kv = self._kv_usage() or {}
            except Exception:  # an engine being swapped: no usage this tick
                kv = {}
        now = time.monotonic()
        with self._lock:
            for role, value in values.items():
                self._samples.setdefault(role, deque(maxlen=self._maxlen)).append((now, value, kv.get(role)))
        return values

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.sample_once()
            except Exception:  # a process vanished mid-read; the next tick reads again
                pass
            self._stop.wait(self._interval)

    def start(self) -> "MemorySampler":
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name="memory-sampler", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        if self._nvml is not None:
            self._nvml.close()
            self._nvml = None

    def series(self, since: float | None = None) -> dict[str, MemorySeries]:
        """Samples per engine, from `since` (a time.monotonic() value) on."""
        with self._lock:
            copies = {role: list(samples) for role, samples in self._samples.items()}
        out = {}
        for role, samples in copies.items():
            kept = [s for s in samples if since is None or s[0] >= since]
            out[role] = MemorySeries(role, tuple(s[0] for s in kept), tuple(s[1] for s in kept),
                                     tuple(s[2] for s in kept))
        return out


def sampler_for_pair(pair, gpu: bool) -> MemorySampler:
    """A sampler over the pair's engine processes; on a GPU, each engine's own devices where it has them."""
    devices = {role: list(engine.devices) for role, engine in pair.engines.items() if engine.devices}
    return MemorySampler(pair.process_ids, gpu=gpu, devices_by_role=devices, kv_usage=lambda: kv_usage_of(pair))


def kv_usage_of(pair) -> dict[str, float | None]:
    """Each engine's KV cache in use (0-1), read from the engines the pair holds now (a swap replaces one);
    None for an engine that doesn't report it."""
    out = {}
    for role, engine in pair.engines.items():
        read = getattr(engine, "kv_cache_usage", None)
        out[role] = read() if callable(read) else None
    return out
