"""Step detail: the speculative engine's verification steps, reconstructed after a run (`step_detail`), and the
acceptance histogram (`acceptance_histogram`, vLLM's name: steps by accepted count).

Per decode step: how many drafted tokens it accepted and how many it drafted, the drafted tokens where they
can be known exactly, the target's own token at the first rejection, and the step's seconds.

- n-gram: vLLM's proposer is a pure function of the context (prompt + output so far), its n range
  (`prompt_lookup_min`/`max`) and k, so `ngram_proposal` recomputes it: a port of the installed vLLM's
  `_find_longest_matched_ngram_and_propose_tokens` (vllm/v1/spec_decode/ngram_proposer.py; the engine tests
  check the port against vLLM's own function). A drafted token is accepted while it equals the token the
  target emitted there, at any temperature (an n-gram draft is one token with probability 1, so a rejected
  one is never resampled to itself), so the proposal gives the step's accepted count.
- Any method, a step that accepted every one of k drafts: its drafts are the tokens it emitted.
- A draft model at temperature 0, where asked (`specplay compare --draft-steps`): its drafts are its greedy
  continuation of each step's context, computed after the run by the draft model alone
  (engine.draft_runner) and checked like n-gram's.
- Otherwise (EAGLE, MTP, DFlash, suffix, a draft model not replayed): vLLM doesn't expose the drafts, so a
  step has its accepted count only, and `note_for(kind)` says why (from the method table's kind of drafter).

Every reconstructed step is checked against vLLM's own per-step counts: the streamed chunks (one a step, an
accepted count + 1 tokens). A chunk the reconstruction doesn't tile exactly shows unknown (None), never a
guess, and the next chunk starts afresh (the context is known exactly, so an error doesn't carry). A chunk
tiled by several reconstructed steps (vLLM merged chunks a slow reader hadn't taken) keeps them, without
seconds.
"""

from __future__ import annotations

from typing import Annotated, Callable, Sequence

from pydantic import BaseModel, ConfigDict, Field

from specplay.core.events import PER_REQUEST
from specplay.presets.methods import facts_of_kind
from specplay.presets.speculation import Speculation
from specplay.run.fields import MAX_K, Count, Seconds6, SmallCount, TokenId

# Drafts recomputable from the context: vLLM's CPU n-gram proposer, whose port the engine tests check against
# vLLM's own function (ngram_gpu is another implementation, not checked: its steps show counts only).
LOOKUP_METHODS = ("ngram",)
NOTES = {
    "suffix": "suffix decoding drafts from a tree of this and earlier requests' tokens that vLLM keeps inside "
              "the engine, so its drafts can't be recomputed here: a step shows its accepted count",
    "ngram_gpu": "the GPU n-gram proposer is not recomputed here (only the CPU one is, checked against vLLM's own "
                 "function), so a step shows its accepted count",
}
ALL_K = "(and its drafts only where it accepted all k, since those are the tokens it emitted)"
MODEL_NOTE = ("the {what}'s drafts stay inside vLLM and this run didn't replay them (`specplay compare --draft-steps` "
              "does, at temperature 0), so a step shows its accepted count " + ALL_K)
HIDDEN_NOTE = ("drafts from the {what} are made from the target's hidden states inside the engine and vLLM doesn't return "
               "them, so a step shows its accepted count " + ALL_K)


def note_for(kind: str) -> str:
    """Why a method's drafts can't be shown (the method table's kind of drafter)."""
    facts = facts_of_kind(kind)
    if kind in NOTES:
        return NOTES[kind]
    what = facts.plan_label or f"{kind} drafter"
    return (MODEL_NOTE if facts.draft == "model" else HIDDEN_NOTE if facts.draft in ("head", "inside")
            else "vLLM doesn't return this method's drafted tokens, so a step shows its accepted count " + ALL_K
            ).format(what=what)


