"""Issue 41, 3: a draft with a tokenizer of its own (smollm2-hetero-draft: the bigram draft `prepare` builds, 1,152
tokens against SmolLM2's 49,152, through vLLM's use_heterogeneous_vocab) on the real CPU engines, through
`compare` and through the page: identical to the baseline at T=0, its drafts counted and some accepted. The
session's pair swaps in only the speculative engine (the target is the other smollm2 presets'), and the page
is served on that same pair: no engines of its own."""

from __future__ import annotations

import json

import pytest

from specplay.core.events import SPECULATIVE
from tests.checks import check_draft_model_statistics
from tests.prompts import PROMPTS

PRESET, K, MAX_TOKENS = "smollm2-hetero-draft", 3, 48
PROMPT = PROMPTS["code-edit"]  # the bigram table guesses " the", " of", "." ... often enough in its answer


class Borrowed:
    """The session's pair as a page's factory gives it: already started, and still the pool's after the page."""

    def __init__(self, pair):
        self._pair = pair

    def __getattr__(self, name):
        return getattr(self._pair, name)

    def start(self, progress=None):
        pass

    def shutdown(self):
        pass


def _check(result: dict) -> dict:
    assert result["identical"] and result["first_divergence"] is None, result.get("divergence_context")
    assert result["baseline"]["token_ids"] == result["speculative"]["token_ids"]
    check_draft_model_statistics(result, K, MAX_TOKENS)  # drafts every step, and 0 < acceptance < 1
    spec = result["speculative"]
    assert spec["num_draft_tokens"] == K * spec["num_drafts"] > 0 and spec["num_accepted"] > 0
    return spec


@pytest.mark.order(1)
def test_compare_runs_a_draft_of_another_vocabulary_identical_at_t0(hetero_pair, capsys):
    from specplay.cli.main import main

    engine = hetero_pair.engines[SPECULATIVE].settings.engine_args["speculative_config"]
    assert engine["use_heterogeneous_vocab"] is True and engine["model"].endswith("bigram-draft-1k")
    assert main(["compare", "--preset", PRESET, "--max-tokens", str(MAX_TOKENS), "--prompt", PROMPT,
                 "--schedule", "sequential", "--json"], pair=hetero_pair) == 0
    spec = _check(json.loads(capsys.readouterr().out))
    print(f"\nsmollm2-hetero-draft compare: {spec['num_accepted']}/{spec['num_draft_tokens']} drafted tokens accepted "
          f"({spec['acceptance_rate']:.1%}), per position {spec['accepted_per_position']}")


@pytest.mark.order(2)
def test_the_page_runs_it_on_the_same_engines(hetero_pair, tmp_path, monkeypatch):
    """The real page (ui.build_page, served by Gradio) on the session's pair: its /run gives the same run, and
    its summary table shows the acceptance rate."""
    from gradio_client import Client

    from specplay.hosting import closing
    from specplay.hosting.manager import PairManager
    from specplay.page import ui
    from specplay.page.live_run import API_OUTPUTS
    from specplay.presets.catalog import get_preset
    from tests.public_page_fixtures import _wait
    from tests.ui_fixtures import free_port

    monkeypatch.setattr(ui, "PAGE_DIR", tmp_path / "page")
    borrow = lambda preset, hardware, log=print: Borrowed(hetero_pair)  # noqa: E731
    manager = PairManager({PRESET: get_preset(PRESET)}, PRESET, pair_factory=borrow, log=lambda *a: None)
    manager.load(PRESET)
    assert _wait(lambda: manager.status().state == "ready", 30), manager.status()
    demo = ui.build_page(manager)
    ui.launch(demo, "127.0.0.1", free_port(), block=False)
    try:
        client = Client(demo.local_url, verbose=False)
        out = dict(zip(API_OUTPUTS, client.predict(PROMPT, MAX_TOKENS, 0.0, "sequential", api_name="/run")))
        client.close()
    finally:
        closing.close(demo)
        manager.shutdown()
    assert out["error"] == "" and "Identical" in out["badge"]
    spec = _check(out["result"])
    rows = {row[0]: row[1:] for row in out["summary"]["data"]}
    assert rows["acceptance rate"][1] == f"{spec['acceptance_rate']:.1%}"
    assert out["result"]["preset"] == PRESET and hetero_pair.ready  # the pool's pair, still loaded
