"""Step detail on real engines (smollm2-ngram, the offline SmolLM2 on the CPU): over 24 bench-workload
prompts every reconstructed step agrees with vLLM's counts (the stream's chunks, and the request's own
counters where every step of a run is known) or shows unknown, and at least 90% of the steps are known;
the ported n-gram proposer gives vLLM's own function's proposals."""

from __future__ import annotations

import random

import pytest

from specplay.bench.workloads import load_workload
from specplay.core.events import GenerationRequest
from specplay.presets.catalog import get_preset
from specplay.run import stream
from specplay.run.result import RunResult
from specplay.run.steps import ngram_proposal

WORKLOADS = ("rewrite", "qa", "summarize", "code", "chat", "conversations")
PER_WORKLOAD = 2  # 12 prompts (24 took 67 s of the suite; the known-steps share held at either count)
MAX_TOKENS = 24  # ~15 steps a run (32 gave 484/484 known steps, 24/24 runs fully known: a margin to spare)


def test_every_ngram_step_agrees_with_vllm_or_shows_unknown(ngram_pair):
    preset = get_preset("smollm2-ngram")
    prompts = [p for w in WORKLOADS for p in load_workload(w, PER_WORKLOAD)]
    assert len(prompts) >= 10
    steps = known = runs_all_known = 0
    contexts = []
    for prompt in prompts:
        c = stream.compare(ngram_pair, prompt.request(max_tokens=MAX_TOKENS), "concurrent")
        result = RunResult.of(c, preset)
        detail = result.step_detail
        out = c.speculative.token_ids
        assert sum(s.tokens for s in detail.steps) == len(out) - c.speculative.step_sizes[0]
        for s in detail.steps:
            if s.known:  # its tokens are what the target emitted: accepted drafts, then the target's own
                seen = s.accepted if s.accepted is not None else s.tokens  # cut by max_tokens: all it shows
                assert tuple(out[s.start:s.start + seen]) == s.proposed[:seen]
                assert s.tokens == min(seen + 1, len(out) - s.start)
                contexts.append(list(c.prompt_token_ids) + out[:s.start])
        steps += len(detail.steps)
        known += detail.known
        if detail.known == len(detail.steps) and len(detail.steps) == c.speculative.steps - 1:
            runs_all_known += 1  # then the steps must add up to the request's own counters
            drafted = [s for s in detail.steps if s.drafted]
            counted = (len(drafted), sum(s.drafted for s in drafted))
            assert counted == (c.counters.num_drafts, c.counters.num_draft_tokens), prompt.id
            accepted = sum(s.accepted for s in drafted if s.accepted is not None)
            if all(s.accepted is not None for s in drafted):
                assert accepted == c.counters.num_accepted_tokens, prompt.id
                assert result.model_dump(mode="json")["speculative"]["acceptance_histogram"] == [
                    sum(1 for s in drafted if s.accepted == j) for j in range(5)]
            else:  # the last step, cut by max_tokens, may have accepted drafts past the end
                assert accepted + detail.steps[-1].tokens <= c.counters.num_accepted_tokens, prompt.id
    print(f"\nstep detail: {known}/{steps} steps known, {runs_all_known}/{len(prompts)} runs fully known")
    assert known >= 0.9 * steps and runs_all_known >= len(prompts) // 2
    _check_the_port_against_vllm(contexts, preset.speculative_config)


def _check_the_port_against_vllm(contexts, config):
    """The port gives vLLM's own proposer function's answer: on the runs' contexts and on random ones with
    repeats (vLLM's function is a numba kernel; its Python body, `py_func`, is the same code)."""
    import numpy as np
    from vllm.v1.spec_decode.ngram_proposer import _find_longest_matched_ngram_and_propose_tokens as vllm_fn

    rng = random.Random(0)
    randoms = [[rng.randrange(6) for _ in range(rng.randrange(1, 60))] for _ in range(300)]
    lo, hi, k = config.prompt_lookup_min, config.prompt_lookup_max, config.k
    for context in contexts + randoms:
        for mn, mx, kk, limit in ((lo, hi, k, 2048), (1, 3, 5, len(context) + 2)):
            want = vllm_fn.py_func(np.asarray(context, dtype=np.int32), mn, mx, limit, kk).tolist()
            assert ngram_proposal(context, mn, mx, kk, limit) == want, (context, mn, mx, kk)
