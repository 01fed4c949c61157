"""The remote backend without servers: URLs the operator gives, the metrics page and the usage chunk read,
two servers checked as partners (fakes of the engines' read-outs)."""

from __future__ import annotations

import pytest

from specplay.core.events import BASELINE, SPECULATIVE, SpecDecodeCounters
from specplay.engine.remote import RemoteSettings, parse_metrics, usage_counters
from specplay.engine.vllm_engine import EngineStartError
from specplay.run.remote import check_partners, remote_settings

METRICS = """# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
vllm:spec_decode_num_drafts_total{engine="0",model_name="t"} 4.0
vllm:spec_decode_num_drafts_created{engine="0",model_name="t"} 1.7e+09
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="t"} 16.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="t"} 10.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="t",position="0"} 4.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="t",position="1"} 3.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="t",position="2"} 2.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="t",position="3"} 1.0
"""


@pytest.mark.parametrize("url", ["file:///etc/passwd", "127.0.0.1:8000", "http://host:8000/v1", "ftp://host",
                                 "http://", "javascript:alert(1)"])
def test_malformed_or_non_http_urls_are_refused_naming_the_side(url):
    with pytest.raises(ValueError, match="speculative server: expected a URL like http://HOST:PORT"):
        RemoteSettings(SPECULATIVE, url)


def test_api_key_comes_from_the_environment_and_is_not_stored(monkeypatch):
    monkeypatch.setenv("MY_KEY", "sk-secret")
    settings = RemoteSettings(BASELINE, "http://127.0.0.1:8000", api_key_env="MY_KEY")
    assert "sk-secret" not in repr(settings)
    assert settings.headers() == {"Authorization": "Bearer sk-secret"}
    monkeypatch.delenv("MY_KEY")
    assert settings.headers() == {}


def test_metrics_page_becomes_the_engines_counters():
    assert parse_metrics(METRICS) == SpecDecodeCounters(4, 16, 10, (4, 3, 2, 1))
    assert parse_metrics("# nothing about speculation\nvllm:num_requests_running 0.0\n") == SpecDecodeCounters()


def test_usage_chunk_counters_match_the_histogram():
    chunk = {"usage": {"completion_tokens": 10}, "metrics": {"speculative_decoding": {
        "acceptance_histogram": [0, 0, 0, 1, 1], "num_draft_tokens": 8, "num_spec_tokens": 4}}}
    assert usage_counters(chunk) == SpecDecodeCounters(2, 8, 7, (2, 2, 2, 1))
    assert usage_counters({"usage": {}}) is None  # a server without per-request metrics


class _Side:
    def __init__(self, root="/m/a", spec=False, tokens=(1, 2, 3)):
        self.model, self.model_root, self.has_spec_metrics = "target", root, spec
        self.settings, self._tokens = RemoteSettings(BASELINE, "http://127.0.0.1:1"), list(tokens)

    def tokenize_text(self, text):
        return self._tokens


@pytest.mark.parametrize("baseline,speculative,message", [
    (_Side(root="/m/a"), _Side(root="/m/b", spec=True), "serve different models"),
    (_Side(), _Side(spec=False), "speculative server has no speculative config"),
    (_Side(spec=True), _Side(spec=True), "baseline server drafts too"),
    (_Side(), _Side(spec=True, tokens=(1, 2, 4)), "tokenize text differently"),
])
def test_servers_that_cannot_be_compared_are_refused(baseline, speculative, message):
    with pytest.raises(EngineStartError, match=message):
        check_partners(baseline, speculative)


def test_a_fair_pair_passes_and_settings_carry_the_operators_choices():
    check_partners(_Side(), _Side(spec=True))
    b, s = remote_settings("http://127.0.0.1:8000", "http://127.0.0.1:8001/", timeout_s=5, pids={SPECULATIVE: [42]})
    assert (b.role, s.role, s.base, s.timeout_s, s.pids, b.pids) == (BASELINE, SPECULATIVE, "http://127.0.0.1:8001",
                                                                     5, (42,), ())


