"""One table of what the playground knows about each speculative method; every layer reads it (the schema,
validation, bench passes and advice, the explanation, the memory plan). Which method names are allowed is
not decided here: the installed vLLM says (`engine.probes.vllm_facts`: its `SpeculativeMethod` plus any
registered custom methods). A name vLLM accepts that this table doesn't know gets NEUTRAL facts (nothing
assumed: no model check, draft passes unknown), so a method vLLM adds next month runs ad hoc unchanged.

A method's "kind" is its vLLM `method`, except that `draft_model` with `parallel_drafting: true` (PARD,
vLLM 0.31-0.33) is a kind of its own: its step costs differ; and vLLM's deprecated `*_mtp` names are `mtp`.
"""

from __future__ import annotations

from dataclasses import dataclass

# What a speculative step costs beyond the target's verify pass over k+1 tokens.
VERIFY_ONLY, ONE_DRAFT_PASS, K_DRAFT_PASSES, K_HEAD_PASSES, UNKNOWN_COST = (
    "verify only", "verify + one draft pass", "verify + k draft passes", "verify + k head passes",
    "not known to the playground")
# How vLLM 0.32 runs it on Model Runner V2 (on 0.34 V2 is the only runner; the draft model has CUDA graphs there).
V2_GRAPHED, V2_UNGRAPHED, V2_UNSUPPORTED = "CUDA graphs", "no CUDA graphs", "not on V2 (vLLM runs it on V1)"


@dataclass(frozen=True)
class MethodFacts:
    kind: str
    method: str  # vLLM's `method`
    # "model" (a draft model of its own), "head" (a drafter on the target's hidden states sharing its embedding and
    # LM head: EAGLE, DFlash, DSpark), "inside" (MTP layers in the target), "none", "?" (not known)
    draft: str
    plan_label: str | None  # what the memory plan calls the extra model; None when there is none
    step_cost: str  # one of VERIFY_ONLY, ONE_DRAFT_PASS, K_DRAFT_PASSES, K_HEAD_PASSES, UNKNOWN_COST
    v2: str | None  # how Model Runner V2 runs it (vLLM 0.32); None where not established
    advice: str  # what would help when acceptance is weak (completes "...; {advice}.")
    target_hidden_states: bool = False  # drafts from the target's hidden states (EAGLE, MTP, DFlash, DSpark)
    lookup: bool = False  # needs prompt_lookup_min/max (n-gram matching)
    gpu_only: bool = False
    needs_package: tuple[str, str] | None = None  # (import name, why and how to install) when vLLM needs one
    known: bool = True  # False: the neutral facts of a method vLLM has and this table doesn't

    @property
    def needs_model(self) -> bool | None:
        """Whether speculative_config names a model (draft or head); None: not known (neutral facts)."""
        return None if self.draft == "?" else self.draft in ("model", "head")

    @property
    def parallel(self) -> bool:
        """One draft pass proposes all k tokens (PARD, DFlash, DSpark)."""
        return self.step_cost == ONE_DRAFT_PASS

    @property
    def drafts_cost_a_pass(self) -> bool | None:
        """Whether drafting runs a forward pass (a model, head or MTP layer); None when not known."""
        return None if self.step_cost == UNKNOWN_COST else self.step_cost != VERIFY_ONLY

    def draft_passes(self, k: int) -> int | None:
        """Draft or head forward passes per speculative step (the cost model of a step); None when unknown."""
        return {VERIFY_ONLY: 0, ONE_DRAFT_PASS: 1, K_DRAFT_PASSES: k, K_HEAD_PASSES: k}.get(self.step_cost)


_NGRAM_ADVICE = ("n-gram drafts come from the prompt, so a prompt whose answer copies from it (a rewrite, a code "
                 "edit, an answer from a given context) would help")
ARCTIC = ("arctic_inference", "needs arctic-inference (pip install arctic-inference; source-only, builds a C++ extension)")
NEUTRAL_ADVICE = "a better draft would help"

