"""Issue 37, 5 and 6 without engines: context-length buckets measured in the target's tokens, the spec-decode
dataset loaders (SpecBench's question.jsonl, ShareGPT), acceptance per category and the preset's published
acceptance beside the measured one, in the bench's report."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml

from specplay.bench import breakdown, context, datasets
from specplay.bench.charts import figures
from specplay.bench.report import BenchReport, BenchRow
from specplay.bench.runner import BenchError, BenchRun, BenchSettings, load_prompts
from specplay.core.hardware import Hardware
from specplay.engine.base import template_ids
from specplay.presets.catalog import get_preset
from specplay.presets.schema import PresetError, Published
from tests.bench_fixtures import RecordingPair

NGRAM = "smollm2-ngram"
SPEC_BENCH_CATEGORIES = ["writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities",
                         "translation", "summarization", "qa", "math_reasoning", "rag"]


@pytest.fixture(scope="module")
def tokenizer():
    return context.target_tokenizer(get_preset(NGRAM))


def test_context_buckets_hit_their_length_in_the_targets_tokens(tokenizer):
    preset = get_preset(NGRAM)
    prompts = load_prompts(BenchSettings(NGRAM, n=3, max_tokens=64, context_lengths=(128, 512, 1536)), preset)
    assert list(prompts) == ["ctx-128", "ctx-512", "ctx-1536"]  # the buckets alone: no default code, chat
    for name, group in prompts.items():
        length = context.context_of(name)
        sizes = [len(template_ids(tokenizer, p.prompt)) for p in group]  # as the engines get them: chat template
        assert all(abs(size - length) <= max(4, length // 100) for size in sizes), (name, sizes)
        assert len({p.prompt for p in group}) == 3  # a bucket's prompts differ
        assert all(p.prompt.startswith(context.INSTRUCTION) for p in group)
    # cut from the shipped texts: the 128-token prompt's body is a stretch of the summarize workload
    assert prompts["ctx-128"][0].prompt.split("\n\n", 1)[1][:40] in (Path(context.WORKLOADS["summarize"]).read_text())


def test_context_lengths_that_dont_fit_are_refused_before_the_engines_start():
    preset = get_preset(NGRAM)  # max_model_len 2048
    with pytest.raises(BenchError, match="2000 tokens \\+ max tokens 128 must fit max_model_len 2048"):
        load_prompts(BenchSettings(NGRAM, context_lengths=(512, 2000)), preset)
    dummy = get_preset("dummy-llama8b-eagle-k3")  # no tokenizer: token ids of exactly the length
    ids = load_prompts(BenchSettings(dummy.name, n=2, context_lengths=(300,)), dummy)["ctx-300"]
    assert [len(p.prompt_token_ids) for p in ids] == [300, 300]


def test_the_shipped_dataset_is_spec_bench_with_its_13_categories():
    prompts = datasets.load_dataset("spec-bench-mini")
    assert len(prompts) == 39 and list(dict.fromkeys(p.meta["category"] for p in prompts)) == SPEC_BENCH_CATEGORIES
    groups = datasets.dataset_workloads("spec-bench-mini", None, 2)
    assert list(groups) == [f"spec-bench-mini:{c}" for c in SPEC_BENCH_CATEGORIES]
    assert all(len(g) == 2 for g in groups.values())


def test_spec_bench_and_sharegpt_files_load(tmp_path):
    spec = tmp_path / "question.jsonl"
    spec.write_text('{"question_id": 81, "category": "writing", "turns": ["Write a poem.", "Shorter."]}\n\n'
                    '{"question_id": 82, "category": "math", "turns": ["What is 2+2?"]}\n')
    loaded = datasets.load_dataset(str(spec))
    assert [(p.prompt, p.workload, p.meta["question_id"]) for p in loaded] == [
        ("Write a poem.", "question:writing", 81), ("What is 2+2?", "question:math", 82)]  # first turns only
    share = tmp_path / "sg.json"
    share.write_text(json.dumps([
        {"id": "a", "conversations": [{"from": "human", "value": "Hi there"}, {"from": "gpt", "value": "Hello"}]},
        {"id": "b", "conversations": [{"from": "human", "value": "no answer"}]},  # skipped, as vLLM skips it
    ]))
    assert [(p.id, p.prompt, p.workload) for p in datasets.load_dataset(str(share))] == [("a", "Hi there", "sg:all")]
    # the format named explicitly, whatever the extension (vllm bench serve's --dataset-name)
    other = tmp_path / "data.txt"
    other.write_text(share.read_text())
    assert datasets.load_dataset(str(other), "sharegpt")[0].prompt == "Hi there"


@pytest.mark.parametrize("name, text, fmt, message", [
    ("q.jsonl", '{"question_id": 1, "category": "qa", "turns": []}\n', None,
     r'q.jsonl: line 1: expected \{"question_id", "category", "turns": \["first turn", \.\.\.\]\}'),
    ("q.jsonl", '{"question_id": 1,\n', None, r"q.jsonl: line 1: not valid JSON"),
    ("s.json", '{"conversations": []}', None, r"s.json: expected a JSON list of"),
    ("s.json", '[{"conversations": [{"from": "human"}, {"from": "gpt", "value": "x"}]}]', None,
     r's.json: item 0: the first turn needs a non-empty "value"'),
    ("s.json", "[]", "alpaca", r"dataset format 'alpaca': expected one of spec_bench, sharegpt"),
    ("d.csv", "a,b", None, r"d.csv: unknown dataset; expected spec-bench-mini, speed-bench-mini, a \.jsonl"),
])
def test_a_malformed_dataset_or_unknown_format_is_one_clear_line(tmp_path, name, text, fmt, message):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(BenchError, match=message) as err:  # through the bench: before the engines start
        load_prompts(BenchSettings(NGRAM, dataset=str(path), dataset_name=fmt), get_preset(NGRAM))
    assert "\n" not in str(err.value)


def _row(workload, drafts, drafted, accepted, speedup, k=4):
    return BenchRow(workload=workload, temperature=0.0, concurrency=1, k=k, requests=2, num_drafts=drafts,
                    num_draft_tokens=drafted, num_accepted=accepted, speedup=speedup,
                    acceptance_rate=accepted / drafted, mean_acceptance_length=1 + accepted / drafts)


def test_acceptance_per_category_with_the_published_figure_beside_it():
    rows = [_row("mt:writing", 10, 40, 10, 1.1), _row("mt:coding", 10, 40, 30, 1.8), _row("code", 5, 20, 5, 1.0)]
    published = Published(mean_acceptance_length=3.2, source="https://example.org/card", conditions="MT-bench, T=0")
    lines = breakdown.by_category(rows, published)
    assert [(x["category"], x["acceptance_rate"], x["mean_acceptance_length"]) for x in lines] == [
        ("writing", 0.25, 2.0), ("coding", 0.75, 4.0), ("all categories", 0.5, 3.0)]  # pooled: 40/80, 1 + 40/20
    assert lines[-1]["published_mean_acceptance_length"] == 3.2
    text = "\n".join(breakdown.sections(rows, published))
    assert "Acceptance per category" in text and "published MAL" in text
    assert "published mean acceptance length 3.2 (MT-bench, T=0; https://example.org/card)" in text
    assert "no published acceptance" in "\n".join(breakdown.sections(rows, None))
    assert "|---|" in breakdown.sections(rows, published, markdown=True)[0]


def test_context_table_and_chart_per_bucket():
    rows = [_row("ctx-1536", 10, 40, 8, 0.9), _row("ctx-128", 10, 40, 20, 1.4), _row("ctx-512", 10, 40, 12, 1.2)]
    lines = breakdown.by_context(rows)
    assert [(x["context_tokens"], x["acceptance_rate"], x["speedup"]) for x in lines] == [
        (128, 0.5, 1.4), (512, 0.3, 1.2), (1536, 0.2, 0.9)]
    assert "Acceptance and speedup per context length" in breakdown.sections(rows)[0]
    chart = figures(rows, 4)["speedup_vs_context"]
    assert [list(d.x) for d in chart.data] == [[128, 512, 1536]] * 2
    assert list(chart.data[0].y) == [1.4, 1.2, 0.9] and list(chart.data[1].y) == [0.5, 0.3, 0.2]


def test_the_bench_report_carries_the_categories_and_the_presets_published_figure(tmp_path, capsys):
    from specplay.cli.main import main

    preset = get_preset(NGRAM)
    cited = Published(mean_acceptance_length=2.5, source="https://example.org/paper", conditions="SpecBench, T=0")
    settings = BenchSettings(NGRAM, dataset="spec-bench-mini", n=1, max_tokens=8)
    bench = BenchRun(RecordingPair(preset), dataclasses.replace(preset, published=cited), settings,
                     load_prompts(settings, preset), Hardware(0, None, (0, 1)), warmup=False)
    list(bench.run())
    report = bench.result()
    assert report.published == cited  # typed, and back from bench.json the same
    assert BenchReport.model_validate(json.loads(json.dumps(report.model_dump()))).published == cited
    assert report.model_dump()["published"]["mean_acceptance_length"] == 2.5
    assert {r.workload for r in report.rows} == {f"spec-bench-mini:{c}" for c in SPEC_BENCH_CATEGORIES}
    # the command line: --dataset and its per-category table on stdout
    assert main(["bench", "--preset", NGRAM, "--dataset", "spec-bench-mini", "--n", "1", "--max-tokens", "8",
                 "--out", str(tmp_path), "--no-png"], pair=RecordingPair(preset)) == 0
    out = capsys.readouterr().out
    assert "Acceptance per category" in out and "spec-bench-mini  math_reasoning" in out


def test_published_is_an_optional_cited_preset_field(tmp_path):
    from specplay.presets.validation import validate

    eagle3 = get_preset("llama31-8b-eagle3")
    assert eagle3.published.source.startswith("https://") and 1 < eagle3.published.mean_acceptance_length < 6
    assert get_preset(NGRAM).published is None  # nothing cited: left empty
    data = yaml.safe_load((Path(get_preset(NGRAM).source)).read_text())
    data["published"] = {"mean_acceptance_length": 3.1, "source": "a paper", "conditions": "MT-bench"}
    with pytest.raises(PresetError, match="field 'published.source': expected the https URL"):
        validate(data, Path(f"{NGRAM}.yaml"))
