"""One table of what the playground knows about each speculative method; adding a method touches only
this table (and vLLM must accept the method: presets check that against the installed vLLM).

A method's "kind" is its vLLM `method`, except that `draft_model` with `parallel_drafting: true` (PARD)
is a kind of its own: its step costs differ.
"""

from __future__ import annotations

from dataclasses import dataclass

# What a speculative step costs beyond the target's verify pass over k+1 tokens.
VERIFY_ONLY, ONE_DRAFT_PASS, K_DRAFT_PASSES, K_HEAD_PASSES = (
    "verify only", "verify + one draft pass", "verify + k draft passes", "verify + k head passes")
# How vLLM 0.32 runs it on Model Runner V2.
V2_GRAPHED, V2_UNGRAPHED, V2_UNSUPPORTED = "CUDA graphs", "no CUDA graphs", "not on V2 (vLLM runs it on V1)"


@dataclass(frozen=True)
class MethodFacts:
    kind: str
    method: str  # vLLM's `method`
    draft: str  # "model" (a draft model), "head" (EAGLE head), "inside" (MTP layers in the target), "none"
    plan_label: str | None  # what the memory plan calls the extra model; None when there is none
    step_cost: str  # one of VERIFY_ONLY, ONE_DRAFT_PASS, K_DRAFT_PASSES, K_HEAD_PASSES
    v2: str | None  # how Model Runner V2 runs it (vLLM 0.32); None where not established
    advice: str  # what would help when acceptance is weak (completes "...; {advice}.")
    lookup: bool = False  # needs prompt_lookup_min/max (n-gram matching)
    gpu_only: bool = False
    needs_package: tuple[str, str] | None = None  # (import name, why and how to install) when vLLM needs one

    @property
    def needs_model(self) -> bool:
        """Whether speculative_config names a model (draft or head)."""
        return self.draft in ("model", "head")

    def draft_passes(self, k: int) -> int:
        """Draft or head forward passes per speculative step (the cost model of a step)."""
        return {VERIFY_ONLY: 0, ONE_DRAFT_PASS: 1, K_DRAFT_PASSES: k, K_HEAD_PASSES: k}[self.step_cost]


_NGRAM_ADVICE = ("n-gram drafts come from the prompt, so a prompt whose answer copies from it (a rewrite, a code "
                 "edit, an answer from a given context) would help")
ARCTIC = ("arctic_inference", "needs arctic-inference (pip install arctic-inference; source-only, builds a C++ extension)")

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
                "an EAGLE head trained for this target, or a smaller k, would help"),
    MethodFacts("eagle3", "eagle3", "head", "EAGLE-3 head", K_HEAD_PASSES, V2_GRAPHED,
                "an EAGLE-3 head trained for this target, or a smaller k, would help"),
    MethodFacts("mtp", "mtp", "inside", "MTP layers", K_HEAD_PASSES, None,
                "the model's own MTP layers are what they are; a smaller k (fewer passes of one MTP layer) would help"),
)}
METHODS = frozenset(f.method for f in METHOD_FACTS.values())  # the vLLM methods presets may name


def kind_of(speculative_config: dict) -> str:
    method = speculative_config.get("method")
    if method == "draft_model" and speculative_config.get("parallel_drafting"):
        return "pard"
    return method


def facts_for(speculative_config: dict) -> MethodFacts:
    return METHOD_FACTS[kind_of(speculative_config)]


def advice_for(speculative_config: dict) -> str:
    """The sentence for weak acceptance, per kind (what specplay.run.explain says)."""
    kind = kind_of(speculative_config)
    return METHOD_FACTS[kind].advice if kind in METHOD_FACTS else "a better draft would help"
