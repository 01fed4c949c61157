"""Step detail (specplay.run.steps): the n-gram proposer recomputed, every step checked against the stream's
chunks (unknown where they disagree, never a guess), merged chunks, methods whose drafts vLLM keeps, and the
acceptance histogram. Hand-made runs whose steps are worked out in the comments."""

from __future__ import annotations

import json

import pytest

from specplay.core.events import BASELINE, SPECULATIVE, RunFinished, RunStarted, SpecDecodeCounters, StepEvent
from specplay.presets.speculation import Speculation
from specplay.run.comparison import Comparison
from specplay.run.result import RunResult
from specplay.run.steps import acceptance_histogram, ngram_proposal, step_detail

NGRAM = Speculation(method="ngram", num_speculative_tokens=3, prompt_lookup_min=2, prompt_lookup_max=4)
PROMPT = [10, 11, 12, 13, 14, 15]
# prefill emits 10; context ...15 10: no earlier "15 10", no draft, the step emits 11; "10 11" is the prompt's
# start, so the drafts are 12 13 14: 12 and 13 accepted, the target says 99 for 14; "13 99" and "99": no draft.
OUTPUT = [10, 11, 12, 13, 99, 14]


class Side:
    def __init__(self, sizes, output=OUTPUT, steps=None, steps_source="per-request"):
        self.token_ids, self.step_sizes, self.steps_source = output, sizes, steps_source
        self.step_times = [float(i) for i in range(len(sizes))]
        self.steps = steps if steps is not None else len(sizes)


def test_the_ngram_proposal_is_vllms_rule():
    assert ngram_proposal(PROMPT + [10], 2, 4, 3) == []  # "15 10" never seen
    assert ngram_proposal(PROMPT + [10, 11], 2, 4, 3) == [12, 13, 14]
    assert ngram_proposal([1, 2, 3, 1, 2], 2, 4, 5) == [3, 1, 2]  # fewer than k left after the match
    assert ngram_proposal([7, 1, 2, 8, 1, 2, 9, 1, 2], 2, 2, 1) == [8]  # the earliest occurrence
    assert ngram_proposal([5, 1, 2, 3, 6, 2, 3, 7, 1, 2, 3], 2, 4, 1) == [6]  # the longest n-gram wins
    assert ngram_proposal([1, 2, 1], 2, 4, 3) == []  # a 1-gram is under min_n
    assert ngram_proposal([1, 2, 3, 1, 2], 2, 4, 3, max_model_len=6) == [3]  # no draft past max_model_len


def test_each_step_is_reconstructed_and_agrees_with_the_chunks():
    detail = step_detail(PROMPT, Side([1, 1, 3, 1]), NGRAM, "ngram")
    assert detail.note is None and detail.known == 3
    first, second, third = (s.model_dump(mode="json") for s in detail.steps)
    assert first == {"start": 1, "tokens": 1, "accepted": 0, "drafted": 0, "proposed": [], "target_token": None,
                     "seconds": 1.0}
    assert second == {"start": 2, "tokens": 3, "accepted": 2, "drafted": 3, "proposed": [12, 13, 14],
                      "target_token": 99, "seconds": 1.0}
    assert third["proposed"] == [] and third["start"] == 5


def test_a_chunk_that_disagrees_is_unknown_and_the_next_starts_afresh():
    # chunks 1 | 2 2 | 1: the chunk at 1 holds 2 tokens, but its steps emit 1 then 3: not a tiling, unknown.
    # The chunk at 3: context ends "11 12", drafts 13 14 15, 13 accepted, the target says 99: 2 tokens, agrees.
    steps = step_detail(PROMPT, Side([1, 2, 2, 1]), NGRAM, "ngram").steps
    assert [(s.start, s.accepted, s.proposed) for s in steps[:2]] == [(1, None, None), (3, 1, (13, 14, 15))]
    assert steps[1].target_token == 99 and steps[0].tokens == 2