METHOD_FACTS = {f.kind: f for f in (
    MethodFacts("ngram", "ngram", "none", None, VERIFY_ONLY, None, _NGRAM_ADVICE, lookup=True),
    MethodFacts("ngram_gpu", "ngram_gpu", "none", None, VERIFY_ONLY, None, _NGRAM_ADVICE, lookup=True,
                gpu_only=True),
    MethodFacts("suffix", "suffix", "none", None, VERIFY_ONLY, V2_UNSUPPORTED,
                "suffix drafts come from the prompt and earlier answers, so repeated or copied text would help",
                needs_package=ARCTIC),
    MethodFacts("draft_model", "draft_model", "model", "draft model", K_DRAFT_PASSES, V2_UNGRAPHED,
                "a draft closer to the target, or a smaller k (fewer rejected draft tokens), would help"),
    MethodFacts("pard", "draft_model", "model", "PARD draft", ONE_DRAFT_PASS, V2_UNSUPPORTED,
                "a PARD draft of the target's family would help; a larger k costs little, since one pass drafts all k"),
    MethodFacts("eagle", "eagle", "head", "EAGLE head", K_HEAD_PASSES, V2_GRAPHED,
                "an EAGLE head trained for this target, or a smaller k, would help", target_hidden_states=True),
    MethodFacts("eagle3", "eagle3", "head", "EAGLE-3 head", K_HEAD_PASSES, V2_GRAPHED,
                "an EAGLE-3 head trained for this target, or a smaller k, would help", target_hidden_states=True),
    MethodFacts("mtp", "mtp", "inside", "MTP layers", K_HEAD_PASSES, None,
                "the model's own MTP layers are what they are; a smaller k (fewer passes of one MTP layer) would help",
                target_hidden_states=True),
    MethodFacts("dflash", "dflash", "head", "DFlash draft", ONE_DRAFT_PASS, None,
                "a DFlash draft trained for this target would help; a larger k costs little, since one pass drafts "
                "the whole block", target_hidden_states=True),
    MethodFacts("dspark", "dspark", "head", "DSpark draft", ONE_DRAFT_PASS, None,
                "a DSpark draft trained for this target would help (k is its trained block size; "
                "enable_adaptive_verification verifies fewer of a weak block's tokens)",
                target_hidden_states=True),
    MethodFacts("extract_hidden_states", "extract_hidden_states", "none", None, VERIFY_ONLY, None,
                "extract_hidden_states proposes no drafts (it saves the target's hidden states), so nothing "
                "speculative can help"),
)}
KNOWN_METHODS = frozenset(f.method for f in METHOD_FACTS.values())  # the methods this table has facts for


def neutral_facts(method: str, speculator: dict | None = None) -> MethodFacts:
    """The facts of a method vLLM accepts and this table doesn't know: what vLLM's own SpeculatorConfig says
    of it where the installed vLLM has one (0.34: a draft checkpoint, one parallel pass, the target's hidden
    states), else nothing assumed."""
    method = str(method)
    speculator = speculator if speculator is not None else _vllm_speculator(method)
    if speculator and speculator.get("proposes_draft_tokens") and speculator.get("draft_checkpoint"):
        hidden = bool(speculator.get("uses_target_hidden_states"))
        cost = ONE_DRAFT_PASS if speculator.get("parallel_drafting") else K_HEAD_PASSES if hidden else K_DRAFT_PASSES
        return MethodFacts(method, method, "head" if hidden else "model", "draft", cost, None, NEUTRAL_ADVICE,
                           target_hidden_states=hidden, known=False)
    return MethodFacts(method, method, "?", None, UNKNOWN_COST, None, NEUTRAL_ADVICE, known=False)


def _vllm_speculator(method: str) -> dict | None:
    from specplay.engine.probes import vllm_facts

    facts = vllm_facts()
    return facts.speculators.get(method) if facts is not None else None


def kind_named(method: str, parallel_drafting: bool = False) -> str:
    """The method table's key for vLLM's method name (PARD: a draft_model drafting in parallel)."""
    if method == "draft_model" and parallel_drafting:
        return "pard"
    if method.endswith("_mtp"):  # vLLM's deprecated per-model names, which it maps to "mtp"
        return "mtp"
    return method


def kind_of(speculative_config: dict) -> str:
    """The same from vLLM's keys as written (a preset file's, a command line's: before they are typed)."""
    return kind_named(str(speculative_config.get("method")), bool(speculative_config.get("parallel_drafting")))


def facts_of_kind(kind: str) -> MethodFacts:
    return METHOD_FACTS.get(kind) or neutral_facts(kind)


def facts_for(speculative_config: dict) -> MethodFacts:
    return facts_of_kind(kind_of(speculative_config))
