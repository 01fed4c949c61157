"""Every pair the project ships or documents passes its own pair check against the models' config.json facts
(issue 41, item 4): a documented pair that vLLM would refuse (the README's Qwen2.5-7B with a Qwen2.5-0.5B
draft: 152,064 against 151,936 tokens) fails the suite. The facts are small fixtures,
tests/fixtures/model-configs/<hub id>.json, each with the hub config.json it stands for ("source"); one whose
numbers couldn't be read from the hub says so there and leaves them out rather than guess. No network."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from specplay.core.paths import PRESETS_DIR
from specplay.plan import pair_check
from specplay.plan.shapes import ConfigUnavailable, load_config
from specplay.presets.adhoc import adhoc_preset
from specplay.presets.catalog import PresetError, load_presets
from specplay.presets.engines import SERVE_MODEL_IDS
from specplay.presets.models import BUNDLED, REPO
from specplay.presets.offline_model import BIGRAM_DRAFT_NAME, DERIVED_DRAFT_NAME, TARGET_NAME
from specplay.presets.validation import validate

ROOT = Path(__file__).resolve().parents[2]
FACTS = ROOT / "tests" / "fixtures" / "model-configs"
DOC = ROOT / "docs" / "presets.md"
# The vocabularies verified against the hub's config.json files (issue 41): the fixtures must say the same.
VERIFIED_VOCAB = {"Qwen/Qwen2.5-7B-Instruct": 152064, "Qwen/Qwen2.5-0.5B-Instruct": 151936, "Qwen/Qwen3-8B": 151936,
                  "Qwen/Qwen3-0.6B": 151936, "meta-llama/Llama-3.1-8B-Instruct": 128256,
                  "meta-llama/Llama-3.2-1B-Instruct": 128256, "meta-llama/Llama-3.1-70B-Instruct": 128256}
# Shipped pairs the check can't finish from the fixtures, and why (a fixture that would be a guess).
UNCHECKED = {"qwen25-7b-pard-05b": "can't check: the vocabularies (a config.json without vocab_size)"}


def fixture_config(ref: str) -> tuple[dict, str]:
    """load_config from the fixtures: a hub id's facts file; an offline model's hub twin (the layer-skipped
    draft is the target minus layers: its vocabulary and positions are the target's); bundled and repo
    configs are the repository's own files, read as the product reads them."""
    if ref.startswith((BUNDLED, REPO)) or ref == f"offline:{BIGRAM_DRAFT_NAME}":  # the bigram draft: a fixed shape
        return load_config(ref)
    if ref.startswith("offline:"):
        name = ref[len("offline:"):]
        ref = SERVE_MODEL_IDS[f"offline:{TARGET_NAME if name == DERIVED_DRAFT_NAME else name}"]
    path = FACTS / f"{ref}.json"
    if not path.is_file():
        raise ConfigUnavailable(f"no facts fixture for {ref} (tests/fixtures/model-configs/{ref}.json)")
    facts = json.loads(path.read_text())
    facts.pop("source")
    return facts, str(path)


@pytest.fixture
def from_fixtures(monkeypatch):
    monkeypatch.setattr(pair_check, "load_config", fixture_config)


def doc_pair() -> dict:
    """The own-pair preset file docs/presets.md shows (the README points to it)."""
    block = re.search(r"```yaml\n(# ~/pairs/.*?)```", DOC.read_text(), re.S).group(1)
    return yaml.safe_load(block)


def doc_adhoc() -> tuple[str, str]:
    """The ad hoc pair docs/presets.md shows: `specplay plan --model M --speculative-config '{...}'`."""
    found = re.search(r"specplay plan --model (\S+) \\\n\s+--speculative-config '(\{.*?\})'", DOC.read_text())
    return found.group(1), found.group(2)


def test_every_hub_model_a_preset_or_doc_names_has_facts():
    refs = {ref for p in load_presets().values() for ref in p.model_refs()}
    refs |= {doc_pair()["target"]["model"], doc_pair()["speculative_config"]["model"], *doc_adhoc()[:1],
             json.loads(doc_adhoc()[1])["model"]}
    hub = sorted(r for r in refs if "/" in r and ":" not in r)
    missing = [r for r in hub if not (FACTS / f"{r}.json").is_file()]
    assert not missing, f"no tests/fixtures/model-configs/<hub id>.json for {missing}"
    for ref in hub:
        source = json.loads((FACTS / f"{ref}.json").read_text())["source"]
        assert source.startswith(f"https://huggingface.co/{ref}/"), ref


def test_the_verified_vocabularies():
    for ref, size in VERIFIED_VOCAB.items():
        assert json.loads((FACTS / f"{ref}.json").read_text())["vocab_size"] == size, ref


def test_a_fixture_without_numbers_says_so():
    for path in FACTS.rglob("*.json"):
        facts = json.loads(path.read_text())
        if "vocab_size" not in facts:
            assert "UNVERIFIED" in facts["source"], path


def test_every_shipped_pair_passes_the_pair_check(from_fixtures):
    for name, preset in load_presets().items():
        verdict = pair_check.check_pair(preset)
        assert verdict.mismatch is None, f"{name}: {verdict.mismatch}"
        assert list(verdict.unchecked) == ([UNCHECKED[name]] if name in UNCHECKED else []), name
        assert verdict.checked, name


def test_the_qwen25_draft_preset_runs_by_use_heterogeneous_vocab(from_fixtures):
    preset = load_presets()["qwen25-7b-draft-05b"]
    assert preset.speculative_config.use_heterogeneous_vocab
    assert "152,064 (target) and 151,936 (draft)" in " ".join(pair_check.check_pair(preset).checked)
    data = yaml.safe_load((PRESETS_DIR / "qwen25-7b-draft-05b.yaml").read_text())
    del data["speculative_config"]["use_heterogeneous_vocab"]  # the preset as it shipped before
    refused = pair_check.check_pair(validate(data, PRESETS_DIR / "qwen25-7b-draft-05b.yaml")).mismatch
    assert refused and "151936" in refused and "152064" in refused


def test_the_docs_own_pair_passes(from_fixtures):
    data = doc_pair()
    verdict = pair_check.check_pair(validate(data, Path(f"{data['name']}.yaml")))
    assert verdict.mismatch is None and not verdict.unchecked
    assert "vocabulary of 151,936 tokens in both" in verdict.checked


def test_the_docs_adhoc_pair_passes(from_fixtures):
    model, spec = doc_adhoc()
    verdict = pair_check.check_pair(adhoc_preset(model, spec))
    assert verdict.mismatch is None and not verdict.unchecked
    assert "vocabulary of 151,936 tokens in both" in verdict.checked


def test_the_old_docs_pair_would_fail_the_suite(from_fixtures):
    """The example this replaced: what the check says of it is what vLLM says (equal vocabularies only)."""
    data = {**doc_pair(), "target": {"model": "Qwen/Qwen2.5-7B-Instruct", "dtype": "bfloat16", "max_model_len": 4096},
            "speculative_config": {"method": "draft_model", "model": "Qwen/Qwen2.5-0.5B-Instruct",
                                   "num_speculative_tokens": 5}}
    mismatch = pair_check.check_pair(validate(data, Path(f"{data['name']}.yaml"))).mismatch
    assert mismatch and "151936" in mismatch and "152064" in mismatch


@pytest.mark.parametrize("edit, field, expected", [
    ({"draft_sample_method": "probabilistic"}, "speculative_config.draft_sample_method", "greedy"),
    ({"method": "eagle"}, "speculative_config.use_heterogeneous_vocab", "only with method 'draft_model'"),
])
def test_use_heterogeneous_vocab_follows_vllms_rules_at_load(edit, field, expected):
    data = yaml.safe_load((PRESETS_DIR / "qwen25-7b-draft-05b.yaml").read_text())
    data["speculative_config"].update(edit)
    with pytest.raises(PresetError) as err:
        validate(data, PRESETS_DIR / "qwen25-7b-draft-05b.yaml")
    assert f"field '{field}'" in str(err.value) and expected in str(err.value)