class Step(BaseModel):
    """One verification step. `start`: index in the output of its first emitted token; `tokens`: how many it
    emitted (accepted + 1, fewer where max_tokens or a stop cut it). None: not known exactly. Its dump is the
    run JSON's `step_detail` entry."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    start: Count
    tokens: Count
    accepted: SmallCount | None = None
    drafted: SmallCount | None = None
    proposed: Annotated[tuple[TokenId, ...], Field(max_length=MAX_K)] | None = None
    target_token: TokenId | None = None  # the target's token where the first draft was rejected (None: no rejection)
    seconds: Seconds6 | None = None  # since the previous step's chunk; None inside a merged chunk

    @property
    def known(self) -> bool:
        return self.proposed is not None


class StepDetail(BaseModel):
    """What `step_detail` rebuilds (the run keeps its parts as the JSON's step_detail, step_detail_note and
    step_detail_rejections_checked: result.SpeculativeResult)."""

    model_config = ConfigDict(frozen=True)

    steps: tuple[Step, ...]
    note: str | None  # why drafts can't be shown for this method (None where they are recomputed)
    # whether a step's rejected draft token is the one vLLM drafted: yes where the drafter is deterministic on
    # the same context (n-gram); not for a draft model replayed alone, whose counts confirm a rejection at
    # that position but not which token it rejected
    rejections_checked: bool = True

    @property
    def known(self) -> int:
        return sum(1 for s in self.steps if s.known)


def ngram_proposal(context: Sequence[int], min_n: int, max_n: int, k: int, max_model_len: int = 1 << 30) -> list[int]:
    """vLLM's n-gram proposal for this context: the tokens that followed the earliest earlier occurrence of
    the longest suffix n-gram (min_n <= n <= max_n), up to k (fewer where the context ends first, none
    without a match). A line-for-line port of vLLM's KMP search over the reversed context."""
    total = len(context)
    k = min(k, max_model_len - total)
    if total < min_n or k <= 0:
        return []
    tokens = list(reversed(context))
    lps = [0] * max_n
    longest = position = prev = 0
    i = 1
    while i < total:
        if tokens[prev] == tokens[i]:
            prev += 1
            if prev >= longest:
                longest, position = prev, i
            if i < max_n:
                lps[i] = prev
            if prev == max_n:
                prev = lps[max_n - 1]
            i += 1
        elif prev != 0:
            prev = lps[prev - 1]
        else:
            i += 1
    if longest < min_n:
        return []
    start = total - 1 - position + longest
    return list(context[start:start + min(k, total - start)])


def _verify(proposal: Sequence[int], output: Sequence[int], at: int, room: int) -> tuple[int | None, int, int | None]:
    """(accepted, tokens emitted, target token at the first rejection) of one step at output[at], with
    `room` output tokens left: accepted while the draft equals what the target emitted. Accepted is None
    where the output ends (max_tokens, a stop) before a rejection shows: vLLM may have accepted drafts
    past the end, which the output doesn't show."""
    accepted = 0
    while accepted < len(proposal) and accepted < room and proposal[accepted] == output[at + accepted]:
        accepted += 1
    if accepted < len(proposal) and accepted < room:
        return accepted, accepted + 1, output[at + accepted]
    if accepted + 1 <= room:  # every draft accepted, then the target's bonus token
        return accepted, accepted + 1, None
    return (None if accepted < len(proposal) else accepted), room, None


def _tile(chunk_start: int, size: int, output, room_end: int, propose) -> list[tuple] | None:
    """The reconstructed steps covering output[chunk_start:chunk_start+size]: [(start, proposal, accepted,
    emitted, target token)], or None where they don't tile it exactly (vLLM's counts disagree)."""
    steps, at, end = [], chunk_start, chunk_start + size
    while at < end:
        proposal = propose(at)
        if proposal is None:  # no draft known for this context (a replayed draft model's, between chunks)
            return None
        accepted, emitted, target = _verify(proposal, output, at, room_end - at)
        steps.append((at, tuple(proposal), accepted, emitted, target))
        at += emitted
    return steps if at == end else None


def _chunks(sizes, times):
    """(start, size, seconds since the previous chunk) per decode chunk."""
    start = sizes[0]
    for size, before, now in zip(sizes[1:], times, times[1:]):
        yield start, size, now - before
        start += size


def reconstructed_steps(output, sizes, times, propose) -> tuple[Step, ...]:
    """Each decode chunk's steps from `propose(at)` (the draft for a step starting at output[at]), checked
    against the chunk; a chunk they don't tile is one unknown step with the stream's accepted count."""
    steps = []
    for start, size, seconds in _chunks(sizes, times):
        tiled = _tile(start, size, output, len(output), propose)
        if tiled is None:
            steps.append(Step(start=start, tokens=size, seconds=seconds))
            continue
        for at, proposal, accepted, emitted, target in tiled:
            steps.append(Step(start=at, tokens=emitted, accepted=accepted, drafted=len(proposal), proposed=proposal,
                              target_token=target, seconds=seconds if len(tiled) == 1 else None))
    return tuple(steps)


