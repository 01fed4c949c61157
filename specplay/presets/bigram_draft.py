"""A tiny draft model with a tokenizer of its own, built offline from text the package ships (no download).

vLLM's `use_heterogeneous_vocab` lets a draft_model of another vocabulary speculate: it maps tokens between
the two tokenizers by their text and drafts greedily from the tokens both have. No draft of another family
ships offline beside SmolLM2, so `prepare` makes one: a byte-level BPE of BIGRAM_VOCAB tokens trained on the
bench prompts (specplay/bench/data/*.jsonl), and a one-layer Llama whose logits are that corpus's smoothed
bigram log-probabilities (the token before -> the next). A random network would draft tokens the target
never accepts; a bigram table drafts " the" after " of", so its acceptance is partial and shows the mapping
working. Deterministic: the same files give the same tokenizer and the same weights, in a few seconds.

How the layer holds a table: each token's embedding is a one-hot row (hidden size = vocabulary size), the
attention and MLP output projections are zero, so the final RMSNorm sees the one-hot row alone and scales
it by NORM_SCALE; the LM head's column for token x is log P(. | x) / NORM_SCALE.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

BIGRAM_VOCAB = 1152  # 18 heads of 64: the hidden size is the vocabulary (one-hot embeddings)
CORPUS_DIR = Path(__file__).resolve().parent.parent / "bench" / "data"
CORPUS_FILES = ("chat", "code", "conversations", "qa", "rewrite", "summarize")  # the workloads' prompts (~140 KB)
SPECIALS = ("<unk>", "<|endoftext|>")  # vLLM maps a target token the draft lacks to unk_token_id
_EPS = 1e-5
NORM_SCALE = 1 / math.sqrt(1 / BIGRAM_VOCAB + _EPS)  # what RMSNorm makes of a one-hot row (weight 1)
_SMOOTHING = 1.0  # pseudo-counts of the unigram distribution added to each row

# The config.json the builder writes; the memory plan and the pair check read it before `prepare` too.
# KV heads and head size as SmolLM2-135M's (3 x 64): the draft's KV pages are the target's size.
BIGRAM_CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
    "vocab_size": BIGRAM_VOCAB, "hidden_size": BIGRAM_VOCAB, "intermediate_size": 64,
    "num_hidden_layers": 1, "num_attention_heads": BIGRAM_VOCAB // 64, "num_key_value_heads": 3, "head_dim": 64,
    "max_position_embeddings": 8192, "rms_norm_eps": _EPS, "rope_theta": 10000.0, "tie_word_embeddings": False,
    "attention_bias": False, "mlp_bias": False, "bos_token_id": 1, "eos_token_id": 1, "unk_token_id": 0,
    "torch_dtype": "float32",
}


def corpus() -> list[str]:
    """The bench workloads' prompts, in CORPUS_FILES' order: the text the tokenizer and the table learn from."""
    texts = []
    for name in CORPUS_FILES:
        lines = (CORPUS_DIR / f"{name}.jsonl").read_text().splitlines()
        texts += [json.loads(line)["prompt"] for line in lines if line.strip()]
    return texts


def train_tokenizer(texts: list[str]):
    """A byte-level BPE (spaces as 'Ġ', as SmolLM2's and GPT-2's): its tokens match the target's by text."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token=SPECIALS[0]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=BIGRAM_VOCAB, special_tokens=list(SPECIALS), show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(texts, trainer)
    return tokenizer


def bigram_logprobs(sequences: list[list[int]], vocab: int):
    """log P(next | previous), [previous, next]: counts plus _SMOOTHING x the unigram distribution per row
    (a token never seen first predicts the commonest tokens)."""
    import torch

    counts = torch.zeros(vocab, vocab, dtype=torch.float64)
    for ids in sequences:
        if len(ids) > 1:
            pairs = torch.tensor(ids, dtype=torch.long)
            counts.index_put_((pairs[:-1], pairs[1:]), torch.ones(len(ids) - 1, dtype=torch.float64), accumulate=True)
    unigram = torch.bincount(torch.tensor([i for ids in sequences for i in ids]), minlength=vocab).double() + 1
    unigram /= unigram.sum()
    rows = counts + _SMOOTHING * unigram
    return (rows / rows.sum(dim=1, keepdim=True)).log()


def bigram_weights(logprobs) -> dict:
    """The one-layer Llama's tensors (float32) that turn a token into its row of `logprobs`."""
    import torch

    v, heads, kv = BIGRAM_VOCAB, BIGRAM_CONFIG["num_attention_heads"], BIGRAM_CONFIG["num_key_value_heads"]
    size, inner = BIGRAM_CONFIG["head_dim"], BIGRAM_CONFIG["intermediate_size"]
    zeros = lambda *shape: torch.zeros(*shape, dtype=torch.float32)  # noqa: E731
    layer = "model.layers.0."
    return {
        "model.embed_tokens.weight": torch.eye(v, dtype=torch.float32),
        layer + "input_layernorm.weight": torch.ones(v), layer + "post_attention_layernorm.weight": torch.ones(v),
        layer + "self_attn.q_proj.weight": zeros(heads * size, v),
        layer + "self_attn.k_proj.weight": zeros(kv * size, v), layer + "self_attn.v_proj.weight": zeros(kv * size, v),
        layer + "self_attn.o_proj.weight": zeros(v, heads * size),
        layer + "mlp.gate_proj.weight": zeros(inner, v), layer + "mlp.up_proj.weight": zeros(inner, v),
        layer + "mlp.down_proj.weight": zeros(v, inner),
        "model.norm.weight": torch.ones(v),
        # lm_head[y, x] = log P(y | x) / NORM_SCALE: the normed one-hot row of x picks column x
        "lm_head.weight": (logprobs.T / NORM_SCALE).to(torch.float32).contiguous(),
    }


def write_bigram_draft(folder: Path) -> None:
    """Tokenizer, config and weights into `folder` (offline_model saves it atomically and marks it done)."""
    from safetensors.torch import save_file
    from transformers import PreTrainedTokenizerFast

    texts = corpus()
    tokenizer = train_tokenizer(texts)
    sequences = [tokenizer.encode(text).ids for text in texts]
    save_file(bigram_weights(bigram_logprobs(sequences, BIGRAM_VOCAB)), str(folder / "model.safetensors"),
              metadata={"format": "pt"})
    (folder / "config.json").write_text(json.dumps(BIGRAM_CONFIG, indent=2) + "\n")
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token=SPECIALS[0], bos_token=SPECIALS[1],
                            eos_token=SPECIALS[1], pad_token=SPECIALS[1]).save_pretrained(folder)
