"""Repeated greedy runs: at temperature 0 both engines agree within a run (the verdict), but vLLM doesn't
promise one prompt the same greedy tokens from one run to the next. Seen on an H100 (issue 45,
smollm2-ngram-gpu): the first run's output, identical on both engines, differed from the next four runs'
(identical to each other) from token 11 on. The likely causes are kernels that sum in another order: the
prompt's prefill served from the prefix cache after the first run, another batch shape, CUDA graphs in
place of eager kernels; at a near-tie that flips a token. When the session's history has the same preset,
prompt and max tokens at T=0 with another output, the page says so under the explanation.

Each history row carries two digests for this (`repeat_keys`); the history table and CSV keep their
documented columns only (charts.HISTORY_COLUMNS), so neither shows them.
"""

from __future__ import annotations

import hashlib

from specplay.page.views import esc

PROMPT_KEY, OUTPUT_KEY = "_greedy_prompt", "_greedy_output"
CAUSES = ("vLLM's greedy output is not guaranteed equal across runs when the prompt's prefill comes from the "
          "prefix cache (after its first run), the batch's shape differs, or CUDA graphs replace eager kernels: "
          "sums in another order can flip a near-tie")
TURN_OFF = ("to rule them out, run with prefix caching off (vLLM's `enable_prefix_caching: false`, "
            "`--no-enable-prefix-caching` on a server) and without CUDA graphs (`enforce_eager: true` under the "
            "preset's target)")


def _digest(*parts) -> str:
    return hashlib.sha256("\x1f".join(map(str, parts)).encode()).hexdigest()[:16]


def repeat_keys(result, prompt: str) -> dict:
    """The digests a history row keeps for a finished greedy run (`result`: a RunResult with its request;
    `prompt`: the full prompt text or ids): {} for a sampled, stopped or failed run."""
    request = getattr(result, "request", None)
    if request is None or request.temperature != 0 or result.stopped or not result.baseline.token_ids:
        return {}
    return {PROMPT_KEY: _digest(result.preset, request.max_tokens, prompt),
            OUTPUT_KEY: _digest(*result.baseline.token_ids)}


def changed_from(history: list[dict]) -> dict | None:
    """The latest earlier row of the session's history with the last run's preset, prompt and max tokens
    at T=0 whose output differed; None when there is none."""
    if not history or not history[-1].get(PROMPT_KEY):
        return None
    last = history[-1]
    return next((row for row in reversed(history[:-1]) if row.get(PROMPT_KEY) == last[PROMPT_KEY]
                 and row.get(OUTPUT_KEY) != last[OUTPUT_KEY]), None)


def repeat_note(history: list[dict]) -> str | None:
    """The sentence for a greedy prompt whose output changed between runs of the same preset, or None."""
    earlier = changed_from(history)
    if earlier is None:
        return None
    last = history[-1]
    within = ("identical within each run (both engines agreed, so the verdict holds); "
              if last.get("identical") and earlier.get("identical") else "")
    return (f"Run {last['run']}'s greedy output (T=0) differs from run {earlier['run']}'s for the same prompt, "
            f"preset and max tokens: {within}{CAUSES}; {TURN_OFF}.")


def repeat_html(history: list[dict]) -> str:
    note = repeat_note(history)
    return f'<div class="repeat-note" id="repeat-note">{esc(note)}</div>' if note else ""
