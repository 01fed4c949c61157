"""One prompt through a preset's pair to a RunResult: the flow `specplay compare` and the measurement scripts
share. Given a started pair it runs on that one and leaves it running; else it opens one, starts it, and shuts
it down after, whatever happened."""

from __future__ import annotations

from typing import Callable

from specplay.core.events import DEFAULT_SCHEDULE, GenerationRequest
from specplay.run import stream
from specplay.run.result import RunResult


class PairStartError(Exception):
    """The pair did not start (vLLM refused the config, a model is missing, ...): the cause is `__cause__`."""


def compare_prompt(preset, request: GenerationRequest, schedule: str = DEFAULT_SCHEDULE, pair=None,
                   opener: Callable | None = None, log: Callable = print, hardware=None,
                   step_floor_s: float | None = None, draft_steps: bool = False) -> RunResult:
    """`request` through both engines of `pair` (started, running `preset`) or of a pair `opener()` returns
    (default: the preset's in-process engines), started here with its progress on `log`. Raises
    PairStartError if that pair fails to start, PromptError (from the pair) if the prompt is unusable.
    `draft_steps`: then the draft model alone replays each step's drafts (run.draft_steps), once the pair
    is shut down (where it was started here)."""
    own, prompt_ids = pair is None, None
    if own:
        if opener is None:
            from specplay.run.pairs import open_pair

            pair = open_pair(preset, hardware, log=log)
        else:
            pair = opener()
    try:
        if own:
            try:
                pair.start(progress=lambda msg, frac: log(f"[{frac:4.0%}] {msg}"))
            except Exception as exc:
                raise PairStartError(str(exc)) from exc
        result = result_on(pair, preset, request, schedule, hardware, step_floor_s)
        prompt_ids = pair.prompt_token_ids(request) if draft_steps else None
    finally:
        if own:
            pair.shutdown()
    if prompt_ids is None or result.stopped:
        return result
    from specplay.run.draft_steps import why_not, with_draft_steps

    why = why_not(preset, request.temperature)
    if why:
        log(f"--draft-steps: not replayed: {why}")
        return result
    log("replaying the draft model's drafts (one more engine start) ...")
    try:
        return with_draft_steps(result, prompt_ids, preset, hardware)
    except Exception as exc:  # the draft didn't start or took too long: the run itself stands, without them
        log(f"--draft-steps: not replayed: {type(exc).__name__}: {exc}")
        return result


def result_on(pair, preset, request: GenerationRequest, schedule: str = DEFAULT_SCHEDULE, hardware=None,
              step_floor_s: float | None = None) -> RunResult:
    """One run on a started pair, typed with what the pair and the machine say (engines, load times, device)."""
    if hardware is None:
        from specplay.core.hardware import detect

        hardware = detect()
    comparison = stream.compare(pair, request, schedule, num_speculative_tokens=preset.num_speculative_tokens)
    return RunResult.of(comparison, preset, device=hardware.device, engines=pair.engine_info(),
                        load_seconds=pair.status.load_seconds or {}, step_floor_s=step_floor_s)
