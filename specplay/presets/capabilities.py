"""Can the installed vLLM run what a preset asks for? Judged from what vLLM itself says it has
(engine.probes.vllm_facts: its methods, SpeculativeConfig fields, runners, verifiers), never from its version
number. A preset that needs what this vLLM lacks still loads and stays listed; this module gives the one
sentence that says why it can't run here (the page, `specplay presets` and `compare` show it).
"""

from __future__ import annotations

from specplay.engine.vllm_facts import VllmFacts
from specplay.presets.speculation import Speculation

INSTALLED = object()  # "ask the installed vLLM" (a test passes recorded facts instead)
NO_V1 = "needs vLLM ≤ 0.33: Model Runner V1 was removed in 0.34"
NO_PARD = "needs vLLM ≤ 0.33: parallel_drafting for {method} was removed in 0.34 (vLLM {version} drafts in parallel only with {allowed})"


def installed_facts() -> VllmFacts | None:
    from specplay.engine.probes import vllm_facts

    return vllm_facts()


def resolve(facts) -> VllmFacts | None:
    return installed_facts() if facts is INSTALLED else facts


def method_problem(method: str, facts: VllmFacts | None) -> str | None:
    """None when this vLLM has the method (or vLLM can't be asked), else the sentence."""
    if facts is None or method in facts.all_methods:
        return None
    return (f"needs a vLLM with speculative method {method!r}; vLLM {facts.version} has "
            f"{', '.join(sorted(m for m in facts.all_methods if m not in facts.mtp_aliases))}")


def _choice_problem(key: str, value: str | None, choices, version: str) -> str | None:
    if value is None or not choices or value in choices:
        return None
    return f"needs a vLLM whose {key} has {value!r}; vLLM {version} has {', '.join(choices)}"


def vllm_problem(spec: Speculation, model_runner: str, facts) -> str | None:
    """The one sentence saying what this preset needs that the vLLM (`facts`) lacks; None when it can run."""
    facts = resolve(facts)
    if facts is None:
        return None
    problem = method_problem(spec.method, facts)
    if problem:
        return problem
    if model_runner == "v1" and not facts.has_v1_runner:
        return NO_V1
    allowed = facts.parallel_drafting_methods
    if spec.parallel_drafting and allowed is not None and spec.method not in allowed:
        return NO_PARD.format(method=spec.method, version=facts.version, allowed=" and ".join(sorted(allowed)))
    return (_choice_problem("rejection_sample_method", spec.rejection_sample_method, facts.rejection_sample_methods,
                            facts.version)
            or _choice_problem("draft_sample_method", spec.draft_sample_method, facts.draft_sample_methods,
                               facts.version))


def needed_package(spec: Speculation, facts=INSTALLED) -> tuple[str, str] | None:
    """(import name, sentence) of a package this vLLM needs for the method: suffix needs arctic-inference
    only where vLLM's suffix proposer imports it (0.34's GPU suffix speculator doesn't)."""
    needed = spec.facts.needs_package
    facts = resolve(facts)
    if needed and needed[0] == "arctic_inference" and facts is not None and not facts.suffix_needs_arctic:
        return None
    return needed


def draft_graphed_on_v2(facts=INSTALLED) -> bool | None:
    """Whether this vLLM's V2 runner captures CUDA graphs for a draft model (0.34: yes); None without vLLM."""
    facts = resolve(facts)
    return None if facts is None else facts.draft_graphs_on_v2


def has_v1_runner(facts=INSTALLED) -> bool | None:
    facts = resolve(facts)
    return None if facts is None else facts.has_v1_runner
