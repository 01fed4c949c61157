"""Stream an engine pair's run into a Comparison: the one loop the CLI, the page, the scripts and the engine
tests share. `events()` yields each event once the Comparison has it (the page redraws between events);
`compare()` runs to the end and returns the Comparison."""

from __future__ import annotations

import threading
from typing import Callable, Iterator

from specplay.core.events import BASELINE, DEFAULT_SCHEDULE, GenerationRequest, RunFinished
from specplay.run.comparison import Comparison


def new_comparison(pair, num_speculative_tokens: int | None = None, decode=None) -> Comparison:
    """An empty Comparison for a run on `pair`, decoding with its baseline's tokenizer unless told otherwise."""
    if decode is None:
        engine = pair.engines.get(BASELINE)
        decode = getattr(engine, "decode", None)
    return Comparison(decode=decode, num_speculative_tokens=num_speculative_tokens)


def events(pair, request: GenerationRequest, schedule: str = DEFAULT_SCHEDULE, comparison: Comparison | None = None,
           cancel: threading.Event | None = None) -> Iterator:
    """Run `request` on `pair`, add each event to `comparison`, then yield it; ends after RunFinished.
    Raises PromptError (from the pair) before anything runs if the prompt is unusable."""
    comparison = comparison if comparison is not None else new_comparison(pair)
    for event in pair.stream(request, schedule=schedule, cancel=cancel):
        comparison.add(event)
        yield event
        if isinstance(event, RunFinished):
            return


def compare(pair, request: GenerationRequest, schedule: str = DEFAULT_SCHEDULE,
            cancel: threading.Event | None = None, on_event: Callable | None = None,
            comparison: Comparison | None = None, num_speculative_tokens: int | None = None) -> Comparison:
    """One run of `request` through both engines, to the end; `on_event(event, comparison)` after each event."""
    comparison = comparison if comparison is not None else new_comparison(pair, num_speculative_tokens)
    for event in events(pair, request, schedule, comparison, cancel):
        if on_event is not None:
            on_event(event, comparison)
    return comparison
