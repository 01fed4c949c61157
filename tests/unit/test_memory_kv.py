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
    # before the engines have said what they reserved: the plan's figure, labelled as the plan's
    assert note == ("baseline: weights 0.50 GiB + KV cache 1.00 GiB planned · speculative: weights 0.50 GiB + "
                    "draft model 0.42 GiB + KV cache 1.00 GiB planned")
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


def test_the_chart_shows_what_vllm_reserved_beside_the_plans_estimate():
    """Issue 45: the chart's "reserved" was the plan's estimate (14.65 GiB where vLLM's log said 15.12)."""
    gib = 1024 ** 3
    memory_plan = plan(get_preset("smollm2-layerskip-draft"), Hardware(0, None, (0, 1)))  # 1 GiB planned each
    note = charts.plan_note(memory_plan, {BASELINE: int(0.99 * gib), SPECULATIVE: int(1.2 * gib)})
    assert "baseline: weights 0.50 GiB + KV cache 0.99 GiB reserved (planned 1.00 GiB)" in note  # within 5%: no gap
    assert "KV cache 1.20 GiB reserved (planned 1.00 GiB, +20%)" in note
    assert charts.kv_note(None, gib) == "KV cache 1.00 GiB planned" and charts.kv_note(gib, None) == "KV cache 1.00 GiB reserved"
    assert charts.kv_note(int(0.9 * gib), gib) == "KV cache 0.90 GiB reserved (planned 1.00 GiB, -10%)"


CACHE_INFO_PAGE = """# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="auto",engine="0",enable_prefix_caching="True",num_cpu_blocks="None",num_gpu_blocks="1936"} 1.0
# HELP vllm:kv_cache_usage_perc KV-cache usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.0
"""


def test_a_servers_reserved_kv_cache_comes_from_its_cache_config_info():
    from specplay.engine.kv_cache import parse_cache_config_info, served_kv_cache_bytes

    assert parse_cache_config_info(CACHE_INFO_PAGE)["num_gpu_blocks"] == "1936"
    per_token = 131072  # Llama-3.1-8B in bf16: 2 x 32 layers x 8 KV heads x 128 x 2 bytes
    assert served_kv_cache_bytes(CACHE_INFO_PAGE, per_token) == 1936 * 16 * per_token
    assert served_kv_cache_bytes(CACHE_INFO_PAGE, None) is None  # the server doesn't say its models' shapes
    assert served_kv_cache_bytes("vllm:kv_cache_usage_perc 0.0\n", per_token) is None
    assert parse_cache_config_info("vllm:cache_config_info{ garbled") is None
