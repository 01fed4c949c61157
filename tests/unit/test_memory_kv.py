"""Memory that says something: the KV cache in use per engine (the scheduler's kv_cache_usage from each
engine's stat logger), sampled beside NVML/RSS and drawn on a second axis; what the memory plan says each
engine holds (weights, draft, KV cache reserved) on the chart."""

from __future__ import annotations

import os
from types import SimpleNamespace

from specplay.core.events import BASELINE, SPECULATIVE
from specplay.core.hardware import Hardware
from specplay.engine.telemetry import MemorySampler, MemorySeries, kv_usage_of
from specplay.engine.vllm_engine import Engine, _CountersLogger
from specplay.page import charts
from specplay.plan.memory import plan
from specplay.presets.catalog import engine_settings, get_preset
from tests.ui_fixtures import FakePair


def test_the_stat_logger_keeps_the_schedulers_latest_kv_cache_usage():
    logger = _CountersLogger()
    assert logger.kv_cache_usage is None
    logger.record(SimpleNamespace(kv_cache_usage=0.25, spec_decoding_stats=None), None)
    logger.record(None, None)  # a step without scheduler stats keeps the last figure
    assert logger.kv_cache_usage == 0.25
    engine = Engine(engine_settings(get_preset("smollm2-ngram"), Hardware(0, None, (0, 1)))[0])
    assert engine.kv_cache_usage() is None
    engine._counters = logger
    assert engine.kv_cache_usage() == 0.25


def test_the_sampler_records_kv_usage_beside_memory():
    usage = {BASELINE: 0.1, SPECULATIVE: None}
    sampler = MemorySampler(lambda: {BASELINE: [os.getpid()], SPECULATIVE: [os.getpid()]}, kv_usage=lambda: usage)
    sampler.sample_once()
    usage[BASELINE] = 0.3
    sampler.sample_once()
    series = sampler.series()
    assert series[BASELINE].kv_cache_usage == (0.1, 0.3) and series[SPECULATIVE].kv_cache_usage == (None, None)
    assert len(series[BASELINE].values) == 2 and series[BASELINE].latest > 0
    assert kv_usage_of(FakePair(lambda r: [])) == {BASELINE: None, SPECULATIVE: None}  # not reported: None


def test_memory_chart_draws_kv_cache_in_use_on_a_second_axis_with_the_plans_note():
    gib = 1024 ** 3
    series = {BASELINE: MemorySeries(BASELINE, (10.0, 11.0), (2 * gib, 3 * gib), (0.05, 0.5)),
              SPECULATIVE: MemorySeries(SPECULATIVE, (10.0, 11.0), (2 * gib, 2 * gib), (None, None))}
    note = charts.plan_note(plan(get_preset("smollm2-layerskip-draft"), Hardware(0, None, (0, 1))))
    assert note == ("baseline: weights 0.50 GiB + KV cache 1.00 GiB reserved · speculative: weights 0.50 GiB + "
                    "draft model 0.42 GiB + KV cache 1.00 GiB reserved")
    fig = charts.memory_figure(series, "resident memory (RSS, CPU)", origin=10.0, plan_note=note)
    kv = [d for d in fig.data if d.yaxis == "y2"]
    assert len(kv) == 1 and list(kv[0].y) == [5.0, 50.0] and kv[0].name == "baseline: KV cache in use"
    assert fig.layout.yaxis2.title.text == "KV cache in use (%)" and "draft model 0.42 GiB" in fig.layout.title.text
    plain = charts.memory_figure({BASELINE: MemorySeries(BASELINE, (10.0,), (gib,))}, "RSS", origin=10.0)
    assert len(plain.data) == 2 and "yaxis2" not in plain.to_plotly_json()["layout"]  # nothing reported: no second axis


def test_remote_servers_kv_usage_comes_from_their_metrics_page():
    from specplay.engine.remote import parse_kv_usage

    page = ('# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.\n'
            'vllm:kv_cache_usage_perc{engine="0",model_name="target"} 0.125\n'
            'vllm:kv_cache_usage_perc_other 0.9\n')
    assert parse_kv_usage(page) == 0.125 and parse_kv_usage("vllm:num_requests_running 1\n") is None