def test_a_step_cut_by_max_tokens_has_no_accepted_count():
    # the output ends after 12 of the drafts 12 13 14: vLLM may have accepted 13 and 14 past the end
    steps = step_detail(PROMPT, Side([1, 1, 1], OUTPUT[:3]), NGRAM, "ngram").steps
    assert (steps[1].accepted, steps[1].drafted, steps[1].proposed, steps[1].tokens) == (None, 3, (12, 13, 14), 1)
    # ... but a rejection inside the output is exact, and so is a step that accepted all it drafted
    assert step_detail(PROMPT, Side([1, 1, 4], OUTPUT[:5] + [7]), NGRAM, "ngram").steps[1].accepted == 2


def test_a_merged_chunk_keeps_its_steps_without_seconds():
    steps = step_detail(PROMPT, Side([1, 4, 1]), NGRAM, "ngram").steps
    assert [(s.start, s.tokens, s.accepted) for s in steps] == [(1, 1, 0), (2, 3, 2), (5, 1, 0)]
    assert steps[0].seconds is None and steps[1].seconds is None and steps[2].seconds == 1.0


def test_methods_whose_drafts_vllm_keeps_show_accepted_counts_and_say_why():
    output = [1, 2, 3, 4, 5, 6, 7, 8]
    eagle = Speculation(method="eagle", num_speculative_tokens=3)
    detail = step_detail([9], Side([1, 4, 2, 1], output), eagle, "eagle")
    assert "drafts from the EAGLE head are made from the target's hidden states" in detail.note
    # the last chunk may have been cut by max_tokens: its count is unknown
    assert [(s.accepted, s.proposed) for s in detail.steps] == [(3, (2, 3, 4)), (1, None), (None, None)]
    whole = step_detail([9], Side([1, 4, 4], output[:9] + [0]), eagle, "eagle").steps  # ends on k + 1: all known
    assert [s.accepted for s in whole] == [3, 3]
    # chunks counted without the request's own counters: a merge can't be ruled out
    assert all(s.accepted is None for s in step_detail([9], Side([1, 4, 2, 1], output, steps_source="chunks"),
                                                       eagle, "eagle").steps)
    # the request's counters count more steps than chunks: which chunk merged two is unknown
    merged = step_detail([9], Side([1, 4, 2, 1], output, steps=5), eagle, "eagle")
    assert all(s.accepted is None for s in merged.steps)
    assert "suffix decoding" in step_detail([9], Side([1, 4]), Speculation(method="suffix", num_speculative_tokens=3),
                                           "suffix").note
    assert "drafts from the MTP layers are made" in step_detail([9], Side([1, 4]), eagle, "mtp").note
    assert "the draft model's drafts stay inside vLLM" in step_detail([9], Side([1, 4]), eagle, "draft_model").note


def test_the_acceptance_histogram_is_vllms():
    histogram = [4, 0, 2, 1]
    counters = SpecDecodeCounters.from_histogram(histogram, 21)
    assert acceptance_histogram(counters) == histogram
    assert acceptance_histogram(SpecDecodeCounters()) == []
    assert acceptance_histogram(SpecDecodeCounters(60, 240, 3)) == []  # no per-position counts: unknown


def test_compare_json_carries_the_steps_and_the_histogram():
    from specplay.presets.catalog import get_preset

    c = Comparison()
    c.add(RunStarted("run-0", tuple(PROMPT), "sequential"))
    for engine, sizes in ((BASELINE, [1] * 6), (SPECULATIVE, [1, 1, 3, 1])):
        start = 0
        for i, n in enumerate(sizes):
            c.add(StepEvent(engine=engine, step=i, token_ids=tuple(OUTPUT[start:start + n]), text="",
                            time=100.0 + i, submitted_at=100.0, finished=i == len(sizes) - 1))
            start += n
    c.add(RunFinished("run-0", 110.0, SpecDecodeCounters(1, 3, 2, (1, 1, 0))))
    preset = get_preset("smollm2-ngram")  # k=4, n 2-4: the drafts are 12 13 14 15
    spec = json.loads(json.dumps(RunResult.of(c, preset).model_dump(mode="json")))[SPECULATIVE]
    assert spec["acceptance_histogram"] == [0, 0, 1, 0]
    assert [s["proposed"] for s in spec["step_detail"]] == [[], [12, 13, 14, 15], []]
    assert spec["step_detail"][1]["target_token"] == 99 and spec["step_detail_note"] is None
    assert RunResult.of(c).model_dump(mode="json")[SPECULATIVE]["step_detail"] is None  # no preset: no method to replay
