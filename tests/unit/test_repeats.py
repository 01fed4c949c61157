"""Repeated greedy runs (issue 45): when the session's history has the same preset, prompt and max tokens at
T=0 with another output, the page says vLLM's greedy output isn't guaranteed equal across runs, the likely
causes and how to turn them off; never for sampled runs or an unchanged output."""

from __future__ import annotations

from specplay.core.events import GenerationRequest
from specplay.page import charts, repeats
from specplay.page.live_run import LiveRun
from specplay.presets.catalog import get_preset
from specplay.run.result import RunResult
from tests.ui_fixtures import comparison_of, synthetic_events

PRESET = get_preset("smollm2-ngram")


def _row(number: int, prompt: str, output: list[int], temperature: float = 0.0) -> dict:
    """A finished run's history row as the page makes it (LiveRun.history_row), with this output."""
    live = LiveRun(PRESET, GenerationRequest(prompt=prompt, max_tokens=16, temperature=temperature), {})
    for event in synthetic_events(output, [[output[0]], output[1:]]):
        live.add(event)
    return live.history_row(number)


def test_a_greedy_prompt_whose_output_changed_between_runs_is_named():
    first = _row(1, "Rewrite this.", [5, 6, 7, 8])
    again = _row(2, "Rewrite this.", [5, 6, 9, 9])  # the issue's: from a later token on, another output
    note = repeats.repeat_note([first, again])
    assert note.startswith("Run 2's greedy output (T=0) differs from run 1's for the same prompt, preset and max tokens")
    assert "identical within each run" in note and "not guaranteed equal across runs" in note
    assert "prefix cache" in note and "CUDA graphs" in note and "batch's shape" in note
    assert "`enable_prefix_caching: false`" in note and "`enforce_eager: true`" in note
    assert 'id="repeat-note"' in repeats.repeat_html([first, again])
    # the digests stay out of the session's table and its CSV
    assert set(charts.history_table([first, again]).columns) == set(charts.HISTORY_COLUMNS)


def test_no_note_for_the_same_output_another_prompt_or_a_sampled_run():
    first = _row(1, "Rewrite this.", [5, 6, 7, 8])
    assert repeats.repeat_note([first, _row(2, "Rewrite this.", [5, 6, 7, 8])]) is None
    assert repeats.repeat_note([first, _row(2, "Something else.", [5, 6, 9, 9])]) is None
    assert repeats.repeat_note([first, _row(2, "Rewrite this.", [5, 6, 9, 9], temperature=0.8)]) is None
    assert repeats.repeat_note([]) is None and repeats.repeat_html([first]) == ""
    # a stopped run says nothing about what greedy decoding gives
    stopped = RunResult.of(comparison_of(synthetic_events([1, 2, 3], [[1], [2, 3]], cancelled=True)), PRESET,
                           request=GenerationRequest(prompt="Rewrite this.", max_tokens=16))
    assert stopped.stopped and repeats.repeat_keys(stopped, "Rewrite this.") == {}
