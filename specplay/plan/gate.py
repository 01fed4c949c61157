"""The one gate every door goes through before an engine loads: "can this pair run here?". Each CLI command
(cli/base.py's `gated_preset`), app.py (its preset file, ad-hoc pair or --preset: hosting/options.py),
`specplay launch` and the page's preset switch (hosting/manager.py) ask it, and get the same answer:

- availability: the installed vLLM runs the method, the packages and the device are here (presets.availability;
  the preset's keys against the installed vLLM's SpeculativeConfig were checked when it was validated);
- config.json sanity: the target's and a draft model's config.json are JSON objects of bounded size and depth
  whose shape fields are positive integers (a list, `text_config: 5`, a rope factor of 1e309 or
  `max_position_embeddings: true` is refused here, not in vLLM minutes later);
- the pair itself: a draft model's vocabulary is the target's, max_model_len fits both (plan.pair_check).

A refusal is a PairRefused (a PresetError: every door already turns those into one line and exit 2)."""

from __future__ import annotations

from specplay.plan.pair_check import PairCheck, check_pair
from specplay.presets.schema import PresetError


class PairRefused(PresetError):
    """The pair can't run as given; the message is one sentence (naming both numbers for a mismatch)."""


def gate(preset, hardware=None, here: bool = True, remote: bool = False) -> PairCheck:
    """The pair's check (what was compared, what couldn't be), or PairRefused. `here`: the pair is to run on
    this machine (False for `plan` and `serve-cmd`, which describe it for any machine); `remote`: servers run
    it, already checked by their own vLLM, so only the preset itself is checked."""
    if here and not remote:
        from specplay.presets.availability import availability

        where = availability(preset, hardware)
        if not where.runnable:
            raise PairRefused(f"{preset.name} can't run here: {where.reason}")
    if remote:
        return PairCheck(None)
    pair = check_pair(preset)
    if pair.mismatch:
        raise PairRefused(pair.mismatch)
    return pair
