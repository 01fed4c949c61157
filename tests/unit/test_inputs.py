"""The page's inputs checked, and model output shown as text."""

from __future__ import annotations


import pytest


from specplay.core.events import BASELINE, SPECULATIVE
from specplay.presets.catalog import get_preset
from tests.ui_fixtures import FakeEngine, synthetic_events



# -- inputs ------------------------------------------------------------------------------------------------
def test_build_request_validates():
    from specplay.page.inputs import InputError, build_request

    text = get_preset("smollm2-ngram")
    assert build_request(text, "hi", 16, 0.5).max_tokens == 16
    for bad, message in [(("", 16, 0), "empty"), (("hi", 0, 0), "Max tokens"), (("hi", 5000, 0), "1 to 1024"),
                         (("hi", 16, 2.5), "Temperature"), (("hi", 1.5, 0), "whole number"),
                         (("x" * 30000, 16, 0), "characters"), (("hi", float("inf"), 0), "1 to 1024"),
                         (("hi", float("nan"), 0), "1 to 1024"), (("hi", 16, float("nan")), "Temperature")]:
        with pytest.raises(InputError, match=message):
            build_request(text, *bad)
    ids = get_preset("dummy-llama8b-eagle-k3")
    assert build_request(ids, "1, 2 3", 8, 0).prompt_token_ids == (1, 2, 3)
    with pytest.raises(InputError, match="token ids"):
        build_request(ids, "hello", 8, 0)
    with pytest.raises(InputError, match="outside the vocabulary"):
        build_request(ids, "999999999", 8, 0)


def test_live_run_renders_xss_output_as_text():
    from specplay.core.events import GenerationRequest
    from specplay.page.live_run import API_OUTPUTS, LiveRun

    preset = get_preset("smollm2-ngram")
    vocab = {1: "<script>window.__pwned=1</script>", 2: "<img src=x onerror=alert(1)>", 3: " ok"}
    engine = FakeEngine(vocab)
    live = LiveRun(preset, GenerationRequest(prompt="p", max_tokens=3), {BASELINE: engine.decode,
                                                                          SPECULATIVE: engine.decode})
    for e in synthetic_events([1, 2, 3], [[1], [2, 3]]):
        live.add(e)
    final = live.final()
    # every output of the run route, by name (the exports come with the run, added by the page: finished_run.exports;
    # the page empties the link box)
    assert set(final) == set(API_OUTPUTS) - {"result_file", "summary_md", "share_link"}
    for name in ("pane_b", "pane_s", "badge", "explain"):
        assert "<script" not in final[name] and "<img" not in final[name]
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in final["pane_s"]
    assert "Identical" in final["badge"]