def counted_steps(output, sizes, times, k: int, exact_chunks: bool) -> tuple[Step, ...]:
    """Steps read off the stream alone: a chunk is one step accepting size − 1 drafts, where chunks are known
    to be steps (`exact_chunks`) and no chunk is longer than k + 1; its drafts are known where it accepted k.
    The last chunk, unless it holds k + 1 tokens, may have been cut by max_tokens or a stop: unknown."""
    steps = []
    for start, size, seconds in _chunks(sizes, times):
        cut = start + size == len(output) and size < k + 1
        if not exact_chunks or size > k + 1 or cut:
            steps.append(Step(start=start, tokens=size))
            continue
        accepted = size - 1
        proposed = tuple(output[start:start + k]) if accepted == k else None
        steps.append(Step(start=start, tokens=size, accepted=accepted, drafted=k if accepted == k else None,
                          proposed=proposed, seconds=seconds))
    return tuple(steps)


def step_detail(prompt_ids: Sequence[int], side, speculative_config: Speculation, kind: str,
                max_model_len: int = 1 << 30, propose: Callable[[list[int]], list[int]] | None = None) -> StepDetail:
    """The speculative engine's decode steps after a run. `side`: its EngineTrace or EngineResult (token_ids,
    step_sizes, step_times, steps); `kind`: the method's kind (presets.methods); `propose(context)`: a
    drafter for another method (e.g. a draft model's greedy continuation at T=0), where one is at hand."""
    output, sizes, times = list(side.token_ids), list(side.step_sizes), list(side.step_times)
    if len(sizes) < 2 or len(times) != len(sizes):
        return StepDetail(steps=(), note=None)
    k = speculative_config.k
    context = list(prompt_ids) + output
    if kind in LOOKUP_METHODS or propose is not None:
        lo, hi = speculative_config.prompt_lookup or (1, 1)  # vLLM's window, its defaults filled as it fills them

        def at(i: int) -> list[int]:
            upto = context[:len(prompt_ids) + i]
            return propose(upto) if propose is not None else ngram_proposal(upto, lo, hi, k, max_model_len)
        return StepDetail(steps=reconstructed_steps(output, sizes, times, at), note=None)
    # every decode chunk is one step: the request's own counters say so (chunks alone can't tell a merge)
    exact = side.steps_source == PER_REQUEST and max(0, side.steps - 1) == len(sizes) - 1
    return StepDetail(steps=counted_steps(output, sizes, times, k, exact), note=note_for(kind))


def chunk_contexts(prompt_ids: Sequence[int], side) -> list[list[int]]:
    """The context (prompt + output so far) where each decode chunk starts: where a draft model drafted a
    step, when chunks are steps. What `replayed` needs the draft's continuations of."""
    output, sizes = list(side.token_ids), list(side.step_sizes)
    starts, at = [], sizes[0] if sizes else 0
    for size in sizes[1:]:
        starts.append(at)
        at += size
    return [list(prompt_ids) + output[:start] for start in starts]


def replayed(contexts: Sequence[Sequence[int]], continuations: Sequence[Sequence[int]]) -> Callable:
    """`propose` for step_detail from a draft model's greedy continuations of `contexts` (by their length:
    a context is always a prefix of the same prompt + output); None where none was computed."""
    table = {len(c): list(p) for c, p in zip(contexts, continuations)}
    return lambda context: table.get(len(context))


def acceptance_histogram(counters) -> list[int]:
    """vLLM's `acceptance_histogram` from a run's counters: [j] = verification steps (with a draft) that
    accepted exactly j drafted tokens, j = 0..k. Position i was accepted by the steps with j > i, so
    histogram[j] = per_position[j-1] − per_position[j] (per_position[-1] = drafts, per_position[k] = 0)."""
    per_pos = list(counters.accepted_per_position)
    if not per_pos or sum(per_pos) != counters.num_accepted_tokens:
        return []  # no per-position counts (or ones that don't add up): the histogram isn't known
    above = [counters.num_drafts, *per_pos, 0]
    return [above[j] - above[j + 1] for j in range(len(per_pos) + 1)]
