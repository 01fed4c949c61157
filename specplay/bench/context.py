"""Context length as a bench axis: prompts of a given length in the target's own tokens, one workload per
bucket ("ctx-<tokens>"), so each length gets its own acceptance and speedup.

A bucket's prompt is an instruction to summarize plus a stretch of the shipped workload texts
(specplay/bench/data/*.jsonl, joined in a fixed order and cycled where a bucket is longer than them), cut in
the target's tokens so that the prompt as the engines get it (chat template included) has the bucket's
length, within a few tokens where decoding and re-encoding shift a boundary. Prompt i of a bucket starts
further into the texts, so a bucket's prompts differ. Presets without a tokenizer get token ids of exactly
the length (workloads.token_id_prompts).
"""

from __future__ import annotations

from specplay.bench.workloads import WORKLOADS, WorkloadError, WorkloadPrompt, load_workload, token_id_prompts
from specplay.engine.base import template_ids

PREFIX = "ctx-"
INSTRUCTION = "Summarize the text below in a few paragraphs, reusing its key terms."
# the texts in this order: quoted prose first (what a summary copies from), code last
SOURCES = ("summarize", "rewrite", "qa", "conversations", "chat", "code")
STRIDE = 997  # tokens between the starts of a bucket's prompts (prime: prompts don't line up with text seams)
FIT_ROUNDS = 4
MAX_BUCKETS = 16  # each length is a workload of its own: its runs, rows and chart lines
# the buckets' prompts in all (n of each length): 2^24 token ids are ~0.6 GB as the Python ints a prompt holds
MAX_TOTAL_TOKENS = 1 << 24


def workload_name(tokens: int) -> str:
    return f"{PREFIX}{tokens}"


def context_of(workload: str) -> int | None:
    """The bucket's length in tokens of a context workload's name ("ctx-512" -> 512); None for others."""
    rest = workload[len(PREFIX):] if workload.startswith(PREFIX) else ""
    return int(rest) if rest.isdigit() else None


def check_lengths(lengths, max_tokens: int, max_model_len: int, n: int = 1) -> None:
    """At most MAX_BUCKETS lengths, each bucket plus max tokens fits max_model_len (vLLM refuses a longer
    request), and n prompts of each hold at most MAX_TOTAL_TOKENS tokens: checked before a prompt is built."""
    buckets = tuple(dict.fromkeys(lengths))
    if len(buckets) > MAX_BUCKETS:
        raise WorkloadError(f"context lengths: {len(buckets):,} lengths, more than {MAX_BUCKETS} (each is a bench "
                            "workload of its own)")
    for length in buckets:
        if not 16 <= length <= max_model_len - max_tokens:
            raise WorkloadError(f"context lengths: {str(length)[:24]} tokens + max tokens {max_tokens} must fit "
                                f"max_model_len {max_model_len} (and be at least 16); try up to {max_model_len - max_tokens}")
    if n * sum(buckets) > MAX_TOTAL_TOKENS:
        raise WorkloadError(f"context lengths: {n:,} prompts of each length are {n * sum(buckets):,} tokens in all, more "
                            f"than the bench's {MAX_TOTAL_TOKENS:,}; give fewer prompts or shorter lengths")


def corpus_ids(tokenizer) -> list[int]:
    """The shipped workload texts, joined by blank lines, as the target's token ids."""
    texts = [p.prompt for name in SOURCES for p in load_workload(WORKLOADS[name]) if p.prompt]
    return list(tokenizer.encode("\n\n".join(texts), add_special_tokens=False))


def context_prompt(tokenizer, corpus: list[int], length: int, start: int = 0) -> str:
    """The instruction and a stretch of `corpus` from `start`, cut so that the prompt through the chat
    template is `length` tokens (re-cut up to FIT_ROUNDS times: decoding may merge tokens at the cut)."""
    body = length - len(template_ids(tokenizer, INSTRUCTION + "\n\n"))
    text = INSTRUCTION
    for _ in range(FIT_ROUNDS):
        body = max(1, body)
        ids = [corpus[(start + i) % len(corpus)] for i in range(body)]
        text = INSTRUCTION + "\n\n" + tokenizer.decode(ids).strip()
        got = len(template_ids(tokenizer, text))
        if got == length:
            break
        body += length - got
    return text


def context_workloads(lengths, n: int, tokenizer=None, vocab_size: int = 128256) -> dict[str, list[WorkloadPrompt]]:
    """{"ctx-<tokens>": n prompts of that length}; token ids (exact) where there is no tokenizer."""
    out = {}
    corpus = corpus_ids(tokenizer) if tokenizer is not None else None
    for length in dict.fromkeys(lengths):
        name = workload_name(length)
        if corpus is None:
            prompts = [WorkloadPrompt(id=f"{name}-{i}", prompt_token_ids=p.prompt_token_ids, workload=name,
                                      source=p.source, meta={"context_tokens": length})
                       for i, p in enumerate(token_id_prompts(n, length, vocab_size))]
        else:
            prompts = [WorkloadPrompt(id=f"{name}-{i}", prompt=context_prompt(tokenizer, corpus, length, i * STRIDE),
                                      workload=name, source="specplay/bench/data", meta={"context_tokens": length})
                       for i in range(n)]
        out[name] = prompts
    return out


def target_tokenizer(preset):
    """The preset target's tokenizer (Hugging Face's, from the local folder or the hub cache)."""
    from transformers import AutoTokenizer

    from specplay.presets.models import resolve_model

    return AutoTokenizer.from_pretrained(resolve_model(preset.target.model))