def test_launch_runs_the_serve_lines_engine_arguments():
    import json as _json

    from specplay.presets.catalog import engine_settings, get_preset, serve_commands
    from specplay.run.launch import server_argv

    preset = get_preset("smollm2-ngram")
    _, spec = engine_settings(preset)
    argv = server_argv(spec.engine_args, 8101, per_request="detailed")
    named = server_argv(spec.engine_args, 8101, served_as="HuggingFaceTB/SmolLM2-135M-Instruct")
    assert named[-2:] == ["HuggingFaceTB/SmolLM2-135M-Instruct", "target"]
    assert argv[1:4] == ["-m", "vllm.entrypoints.openai.api_server", "--model"]
    config = _json.loads(argv[argv.index("--speculative-config") + 1])
    assert config == preset.speculative_config.vllm  # the preset's speculative_config, verbatim
    assert argv[argv.index("--per-request-spec-decode-metrics") + 1] == "detailed"
    assert argv[-6:] == ["--host", "127.0.0.1", "--port", "8101", "--served-model-name", "target"]

    line = serve_commands(preset)[SPECULATIVE]
    for flag in ("--dtype", "--max-model-len", "--seed", "--speculative-config"):  # what the page prints
        assert flag in line and flag in argv


def test_the_bench_refuses_a_k_sweep_on_servers():
    from specplay.bench.runner import BenchError, BenchRun, BenchSettings
    from specplay.core.hardware import Hardware
    from specplay.presets.catalog import get_preset
    from specplay.run.remote import RemotePair

    class Servers:
        can_swap_speculative = RemotePair.can_swap_speculative

    preset = get_preset("smollm2-ngram")
    settings = BenchSettings(preset.name, workloads=("code",), n=1, k=(2, 4))
    with pytest.raises(BenchError, match="speculative server runs what it was started with"):
        BenchRun(Servers(), preset, settings, {"code": ["x"]}, Hardware(0, None, (0, 1)))
    BenchRun(Servers(), preset, BenchSettings(preset.name, workloads=("code",), n=1), {"code": ["x"]},
             Hardware(0, None, (0, 1)))  # the loaded k only: fine


def test_the_metrics_page_is_read_by_prometheus_clients_parser():
    """Two engines summed, TYPE and HELP lines (a HELP with braces and quotes), a label order of vLLM's own,
    escaped label values; a garbled page raises instead of being half read."""
    page = ("# HELP vllm:spec_decode_num_drafts Number of {spec} \"drafts\".\n"
            "# TYPE vllm:spec_decode_num_drafts counter\n"
            'vllm:spec_decode_num_drafts_total{engine="0",model_name="a \\"b\\""} 4.0\n'
            'vllm:spec_decode_num_drafts_total{engine="1",model_name="a \\"b\\""} 2.0\n'
            'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="1",engine="0"} 3.0\n'
            'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="0",engine="0"} 5.0\n'
            'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="0",engine="1"} 1.0\n')
    assert parse_metrics(page) == SpecDecodeCounters(6, 0, 0, (6, 3))
    with pytest.raises(ValueError):
        parse_metrics('vllm:spec_decode_num_drafts_total{engine="0" 4.0\n')


def test_a_garbled_metrics_page_leaves_the_last_counters_standing():
    import time

    from specplay.engine.remote import RemoteEngine
    from tests import fake_vllm_server

    behaviour = fake_vllm_server.Behaviour(metrics_text=METRICS)
    server, url = fake_vllm_server.start(behaviour)
    engine = RemoteEngine(RemoteSettings(SPECULATIVE, url))
    try:
        assert engine.counters() == SpecDecodeCounters(4, 16, 10, (4, 3, 2, 1))
        behaviour.metrics_text = "vllm:spec_decode_num_drafts_total{ 1\n"
        time.sleep(0.25)  # past the 0.2 s the last page is reused for, so the garbled one is read
        assert engine.counters() == SpecDecodeCounters(4, 16, 10, (4, 3, 2, 1))
        assert [path for path, _ in behaviour.requests].count("/metrics") == 2
    finally:
        engine.shutdown()
        fake_vllm_server.stop(server)


def test_a_printed_vllm_bench_serve_line_names_a_model_launch_serves():
    """The bench's `vllm bench serve --model NAME` lines got HTTP 404 from launch's servers, which served only
    "target": launch now serves the serve lines' name too."""

    from specplay.bench.latency import vllm_bench_commands
    from specplay.bench.runner import BenchSettings
    from specplay.presets.catalog import engine_settings, get_preset
    from specplay.presets.engines import serve_model
    from specplay.run.launch import server_argv

    preset = get_preset("smollm2-ngram")
    line = vllm_bench_commands(preset, BenchSettings(preset.name), 32, ["code"])["code"][SPECULATIVE].split()
    _, spec = engine_settings(preset)
    argv = server_argv(spec.engine_args, 8001, served_as=serve_model(preset.target.model))
    served = argv[argv.index("--served-model-name") + 1:]
    assert line[line.index("--model") + 1] in served and "target" in served
