"""Shared helpers for the bench tests: synthetic traces, batches and rows, and a pair that records the bench's
engine swaps (no engines)."""

from __future__ import annotations

from specplay.bench.runner import Setting, bench_row
from specplay.core.events import BASELINE, SPECULATIVE, SpecDecodeCounters
from specplay.engine.base import EngineInfo
from specplay.engine.batch import BatchResult
from specplay.run.comparison import EngineTrace


def trace(role: str, sizes: list[int], step_s: float, submitted: float = 0.0, first_token_s: float = 0.05,
          ids: list[int] | None = None) -> EngineTrace:
    t = EngineTrace(role, submitted_at=submitted, finished=True, finish_reason="length")
    for i, size in enumerate(sizes):
        t.step_sizes.append(size)
        t.step_times.append(submitted + first_token_s + step_s * i)
    t.token_ids = list(ids) if ids is not None else list(range(sum(sizes)))
    return t


def batch(role, traces, counters=SpecDecodeCounters(), wall=None, concurrency=1):
    wall = wall if wall is not None else max(t.step_times[-1] for t in traces)
    return BatchResult(role, traces, counters, wall, concurrency)


def synthetic_rows(workloads=("code", "chat"), ks=(2, 4, 6), temps=(0.0, 1.0), concs=(1, 4)):
    rows = []
    for w in workloads:
        for T in temps:
            for c in concs:
                base = batch(BASELINE, [trace(BASELINE, [1] * 21, 0.05), trace(BASELINE, [1] * 31, 0.05)], wall=2.0)
                for k in ks:
                    sizes = [1] + [1 + i % 3 for i in range(15)]
                    spec = batch(SPECULATIVE, [trace(SPECULATIVE, sizes, 0.05 * (1 + 0.04 * k))] * 2,
                                 SpecDecodeCounters(30, 30 * k, 30, tuple([12, 10, 8] + [0] * k)[:k]), wall=1.1)
                    rows.append(bench_row(Setting(w, T, c, k), base, spec))
    return rows


class RecordingPair:
    """Stands in for a started pair in the bench's own bookkeeping: each speculative swap is recorded and every
    batch answered with synthetic traces. (The swap itself on real engines: test_real_bench_on_the_cpu.)"""

    def __init__(self, preset, fail_at_k=None):
        self.tag, self.fail_at_k, self.swaps = preset, fail_at_k, []
        self.engines = {BASELINE: object(), SPECULATIVE: object()}

    def swap_speculative(self, settings, tag=None, progress=None):
        self.swaps.append(settings.engine_args["speculative_config"]["num_speculative_tokens"])
        self.engines[SPECULATIVE], self.tag = object(), tag or self.tag

    def engine_info(self):
        return {BASELINE: EngineInfo(), SPECULATIVE: EngineInfo(num_speculative_tokens=self.tag.num_speculative_tokens)}

    def run_batch(self, role, requests, concurrency, cancel=None, arrival_times=None):
        k = self.tag.num_speculative_tokens
        if role == SPECULATIVE and k == self.fail_at_k:
            raise RuntimeError("the engine died")
        if role == BASELINE:
            return batch(role, [trace(role, [1] * 9, 0.05) for _ in requests])
        return batch(role, [trace(role, [1, 3, 2, 3], 0.06) for _ in requests],
                     SpecDecodeCounters(3, 3 * k, 5, tuple([3, 2] + [0] * (k - 2))))
