"""A draft-model run's drafts, after the run: the draft model alone (engine.draft_runner) continues each
step's context greedily, and the run's step detail is rebuilt from those drafts, each step checked against
the stream's own counts ("unknown" where they disagree). Only at temperature 0, where vLLM's draft is its
greedy continuation; the draft engine starts after the pair is done with, so it costs one more load."""

from __future__ import annotations


from specplay.engine.draft_runner import greedy_continuations
from specplay.presets.engines import draft_engine_settings
from specplay.run.result import RunResult
from specplay.run.steps import chunk_contexts, replayed, step_detail

# why a run's drafts weren't replayed, for the caller to say
NOT_A_DRAFT_MODEL = "this preset has no separate draft model that drafts one token a pass"
NOT_GREEDY = "at a temperature above 0 the draft samples, so its drafts can't be recomputed"
OTHER_VOCABULARY = ("the draft has a vocabulary of its own (use_heterogeneous_vocab): it drafts from the target's "
                    "tokens mapped into its own by vLLM, which the draft alone, given the target's ids, can't replay")
REPLAYED = ("the draft model's drafts, recomputed after the run: the draft alone continued each step's context "
            "greedily (temperature 0), and each step was checked against vLLM's per-step counts; those confirm the "
            "accepted tokens and where a rejection fell, not which token was rejected (marked \"not checked\")")


def why_not(preset, temperature: float) -> str | None:
    """Why this run's drafts can't be replayed; None: they can."""
    if draft_engine_settings(preset) is None:
        return NOT_A_DRAFT_MODEL
    if preset.speculative_config.use_heterogeneous_vocab:
        return OTHER_VOCABULARY
    return NOT_GREEDY if temperature > 0 else None


def with_draft_steps(result: RunResult, prompt_ids: list[int], preset, hardware=None) -> RunResult:
    """`result` with its step detail rebuilt from the draft model's own drafts (see the module)."""
    settings = draft_engine_settings(preset, hardware)
    side = result.speculative
    contexts = chunk_contexts(prompt_ids, side)
    if settings is None or not contexts:
        return result
    continuations = greedy_continuations(settings, contexts, preset.num_speculative_tokens)
    detail = step_detail(prompt_ids, side, preset.speculative_config, preset.facts.kind,
                         preset.target.max_model_len, propose=replayed(contexts, continuations))
    return result.with_step_detail(detail.model_copy(update={"note": REPLAYED, "rejections_checked": False}))
