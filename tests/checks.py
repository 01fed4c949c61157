"""Invariants of one comparison's result (the `compare --json` object, which the page's /run returns too),
shared by the in-process engine tests and the page's end-to-end tests."""

from __future__ import annotations

import pytest


def check_statistics(result: dict, k: int, max_tokens: int) -> int:
    """Chunks, counters and outputs agree with each other; returns the accepted tokens read off the chunks."""
    base, spec = result["baseline"], result["speculative"]
    # every streamed chunk is one engine step; chunks add up to the output
    assert sum(spec["step_sizes"]) == len(spec["token_ids"]) > 0
    assert sum(base["step_sizes"]) == len(base["token_ids"])
    assert all(size == 1 for size in base["step_sizes"])  # no speculation, one token a step
    assert all(1 <= size <= k + 1 for size in spec["step_sizes"])
    assert spec["num_accepted"] <= spec["num_draft_tokens"] <= k * spec["num_drafts"]
    assert sum(spec["accepted_per_position"]) == spec["num_accepted"]
    assert spec["accepted_per_position"] == sorted(spec["accepted_per_position"], reverse=True)
    # accepted tokens read off the chunks (size - 1 per decode step) match the engine's counter; the
    # last step may have accepted drafts that max_tokens or EOS cut from the output
    from_chunks = sum(size - 1 for size in spec["step_sizes"][1:])
    assert from_chunks <= spec["num_accepted"] <= from_chunks + k
    if spec["finish_reason"] == "length" and len(spec["token_ids"]) < max_tokens:
        pytest.fail("length finish before max tokens")
    return from_chunks


def check_draft_model_statistics(result: dict, k: int, max_tokens: int) -> None:
    """A draft model drafts every decode step: its counters and the chunk sizes tell the same story."""
    from_chunks = check_statistics(result, k, max_tokens)
    spec = result["speculative"]
    # the mean acceptance length read off the chunk sizes is the engine's 1 + accepted / drafts (up to the
    # last step, which output truncation may cut)
    decode_steps = len(spec["step_sizes"]) - 1
    assert decode_steps <= spec["num_drafts"] <= decode_steps + 1
    assert spec["num_draft_tokens"] == k * spec["num_drafts"]
    chunks_mal = 1 + from_chunks / decode_steps
    assert abs(chunks_mal - spec["mean_acceptance_length"]) < 0.25, (chunks_mal, spec["mean_acceptance_length"])
    assert 0 < spec["acceptance_rate"] < 1  # a real, imperfect draft
