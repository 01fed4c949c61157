"""The page's escaped HTML: token highlighting, escaping, the badge (synthetic runs, no engines)."""

from __future__ import annotations




from specplay.page import views
from specplay.presets.verifiers import verifier_named
from specplay.core.events import BASELINE, SPECULATIVE
from tests.ui_fixtures import comparison_of, synthetic_events



# -- escaping ----------------------------------------------------------------------------------------------
def test_token_html_escapes_markup():
    pieces = ["<script>", "window.__pwned=1", "</script>", '<img src=x onerror="alert(1)">']
    html = views.speculative_tokens_html(pieces, [1, 3], k=4, divergence=None, stop_token=False)
    assert "<script>" not in html and "<img" not in html
    assert "&lt;script&gt;" in html and "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in html
    base = views.baseline_tokens_html(pieces, None, False)
    assert "<script>" not in base and "&lt;/script&gt;" in base


def test_badge_escapes_divergent_continuations_and_errors():
    events = synthetic_events([1, 2, 3, 4], [[1], [2, 9], [7]], k=2)
    c = comparison_of(events, k=2)
    pieces = {BASELINE: ["a", "b", "<script>", "d"], SPECULATIVE: ["a", "b", "<img onerror=x>", "e"]}
    html = views.badge_html(c, pieces)
    assert "Diverged at token 3" in html
    assert "<script>" not in html and "<img" not in html
    assert "&lt;script&gt;" in html and "&lt;img onerror=x&gt;" in html
    failed = comparison_of(synthetic_events([1], [[1]], error="boom <b>x</b>"))
    assert "&lt;b&gt;x&lt;/b&gt;" in views.badge_html(failed)


def test_error_and_status_escape():
    assert "&lt;script&gt;" in views.error_html("<script>")
    assert "<script>" not in views.status_html("error", "p", "<script>", 0, None, "CPU")
    assert views.error_html(None) == ""


# -- highlighting ------------------------------------------------------------------------------------------
def test_speculative_highlight_groups_tokens_by_step_with_accepted_colour():
    # steps: prefill [1], then 3 tokens (2 accepted), then 1 token (0 accepted), then 5 tokens (4 accepted)
    steps = [[1], [2, 3, 4], [5], [6, 7, 8, 9, 10]]
    html = views.speculative_tokens_html([f"t{i}" for i in range(10)], [len(s) for s in steps], k=4,
                                         divergence=None, stop_token=False)
    assert html.count('class="tok prefill start"') == 1
    assert html.count("step 1: accepted 2 of 4 drafted, 3 tokens") == 3
    assert html.count("step 2: accepted 0 of 4 drafted, 1 token\"") == 1
    assert html.count("step 3: accepted 4 of 4 drafted, 5 tokens") == 5
    assert html.count(f"background:{views.accepted_color(2, 4)}") == 3
    assert html.count(f"background:{views.accepted_color(4, 4)}") == 5
    assert html.count(f"background:{views.ZERO_COLOR}") == 1
    assert html.count(" start") == 4  # one rule per step


def test_accepted_colours_distinct_and_legend_lists_each_count():
    colours = [views.accepted_color(a, 5) for a in range(6)]
    assert len(set(colours)) == 6
    legend = views.legend_html(5)
    for a in range(6):
        assert f"{a} accepted" in legend and colours[a] in legend
    assert "prefill" in legend


def test_divergence_marks_tokens_from_divergence_on():
    html = views.baseline_tokens_html(["a", "b", "c", "d"], divergence=2, stop_token=False)
    assert html.count(" div") == 2
    assert html.index('title="token 3') < html.index("tok div") + 200


def test_token_pieces_keep_multibyte_characters_whole():
    # a byte-level tokenizer splitting "é" (2 bytes) over two tokens: the first alone decodes to U+FFFD
    table = {1: b"caf", 2: b"\xc3", 3: b"\xa9", 4: b" ok"}

    def decode(ids):
        return b"".join(table[i] for i in ids).decode("utf-8", errors="replace")

    tp = views.TokenPieces(decode)
    assert tp.update([1, 2]) == ["caf", "\ufffd"]  # pending, shown as is for now
    assert tp.update([1, 2, 3, 4]) == ["caf", "", "é", " ok"]
    assert "".join(tp.pieces) == "café ok"


def test_token_pieces_without_tokenizer_show_ids():
    assert views.TokenPieces(None).update([5, 17]) == ["5 ", "17 "]


# -- badge -------------------------------------------------------------------------------------------------
def test_badge_identical_diverged_stopped_running():
    same = comparison_of(synthetic_events([1, 2, 3], [[1], [2, 3]]))
    assert "Identical" in views.badge_html(same) and "3 tokens" in views.badge_html(same)
    diverged = comparison_of(synthetic_events([1, 2, 3], [[1], [2, 4]]))
    html = views.badge_html(diverged, {BASELINE: ["x", "y", "z"], SPECULATIVE: ["x", "y", "w"]})
    assert "Diverged at token 3" in html and views.WHY_T0 in html
    assert views.WHY_SAMPLED in views.badge_html(diverged, temperature=0.8)
    synthetic = verifier_named("synthetic")
    assert synthetic.why_different in views.badge_html(diverged, verifier=synthetic)
    stopped = comparison_of(synthetic_events([1, 2], [[1]], cancelled=True))
    assert "Stopped" in views.badge_html(stopped)
    live = comparison_of(synthetic_events([1, 2], [[1]])[:-1])
    assert "Streaming" in views.badge_html(live, max_tokens=9) and "/ 9" in views.badge_html(live, max_tokens=9)


def test_pane_stats_count_exact_steps_not_chunks():
    from tests.unit.test_run_figures import _merged_run

    c = _merged_run()  # the baseline's 9 tokens came in 5 chunks; the speculative 13 in 4 chunks, 5 steps
    assert views.stats_line(c, BASELINE).startswith("9 tokens · 9 steps")
    assert views.stats_line(c, SPECULATIVE).startswith("13 tokens · 5 steps")
