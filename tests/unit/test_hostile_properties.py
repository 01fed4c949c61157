"""The bounded parsers (core.reading), the config and hub-id checks and the GGUF reader, property by property
(issue 44, "hostile files"): whatever they are given, data or one line, within their caps. Split from
test_hostile_inputs.py, which drives the same inputs through every door."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specplay.core.reading import MAX_DEPTH, UnreadableInput, parse_json, parse_yaml

JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1) | st.floats(allow_nan=False, allow_infinity=False)
                           | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
                           max_leaves=20)


@settings(max_examples=60, deadline=None)
@given(JSON_VALUES)
def test_json_within_bounds_reads_back_as_written(value):
    assert parse_json(json.dumps(value), "x") == value


def _data_or_one_line(parse, text: str) -> None:
    try:
        parse(text, "x")
    except UnreadableInput as exc:
        assert "\n" not in str(exc) and str(exc).startswith("x: ")


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=200))
def test_any_text_is_json_data_or_one_line_refusal(text):
    _data_or_one_line(parse_json, text)


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet="[]{}:,-&*ab 1\n\"'!|>", max_size=200))
def test_any_text_is_yaml_data_or_one_line_refusal(text):
    _data_or_one_line(parse_yaml, text)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 3 * MAX_DEPTH), st.sampled_from(["json", "yaml"]))
def test_nesting_is_read_up_to_the_cap_and_refused_past_it(depth, kind):
    text = "[" * depth + "]" * depth
    parse = parse_json if kind == "json" else parse_yaml
    if depth <= MAX_DEPTH:
        parse(text, "x")
    else:
        with pytest.raises(UnreadableInput, match="nested deeper"):
            parse(text, "x")


@settings(max_examples=40, deadline=None)
@given(st.integers(2**63, 10**30) | st.integers(-10**30, -2**63 - 1), st.sampled_from(["json", "yaml"]))
def test_integers_past_64_bits_are_refused(n, kind):
    with pytest.raises(UnreadableInput, match="integer"):
        (parse_json if kind == "json" else parse_yaml)(f"[{n}]", "x")


CONFIG_KEYS = st.sampled_from(["vocab_size", "max_position_embeddings", "hidden_size", "text_config", "rope_scaling",
                               "factor", "rope_type", "num_hidden_layers"])
CONFIGS = st.recursive(st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1) | st.floats(allow_nan=False, allow_infinity=False)
                       | st.sampled_from(["linear", "yarn", "x"]),
                       lambda inner: st.lists(inner, max_size=3) | st.dictionaries(CONFIG_KEYS, inner, max_size=5), max_leaves=15)


@settings(max_examples=100, deadline=None)
@given(CONFIGS)
def test_a_config_is_sane_or_says_why_and_a_sane_one_never_breaks_the_pair_check(config):
    from specplay.plan.pair_check import config_problem, max_positions, vocab

    problem = config_problem(config)
    assert problem is None or (isinstance(problem, str) and "\n" not in problem)
    if problem is None:
        for n in (max_positions(config), vocab(config)):
            assert n is None or (isinstance(n, int) and not isinstance(n, bool) and n > 0)


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet="ab./-_ :", max_size=12))
def test_a_hub_id_never_climbs_out_of_its_folder(ref):
    from specplay.presets.models import ref_problem

    if ref_problem(ref) is None and ":" not in ref:  # a hub id it accepts
        org, name = ref.split("/")
        assert ".." not in ref and org[0].isalnum() and name[0].isalnum() and not name.endswith(".")


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=300), st.integers(0, 3), st.integers(0, 3))
def test_any_gguf_header_is_read_or_refused_in_one_line_within_its_cap(body, tensors, keys):
    """Whatever follows a GGUF's magic, the bounded reader (plan.gguf) gives metadata or one line; never more
    than its cap read, never a count looped over past what the cap can hold."""
    import tempfile

    from specplay.plan.gguf import read_gguf_metadata

    with tempfile.NamedTemporaryFile(suffix=".gguf") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, tensors, keys) + body + bytes(4096))  # zeros after: "more" to read
        f.flush()
        try:
            meta, names = read_gguf_metadata(Path(f.name), cap=1024)
        except UnreadableInput as exc:
            assert "\n" not in str(exc) and str(exc).startswith(f.name), exc
        else:
            assert len(meta) <= keys and len(names) == tensors
