"""What `vllm bench serve` reports, without engines: TTFT / TPOT / ITL / e2e percentiles of a batch, the
open-loop request-rate sweep (Poisson arrivals honoured by EnginePair._batch), the rate at which speculation
stops paying, vllm bench serve's flag names and its equivalent command."""

from __future__ import annotations

import asyncio
import math
import time

import pytest

from specplay.bench import latency
from specplay.bench.report import BenchRow
from specplay.bench.runner import BenchRun, BenchSettings, make_plan
from specplay.bench.workloads import WorkloadPrompt
from specplay.cli import main as cli
from specplay.core.events import BASELINE, SPECULATIVE, GenerationRequest, SpecDecodeCounters
from specplay.core.hardware import Hardware
from specplay.engine.pair import EnginePair
from specplay.presets.catalog import get_preset
from tests.unit.test_bench import RecordingPair, trace


def test_ttft_tpot_itl_and_e2e_per_request_and_per_gap():
    # two requests: chunks at 0.1, 0.3, 0.4 s (4 tokens) and at 0.2, 0.6 s (2 tokens), both submitted at 0
    a = trace(SPECULATIVE, [1, 2, 1], 0.0)
    a.step_times = [0.1, 0.3, 0.4]
    b = trace(SPECULATIVE, [1, 1], 0.0)
    b.step_times = [0.2, 0.6]
    samples = latency.request_samples([a, b])
    assert samples["ttft"] == [0.1, 0.2] and samples["latency"] == [0.4, 0.6]
    assert samples["tpot"] == pytest.approx([0.1, 0.4])  # (0.4-0.1)/3, (0.6-0.2)/1
    assert samples["itl"] == pytest.approx([0.2, 0.1, 0.4])  # every gap between chunks
    figs = latency.latency_figures([a, b])
    assert figs["ttft_p50_s"] == pytest.approx(0.15) and figs["itl_p99_s"] == pytest.approx(0.396)
    assert set(figs) == {f"{m}_{q}_s" for m in ("ttft", "tpot", "itl", "latency") for q in ("p50", "p90", "p99")}


def test_poisson_arrivals_are_seeded_and_inf_is_all_at_once():
    first = latency.poisson_arrivals(200, 10.0, seed=3)
    assert first == latency.poisson_arrivals(200, 10.0, seed=3) != latency.poisson_arrivals(200, 10.0, seed=4)
    assert first[0] == 0 and all(b >= a for a, b in zip(first, first[1:]))
    assert 12 < first[-1] < 28  # 199 gaps of mean 0.1 s
    assert latency.poisson_arrivals(3, math.inf) == [0.0] * 3
    with pytest.raises(ValueError):
        latency.parse_rate("0")
    assert latency.parse_rate("inf") == math.inf


def test_rate_sweep_rows_sit_beside_the_closed_loop_ones_and_get_their_arrivals():
    preset = get_preset("smollm2-ngram")
    settings = BenchSettings(preset.name, workloads=("qa",), n=3, concurrency=(1,), request_rate=(2.0, math.inf))
    plan = make_plan(settings, preset, ["qa"])
    assert [(s.concurrency, s.request_rate) for s in plan.settings] == [(1, None), (3, 2.0), (3, math.inf)]
    assert plan.baseline_batches == 3

    class Pair(RecordingPair):
        arrivals = []

        def run_batch(self, role, requests, concurrency, cancel=None, arrival_times=None):
            self.arrivals.append(arrival_times)
            return super().run_batch(role, requests, concurrency, cancel)

    pair = Pair(preset)
    bench = BenchRun(pair, preset, settings, {"qa": [WorkloadPrompt("x", prompt="x")] * 3},
                     Hardware(0, None, (0, 1)), warmup=False)
    list(bench.run())
    result = bench.result().model_dump()  # as bench.json holds it
    assert [r["request_rate"] for r in result["rows"]] == [None, 2.0, "inf"]
    assert pair.arrivals[0] is None and pair.arrivals[2] == latency.poisson_arrivals(3, 2.0, 0)
    assert result["settings"]["request_rate"] == [2.0, "inf"]
    row = result["rows"][1]
    assert row["tpot_p50_s_baseline"] is not None and row["itl_p99_s_speculative"] is not None
    assert row["ttft_p90_s_speculative"] is not None and row["latency_p99_s_baseline"] is not None
    assert [a["sentence"] for a in result["rate_advice"]][0].startswith("speculation paid at every rate")
    lines = result["vllm_bench_serve"]["qa"]
    assert "--dataset-name custom --dataset-path" in lines[SPECULATIVE] and "qa.jsonl" in lines[SPECULATIVE]
    assert "--base-url http://127.0.0.1:8001" in lines[SPECULATIVE] and "--request-rate 2" in lines[BASELINE]
    assert "--model HuggingFaceTB/SmolLM2-135M-Instruct" in lines[BASELINE] and "--num-prompts 3" in lines[BASELINE]


