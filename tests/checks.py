"""Invariants of one comparison's result (the `compare --json` object, which the page's /run returns too),
shared by the in-process engine tests and the page's end-to-end tests."""

from __future__ import annotations

import pytest


def check_statistics(result: dict, k: int, max_tokens: int) -> int:
    """Chunks, step counts, counters and outputs agree with each other; returns the accepted tokens read off
    the tokens and the exact step count."""
    base, spec = result["baseline"], result["speculative"]
    # chunks add up to the output; vLLM merges DELTA chunks a lagging consumer hasn't taken, so a chunk may
    # hold several steps' tokens: counted steps come from the tokens or the request's counters
    assert sum(spec["step_sizes"]) == len(spec["token_ids"]) > 0
    assert sum(base["step_sizes"]) == len(base["token_ids"])
    assert all(size >= 1 for size in base["step_sizes"] + spec["step_sizes"])
    assert base["steps_source"] == "tokens" and base["steps"] == len(base["token_ids"])  # one token a step
    assert base["tokens_per_step"] in (None, 1.0)
    if spec["acceptance_source"] == "per-request":
        assert spec["steps_source"] == "per-request"
    assert len(spec["step_sizes"]) <= spec["steps"]  # a chunk is at least one step
    decode_tokens, decode_steps = len(spec["token_ids"]) - spec["step_sizes"][0], spec["steps"] - 1
    assert decode_steps <= decode_tokens <= (k + 1) * decode_steps  # 1 to k+1 tokens a decode step
    assert spec["num_drafts"] <= decode_steps + 1
    assert spec["num_accepted"] <= spec["num_draft_tokens"] <= k * spec["num_drafts"]
    assert sum(spec["accepted_per_position"]) == spec["num_accepted"]
    assert spec["accepted_per_position"] == sorted(spec["accepted_per_position"], reverse=True)
    # accepted tokens read off the output (each decode step emits its accepted drafts + 1) match the engine's
    # counter; the last step may have accepted drafts that max_tokens or EOS cut from the output
    from_tokens = decode_tokens - decode_steps
    assert from_tokens <= spec["num_accepted"] <= from_tokens + k
    if spec["finish_reason"] == "length" and len(spec["token_ids"]) < max_tokens:
        pytest.fail("length finish before max tokens")
    return from_tokens


def check_draft_model_statistics(result: dict, k: int, max_tokens: int) -> None:
    """A draft model drafts every decode step: its counters and the step counts tell the same story."""
    accepted = check_statistics(result, k, max_tokens)
    spec = result["speculative"]
    # the mean acceptance length read off the tokens is the engine's 1 + accepted / drafts (up to the last
    # step, which output truncation may cut)
    decode_steps = spec["steps"] - 1
    assert decode_steps <= spec["num_drafts"] <= decode_steps + 1
    assert spec["num_draft_tokens"] == k * spec["num_drafts"]
    tokens_mal = 1 + accepted / decode_steps
    assert abs(tokens_mal - spec["mean_acceptance_length"]) < 0.25, (tokens_mal, spec["mean_acceptance_length"])
    assert 0 < spec["acceptance_rate"] < 1  # a real, imperfect draft


def shown_to_2_places(value: float) -> set[str]:
    """What a page may show, to 2 places, for a figure the run's JSON keeps to 3: the page rounds the unrounded
    figure, so a JSON 0.975 (from 0.9751 or 0.9749) reads 0.98 or 0.97 there (a clean clone: 0.98× on the page
    for a JSON 0.975, which formats as 0.97)."""
    return {f"{value + d:.2f}" for d in (-0.0005, 0.0, 0.0005)}
