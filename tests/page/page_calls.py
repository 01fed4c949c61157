"""What the page tests share: calls to the running app's API (`/run`, `/status`, `/switch_preset`) by output
name, and the prompts they send."""

from __future__ import annotations

import time

import pytest

from loadtest.soak import press_stop
from specplay.page.live_run import API_OUTPUTS as OUTPUTS  # what /run returns, by name

REWRITE = ("Rewrite this sentence in the passive voice: The committee approved the new budget on Monday, and "
           "the mayor signed it the next day.")
LAYERSKIP_MAX_TOKENS = 64
STOP_TOKENS = 900  # long enough that Stop lands mid-run even after the test machine froze for seconds
STORY = "Write a long story about a lighthouse keeper who talks to the sea. Make it at least ten paragraphs."


def run(client, prompt, max_tokens=48, temperature=0.0, schedule="sequential") -> dict:
    out = client.predict(prompt, max_tokens, temperature, schedule, api_name="/run")
    assert len(out) == len(OUTPUTS)
    return dict(zip(OUTPUTS, out))


def wait_streaming(job, role: str, tokens: int = 3, timeout: float = 120.0) -> None:
    """Until the run's `result` output (each engine's token ids while it streams) has at least `tokens` of
    `role`'s (baseline, speculative)."""
    from loadtest.visitors import tokens_so_far

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        updates = job.outputs()
        if updates and tokens_so_far(updates[-1][OUTPUTS.index("result")], role) >= tokens:
            return
        time.sleep(0.2)
    pytest.fail(f"the run never streamed {tokens} {role} tokens")



def stopped_mid_run(client, schedule: str, attempts: int = 3, seconds: dict | None = None) -> dict:
    """Start a long run, press Stop once it streams, return the run's last frame (by output name). This VM
    at times freezes a vCPU for 20-60 s while CPU engines run (docs/benchmarks.md, "Seconds-long freezes"),
    and the engines, in other processes, go on meanwhile: a Stop pressed after 3 tokens may arrive once the
    baseline has finished. Such a run says nothing about Stop, so it is run again, up to `attempts` times.
    `seconds`, if given, gets the stopped run's `answered` (Stop's reply) and `ended` (the run's last frame),
    each counted from the press."""
    for _ in range(attempts):
        job = client.submit(STORY, STOP_TOKENS, 0.0, schedule, api_name="/run")
        wait_streaming(job, "baseline")
        pressed = time.monotonic()
        press_stop(client)  # a lost reply (the run ended first, soak.press_stop) is judged by the run below
        answered = time.monotonic() - pressed
        out = dict(zip(OUTPUTS, job.result(timeout=300)))
        if len(out["result"]["baseline"]["token_ids"]) < STOP_TOKENS:  # Stop landed in the baseline's stream
            if seconds is not None:
                seconds.update(answered=answered, ended=time.monotonic() - pressed)
            return out
    pytest.fail(f"in {attempts} runs Stop never arrived before the baseline's {STOP_TOKENS} tokens")


def switch_to(client, preset) -> None:
    """Load `preset` unless the app runs it already (then the page's switch is a no-op)."""
    client.predict(preset, api_name="/switch_preset")
    assert wait_for(client, preset)["state"] == "ready"


def wait_for(client, preset, timeout=300.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = client.predict(api_name="/status")
        if status["preset"] == preset and status["state"] in ("ready", "error"):
            return status
        time.sleep(2)
    raise AssertionError(f"{preset} not ready after {timeout} s: {status}")
