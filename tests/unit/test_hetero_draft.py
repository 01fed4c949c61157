"""Issue 41, 3: a draft with a tokenizer of its own. `prepare` builds a bigram draft from the package's own
text (no download), the pair check says what lets a pair of differing vocabularies run (vLLM's
use_heterogeneous_vocab), accepts smollm2-hetero-draft for it, refuses the pair without the key or on a vLLM
that lacks it, and the memory plan counts the draft. No engines here (tests/engines/test_hetero_draft.py
runs the pair)."""

from __future__ import annotations

import json

import pytest
import yaml

from specplay.core.events import SPECULATIVE
from specplay.core.hardware import Hardware
from specplay.core.paths import PRESETS_DIR
from specplay.plan import shapes
from specplay.plan.gate import PairRefused, gate
from specplay.plan.memory import GIB, MachineMemory, plan
from specplay.plan.pair_check import check_pair
from specplay.presets import bigram_draft as bd
from specplay.presets.catalog import get_preset, load_presets
from specplay.presets.validation import validate

PRESET = "smollm2-hetero-draft"
CPU = Hardware(0, None, (0, 1))


@pytest.fixture
def installed_034(monkeypatch):
    """As if vLLM 0.34 were installed: its facts as recorded from the real wheel (test_presets_vllm034)."""
    from specplay.engine.vllm_facts import VllmFacts
    from specplay.presets import capabilities
    from tests.unit.test_presets_vllm034 import FIXTURE

    facts = VllmFacts.from_dict(json.loads(FIXTURE.read_text()))
    monkeypatch.setattr(capabilities, "installed_facts", lambda: facts)
    return facts


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The draft as `prepare` writes it, twice from scratch: (folder, folder)."""
    folders = [tmp_path_factory.mktemp(f"bigram{i}") for i in range(2)]
    for folder in folders:
        bd.write_bigram_draft(folder)
    return folders


def test_the_draft_is_built_deterministically_from_shipped_text(built):
    first, second = built
    for name in ("config.json", "tokenizer.json", "model.safetensors"):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
    assert json.loads((first / "config.json").read_text()) == bd.BIGRAM_CONFIG
    assert shapes.load_config("offline:bigram-draft-1k")[0]["vocab_size"] == bd.BIGRAM_VOCAB  # before prepare too
    corpus = bd.corpus()
    assert len(corpus) == 240 and sum(map(len, corpus)) > 140_000  # the six workloads' 40 prompts each


def test_its_tokenizer_is_its_own_and_its_logits_are_the_bigram_table(built):
    import torch
    from safetensors.torch import load_file
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(built[0])
    assert len(tokenizer) == bd.BIGRAM_VOCAB and tokenizer.unk_token == "<unk>"
    ids = [tokenizer.convert_tokens_to_ids(t) for t in ("Ġof", "Ġthe")]
    assert tokenizer.encode(" of the", add_special_tokens=False) == ids  # byte-level, spaces as 'Ġ' (as SmolLM2's)
    weights = load_file(built[0] / "model.safetensors")
    # the layer adds nothing (zero output projections): the final norm sees the one-hot embedding alone
    for name in ("self_attn.o_proj", "mlp.down_proj"):
        assert not weights[f"model.layers.0.{name}.weight"].any(), name
    rows = weights["model.embed_tokens.weight"][ids[0]]
    normed = rows / torch.sqrt(rows.pow(2).mean() + bd.BIGRAM_CONFIG["rms_norm_eps"])
    logits = weights["lm_head.weight"] @ normed
    table = bd.bigram_logprobs([tokenizer.encode(t, add_special_tokens=False) for t in bd.corpus()], bd.BIGRAM_VOCAB)
    assert torch.allclose(logits.double(), table[ids[0]], atol=1e-4)
    assert int(logits.argmax()) == ids[1]  # " of" -> " the"


def test_the_pair_check_accepts_the_preset_by_use_heterogeneous_vocab():
    preset = get_preset(PRESET)
    assert preset.speculative_config.use_heterogeneous_vocab and preset.device == "any"
    verdict = gate(preset, here=False)
    assert verdict.mismatch is None
    assert ("vocabularies of 49,152 (target) and 1,152 (draft) tokens differ: allowed by use_heterogeneous_vocab "
            "(vLLM drafts greedily from the tokens both share)") in verdict.checked


def _without_the_key():
    data = yaml.safe_load((PRESETS_DIR / f"{PRESET}.yaml").read_text())
    del data["speculative_config"]["use_heterogeneous_vocab"]
    return validate(data, PRESETS_DIR / f"{PRESET}.yaml")


def test_without_the_key_the_pair_is_refused_and_the_refusal_names_the_key():
    refused = check_pair(_without_the_key()).mismatch
    assert refused.startswith("the draft's vocabulary has 1152 tokens (") and "the target's 49152 (" in refused
    assert refused.endswith("a draft model must share the target's vocabulary, unless speculative_config sets "
                            "use_heterogeneous_vocab: true (vLLM matches the tokens both share by their text; "
                            "method draft_model, greedy drafts only)")
    with pytest.raises(PairRefused, match="unless speculative_config sets use_heterogeneous_vocab: true"):
        gate(_without_the_key(), CPU)


def test_a_vllm_without_the_key_can_plan_the_pair_but_not_run_it(installed_034):
    preset = load_presets()[PRESET]  # judged against the "installed" 0.34
    with pytest.raises(PairRefused, match="needs a vLLM whose speculative_config has 'use_heterogeneous_vocab'; "
                                          "vLLM 0.34.0 has no such field"):
        gate(preset, CPU)
    note = " ".join(gate(preset, here=False).checked)
    assert "the installed vLLM 0.34.0 has no use_heterogeneous_vocab, so the pair can't run on it" in note
    assert check_pair(_without_the_key()).mismatch.endswith(
        "greedy drafts only); the installed vLLM 0.34.0 has no use_heterogeneous_vocab, so the pair can't run on it")


def test_the_memory_plan_counts_the_draft_as_any_draft_model():
    spec = plan(get_preset(PRESET), CPU, MachineMemory.cpu(20)).engine(SPECULATIVE)
    draft = next(part for part in spec.parts if part.kind != "target")
    assert draft.ref == "offline:bigram-draft-1k" and draft.kind == "draft model"
    # embeddings + LM head (1152 x 1152 each) + one layer: q, o (1152 x 1152), k, v (192 x 1152), MLP (3 x 64 x 1152)
    v = bd.BIGRAM_VOCAB
    assert draft.params == 4 * v * v + 2 * 192 * v + 3 * 64 * v + 3 * v
    assert draft.kv_bytes_per_token == 2 * 1 * 3 * 64 * 4  # one layer, 3 KV heads of 64, float32
    baseline = plan(get_preset("smollm2-layerskip-draft"), CPU, MachineMemory.cpu(20)).engine(SPECULATIVE)
    assert spec.overhead_bytes == baseline.overhead_bytes and spec.ram_bytes < baseline.ram_bytes < 4.2 * GIB


def test_its_drafts_are_not_replayed_by_the_draft_alone():
    """compare --draft-steps replays a draft model's drafts by running it alone on the target's token ids: a draft
    of another vocabulary reads those only through vLLM's mapping, so the replay is refused with the reason."""
    from specplay.run.draft_steps import OTHER_VOCABULARY, why_not

    assert why_not(get_preset(PRESET), 0.0) == OTHER_VOCABULARY
    assert why_not(get_preset("smollm2-layerskip-draft"), 0.0) is None
