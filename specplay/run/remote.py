"""A pair on two running `vllm serve` servers (remote mode): the operator gives their URLs, never a visitor.
Before the first run both are checked: they answer, serve the same model with the same tokenizer, and the
speculative one drafts (its /metrics has spec-decode counters) while the baseline doesn't."""

from __future__ import annotations

from specplay.core.events import BASELINE, SPECULATIVE, PairState
from specplay.engine.pair import EnginePair
from specplay.engine.backends import RemoteSettings
from specplay.engine.base import EngineStartError

# Text both tokenizers must split alike: words, digits, punctuation, a multi-byte character.
TOKENIZER_PROBE = "Speculative decoding: 1234 tokens, verified in one pass — ¿sí?"


def remote_settings(baseline_url: str, speculative_url: str, preset=None, timeout_s: float = 60.0,
                    start_timeout_s: float = 600.0, api_key_env: str = "VLLM_API_KEY",
                    pids: dict | None = None, kv_bytes_per_token: dict | None = None
                    ) -> tuple[RemoteSettings, RemoteSettings]:
    """Both servers' settings; a malformed URL raises ValueError naming the side. `kv_bytes_per_token`: per
    role, its models' KV bytes a token (the memory plan's), so each server's reserved KV cache can be told in
    bytes (a server says how many tokens it reserved, not its models' shapes)."""
    token_ids_only = getattr(preset, "prompt_input", "text") == "token_ids"
    return tuple(RemoteSettings(role, url, api_key_env=api_key_env, timeout_s=timeout_s,
                                start_timeout_s=start_timeout_s, pids=tuple((pids or {}).get(role, ())),
                                token_ids_only=token_ids_only,
                                kv_bytes_per_token=(kv_bytes_per_token or {}).get(role))
                 for role, url in ((BASELINE, baseline_url), (SPECULATIVE, speculative_url)))


def open_remote_pair(baseline_url: str, speculative_url: str, preset=None, warmup: bool = True,
                     **settings) -> EnginePair:
    """An unstarted pair on the two servers (`.start()` waits for /health, checks them, warms them up)."""
    baseline, speculative = remote_settings(baseline_url, speculative_url, preset, **settings)
    return RemotePair(baseline, speculative, warmup=warmup, tag=preset)


class RemotePair(EnginePair):
    """An EnginePair whose start also checks that the two servers make a fair pair. A server that fails
    mid-run leaves its partner to finish the answer: they are separate processes, reloaded separately."""

    abort_partner_on_failure = False
    can_swap_speculative = False  # another k is another server: the bench lab measures what runs

    def start(self, progress=None) -> None:
        super().start(progress)
        try:
            check_partners(self.engines[BASELINE], self.engines[SPECULATIVE])
        except EngineStartError as exc:
            self.status.state, self.status.message = PairState.ERROR, str(exc)
            raise


def check_partners(baseline, speculative) -> None:
    """Raise EngineStartError when the servers can't be compared: other models, other tokenizers, or no
    speculation on the speculative side."""
    if baseline.model_root and speculative.model_root and baseline.model_root != speculative.model_root:
        raise EngineStartError(f"the servers serve different models (baseline {baseline.model!r}, speculative "
                               f"{speculative.model!r}): compare one target with and without speculation")
    if not speculative.has_spec_metrics:
        raise EngineStartError("the speculative server has no speculative config (its /metrics has no "
                               "vllm:spec_decode_* counters): start it with --speculative-config")
    if baseline.has_spec_metrics:
        raise EngineStartError("the baseline server drafts too (its /metrics has vllm:spec_decode_* counters): "
                               "start it without --speculative-config")
    if not getattr(baseline.settings, "token_ids_only", False):
        if baseline.tokenize_text(TOKENIZER_PROBE) != speculative.tokenize_text(TOKENIZER_PROBE):
            raise EngineStartError("the servers tokenize text differently: they don't run the same tokenizer")