def test_rate_sentence_says_where_speculation_stops_paying():
    rows = [BenchRow(workload="qa", temperature=0.0, concurrency=1, k=4, request_rate=r, speedup=s)
            for r, s in ((1.0, 1.6), ("inf", 0.8), (8.0, 1.1), (16.0, 0.9))]
    [advice] = latency.rate_sentences(rows)
    assert advice.stops_paying_at == 16.0
    assert "pays up to 8 req/s (1.10×) and stops paying at 16 req/s (0.90×)" in advice.sentence


class _Engine:
    def __init__(self):
        self.submitted = []

    def counters(self):
        return SpecDecodeCounters()

    async def stream(self, request_id, ids, request):
        from specplay.engine.vllm_engine import Chunk

        self.submitted.append(time.monotonic())
        yield Chunk([1], "a", True, "length")


def test_batch_submits_each_request_at_its_arrival_time():
    pair = EnginePair.__new__(EnginePair)
    pair.engines = {BASELINE: _Engine()}
    requests = [GenerationRequest(prompt="x", max_tokens=1)] * 3
    started = time.monotonic()
    result = asyncio.run(pair._batch("b", BASELINE, [[1]] * 3, requests, 3, None, [0.0, 0.2, 0.1]))
    offsets = sorted(t - started for t in pair.engines[BASELINE].submitted)
    assert offsets[0] < 0.08 and 0.09 < offsets[1] < 0.18 and 0.19 < offsets[2] < 0.3
    assert len(result.traces) == 3 and result.wall_seconds >= 0.19


def test_bench_takes_vllm_bench_serve_flag_names_and_the_old_ones():
    parser = cli._parser()
    new = parser.parse_args(["bench", "--preset", "smollm2-ngram", "--num-prompts", "8", "--max-concurrency", "1,4",
                             "--result-dir", "/tmp/x", "--request-rate", "1,inf", "--seed", "2"])
    old = parser.parse_args(["bench", "--preset", "smollm2-ngram", "--n", "8", "--concurrency", "1,4", "--out", "/tmp/x"])
    assert (new.n, new.concurrency, new.out) == (old.n, old.concurrency, old.out) == (8, "1,4", "/tmp/x")
    from specplay.cli.bench import settings_from_args

    settings = settings_from_args(new)
    assert settings.request_rate == (1.0, math.inf) and settings.seed == 2 and settings.concurrency == (1, 4)


def test_rate_sentence_names_faster_rates_past_the_first_loss():
    # The H200 sweep of 2026-12-02: 0.80× at 128 req/s, then 1.03× at 256 and 1.38× all at once; the old
    # sentence said "didn't pay at any rate measured".
    rows = [BenchRow(workload="token-ids", temperature=0.0, concurrency=1, k=3, acceptance=0.7, request_rate=r,
                     speedup=s) for r, s in ((128.0, 0.802), (256.0, 1.034), ("inf", 1.379))]
    [advice] = latency.rate_sentences(rows)
    assert advice.stops_paying_at == 128.0
    assert "didn't pay at any rate" not in advice.sentence
    assert advice.sentence.startswith("speculation lost at the lowest rate measured (0.80× at 128 req/s)")
    assert "faster again at 256 req/s (1.03×), all at once (1.38×)" in advice.sentence
