"""A preset's `speculative_config`: one pydantic model, the preset schema's section and what every reader
takes. `model_validate` reads vLLM's keys (a preset file's, a command line's, a bench.json's); `model_dump`
(and `.vllm`) gives them back verbatim, the keys the author wrote in the order written, unknown-to-us ones
included (vLLM's own, checked against the installed vLLM's SpeculativeConfig when the preset loads): what
the engine is given, and what `vllm serve --speculative-config` prints.

Readers take `kind` (and `facts`, the method table's row for it), never vLLM's `method`: PARD is vLLM's
`draft_model` with `parallel_drafting: true`, a kind of its own whose step costs one draft pass, so a reader
that looks facts up by the method name gets a draft model's k passes. The keys the playground reads are typed
fields (`spec.model`, `spec.prompt_lookup_min`); a copy with other keys is `replace(...)`.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_serializer, model_validator

from specplay.presets.methods import MethodFacts, facts_of_kind, kind_named
from specplay.presets.verifiers import SYNTHETIC, Verifier, verifier_named

K_MIN, K_MAX = 1, 16  # num_speculative_tokens a preset (and a bench's --k) may ask for
# vLLM's n-gram window where a speculative_config gives neither bound (config/speculative.py, 0.32 and 0.34:
# "Defaults to prompt_lookup_min if set, otherwise 5"); tests/unit/test_import.py reads it off the installed vLLM
VLLM_PROMPT_LOOKUP_DEFAULT = 5


@dataclass(frozen=True)
class Limits:
    k_min: int
    k_max: int
    prompt_lookup: tuple[int, int] | None  # (prompt_lookup_min, prompt_lookup_max) of a lookup method; else None

    def allows_k(self, k: int) -> bool:
        return self.k_min <= k <= self.k_max


class Speculation(BaseModel):
    """The keys the playground reads, typed; every other key goes to vLLM verbatim (checked against the
    installed vLLM's SpeculativeConfig when the preset loads)."""

    model_config = ConfigDict(extra="allow", strict=True, frozen=True)
    method: str = Field(min_length=1, description="a speculative method the installed vLLM has (its SpeculativeMethod "
                        "or a registered custom method; checked when the preset loads)")
    num_speculative_tokens: int = Field(ge=K_MIN, le=K_MAX, description=f"an integer from {K_MIN} to {K_MAX}")
    model: str | None = Field(None, description="the draft model or head (not for n-gram, suffix, MTP)")
    parallel_drafting: bool = False
    draft_tensor_parallel_size: int | None = Field(None, ge=1, description="1 or the target's tensor_parallel_size")
    prompt_lookup_min: int | None = Field(None, ge=1)
    prompt_lookup_max: int | None = Field(None, ge=1)
    rejection_sample_method: str | None = None
    draft_sample_method: str | None = None
    synthetic_acceptance_rates: list[float] | None = None
    quantization: str | None = None  # the draft's (the memory plan reads it)
    use_heterogeneous_vocab: bool = Field(False, description="a draft_model whose vocabulary differs from the "
                                          "target's (vLLM's token-level intersection; greedy drafts only)")
    _written: tuple[str, ...] = PrivateAttr(())  # the keys as the author wrote them, in order

    @model_validator(mode="wrap")
    @classmethod
    def _remember_keys(cls, data, handler):
        spec = handler(data)
        if isinstance(data, dict):  # (a Speculation given again is itself, keys and all)
            spec._written = tuple(data)
        return spec

    @model_serializer(mode="wrap")
    def _as_written(self, handler) -> dict:
        """Only the keys written, as written: a default the author left out is vLLM's to choose."""
        data = handler(self)
        return {key: data[key] for key in self._written if key in data}

    @property
    def vllm(self) -> dict:
        """vLLM's speculative_config as the preset wrote it (a fresh dict: the engine's to change)."""
        return self.model_dump()

    def replace(self, **keys) -> "Speculation":
        """A copy with these keys set (validated again; new keys after the written ones)."""
        return Speculation.model_validate({**self.vllm, **keys})

    # -- what the playground knows of it --------------------------------------------------------------------
    @property
    def kind(self) -> str:
        """The method table's key (presets.methods): vLLM's method, but PARD for a parallel draft_model."""
        return kind_named(self.method, self.parallel_drafting)

    @property
    def k(self) -> int:
        return self.num_speculative_tokens

    @property
    def draft_model(self) -> str | None:
        return self.model

    @property
    def facts(self) -> MethodFacts:
        """The method table's row for this kind (neutral facts for a method the table doesn't know)."""
        return facts_of_kind(self.kind)

    @property
    def verifier(self) -> Verifier:
        """What its rejection_sample_method promises at temperature 0 (presets.verifiers)."""
        return verifier_named(self.rejection_sample_method)

    @property
    def synthetic(self) -> bool:
        """Synthetic acceptance (the dummy-* presets): speed figures only, acceptance set by the preset."""
        return self.verifier.name == SYNTHETIC

    @property
    def prompt_lookup(self) -> tuple[int, int] | None:
        """(min, max) of a lookup method's n-gram window as vLLM resolves it (None for other methods): a bound
        left out takes the other's value, both left out vLLM's default. The written keys stay as written."""
        if not self.facts.lookup:
            return None
        lo, hi = self.prompt_lookup_min, self.prompt_lookup_max
        lo = lo if lo is not None else (hi if hi is not None else VLLM_PROMPT_LOOKUP_DEFAULT)
        return lo, (hi if hi is not None else lo)

    @property
    def limits(self) -> Limits:
        return Limits(K_MIN, K_MAX, self.prompt_lookup)
