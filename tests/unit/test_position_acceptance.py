"""Per-position acceptance divides by the steps that drafted that position (issue 37, 6).

vLLM's n-gram proposer cuts drafts short of k, so position i is drafted by fewer steps than position 0;
dividing every position by all steps read the later ones low. Four steps at k=3, as (drafted, accepted):
(3, 3), (1, 1), (1, 0), (3, 1): histogram [1, 2, 0, 1]; positions 0-2 accepted 3, 1, 1 times and drafted
4, 2, 2 times, so the rates are 0.75, 0.5, 0.5 (÷ all four steps: 0.75, 0.25, 0.25).
"""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

from specplay.bench.charts import acceptance_per_position
from specplay.bench.outputs import csv_rows
from specplay.bench.report import BenchReport, BenchRow, accepted_shares, shares_exact
from specplay.core.events import SpecDecodeCounters

HISTOGRAM, PER_STEP_DRAFTED = [1, 2, 0, 1], [3, 1, 1, 3]


def request() -> SpecDecodeCounters:
    return SpecDecodeCounters.from_histogram(HISTOGRAM, sum(PER_STEP_DRAFTED), PER_STEP_DRAFTED)


def row(drafted) -> BenchRow:
    c = request()
    return BenchRow(workload="rewrite", temperature=0.0, concurrency=1, k=3, num_drafts=c.num_drafts,
                    num_draft_tokens=c.num_draft_tokens, num_accepted=c.num_accepted_tokens,
                    accepted_per_position=c.accepted_per_position, drafted_per_position=drafted)


def test_a_request_counts_the_steps_that_drafted_each_position():
    c = request()
    assert c.accepted_per_position == (3, 1, 1) and c.drafted_per_position == (4, 2, 2)
    assert c.position_rates() == ([0.75, 0.5, 0.5], True)
    # vLLM's "summary" level has no per-step counts: unknown, never all-k guessed
    assert SpecDecodeCounters.from_histogram(HISTOGRAM, 8).drafted_per_position is None
    assert SpecDecodeCounters.from_histogram(HISTOGRAM, 8, [3, 1]).drafted_per_position is None  # not one per step


def test_the_bench_row_csv_and_chart_divide_by_the_drafting_steps():
    r = row((4, 2, 2))
    assert r.accepted_shares() == [0.75, 0.5, 0.5] and shares_exact(r.model_dump())
    assert BenchReport.model_validate(BenchReport(preset="p", rows=(r,)).model_dump()).rows[0].drafted_per_position == (4, 2, 2)
    _, flat = csv_rows([r])
    assert (flat[0]["acceptance_pos_2"], flat[0]["acceptance_pos_of"]) == (0.5, "drafted at the position")
    fig = acceptance_per_position([r.model_dump()])
    assert list(fig.data[0].y) == [0.75, 0.5, 0.5] and "not reported" not in fig.layout.title.text


def test_without_drafted_counts_the_output_says_it_divides_by_all_drafts():
    r = row(None)  # a /metrics scrape: vLLM's Prometheus counters have no per-position drafted count
    assert accepted_shares(r.model_dump()) == [0.75, 0.25, 0.25] and not shares_exact(r.model_dump())
    assert csv_rows([r])[1][0]["acceptance_pos_of"] == "all drafts"
    assert "not reported" in acceptance_per_position([r.model_dump()]).layout.title.text


def test_sums_keep_the_counts_only_while_every_part_has_them():
    known, unknown = request(), SpecDecodeCounters.from_histogram(HISTOGRAM, 8)
    assert SpecDecodeCounters().plus(known).plus(known).drafted_per_position == (8, 4, 4)
    assert known.plus(unknown).drafted_per_position is None
    assert known.plus(SpecDecodeCounters(accepted_per_position=(0, 0, 0))).drafted_per_position == (4, 2, 2)


def test_the_engine_reads_drafted_counts_where_vllm_reports_them():
    from specplay.engine.vllm_engine import _CountersLogger, request_counters

    logger = _CountersLogger(NS(speculative_config=NS(num_speculative_tokens=3)))
    stats = NS(num_drafts=4, num_draft_tokens=8, num_accepted_tokens=5, num_accepted_tokens_per_pos=[3, 1, 1],
               num_draft_tokens_per_pos=[4, 2, 2])
    logger.record(NS(kv_cache_usage=None, spec_decoding_stats=stats), None)
    assert logger.snapshot().position_rates() == ([0.75, 0.5, 0.5], True)
    older = NS(**{k: v for k, v in vars(stats).items() if k != "num_draft_tokens_per_pos"})
    logger.record(NS(kv_cache_usage=None, spec_decoding_stats=older), None)  # a vLLM before 0.32
    assert logger.snapshot().drafted_per_position is None
    detailed = NS(spec_decode_metrics=NS(histogram=HISTOGRAM, num_draft_tokens=8, per_step_drafted=PER_STEP_DRAFTED))
    assert request_counters(detailed).drafted_per_position == (4, 2, 2)


@pytest.mark.parametrize("field_type, level", [('Literal["none", "summary", "detailed"]', "detailed"),
                                               ('Literal["none", "summary"]', "summary")])
def test_the_engine_asks_for_per_step_counts_where_vllm_has_them(field_type, level):
    import dataclasses

    from specplay.engine.probes import per_request_metrics_level

    args = dataclasses.make_dataclass("Args", [("per_request_spec_decode_metrics", field_type, "none")])
    assert per_request_metrics_level(args) == level
