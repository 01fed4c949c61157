"""A preset's `speculative_config`, typed: the method table's kind and facts, its verifier, whether its
acceptance is synthetic, and the limits of k, beside vLLM's own keys kept verbatim (`vllm`: what the engine
is given, and what `vllm serve --speculative-config` prints).

Readers take `kind` (and `facts`, the method table's row for it), never vLLM's `method`: PARD is vLLM's
`draft_model` with `parallel_drafting: true`, a kind of its own whose step costs one draft pass, so a reader
that looks facts up by the method name gets a draft model's k passes. It also reads as a read-only mapping
of vLLM's keys (`spec["model"]`, `spec.get(...)`, `dict(spec)`), the raw config as written.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property

from specplay.presets.methods import MethodFacts, facts_of_kind, kind_of
from specplay.presets.verifiers import Verifier, is_synthetic, verifier_of

K_MIN, K_MAX = 1, 16  # num_speculative_tokens a preset (and a bench's --k) may ask for


@dataclass(frozen=True)
class Limits:
    k_min: int
    k_max: int
    prompt_lookup: tuple[int, int] | None  # (prompt_lookup_min, prompt_lookup_max) of a lookup method; else None

    def allows_k(self, k: int) -> bool:
        return self.k_min <= k <= self.k_max


class Speculation(Mapping):
    """One preset's speculative_config. Built from vLLM's keys (a mapping); immutable."""

    def __init__(self, config: Mapping):
        raw = dict(config.vllm if isinstance(config, Speculation) else config)
        object.__setattr__(self, "_raw", raw)
        object.__setattr__(self, "kind", kind_of(raw))  # the method table's key (presets.methods)

    def __setattr__(self, name, value):
        raise AttributeError("a preset's speculative_config is read-only: build a new Speculation")

    # -- vLLM's keys ----------------------------------------------------------------------------------------
    def __getitem__(self, key: str):
        return self._raw[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)

    def __repr__(self) -> str:
        return f"Speculation(kind={self.kind!r}, {self._raw!r})"

    @property
    def vllm(self) -> dict:
        """vLLM's speculative_config as the preset wrote it (a copy: the engine's to change)."""
        return dict(self._raw)

    @property
    def method(self) -> str:
        """vLLM's name, for display and for vLLM; look nothing up by it (`kind`, `facts`)."""
        return str(self._raw.get("method"))

    @property
    def k(self) -> int:
        return int(self._raw["num_speculative_tokens"])

    @property
    def draft_model(self) -> str | None:
        return self._raw.get("model")

    # -- what the playground knows of it --------------------------------------------------------------------
    @cached_property
    def facts(self) -> MethodFacts:
        """The method table's row for this kind (neutral facts for a method the table doesn't know)."""
        return facts_of_kind(self.kind)

    @property
    def verifier(self) -> Verifier:
        """What its rejection_sample_method promises at temperature 0 (presets.verifiers)."""
        return verifier_of(self._raw)

    @property
    def synthetic(self) -> bool:
        """Synthetic acceptance (the dummy-* presets): speed figures only, acceptance set by the preset."""
        return is_synthetic(self._raw)

    @property
    def limits(self) -> Limits:
        lookup = None
        if self.facts.lookup and self._raw.get("prompt_lookup_min") is not None:
            lo = int(self._raw["prompt_lookup_min"])
            lookup = (lo, int(self._raw.get("prompt_lookup_max") or lo))
        return Limits(K_MIN, K_MAX, lookup)
