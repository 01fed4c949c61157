"""HTML fragments of the page: the two output panes with per-step highlighting, the legend, the identity
badge, status and error boxes. Pure string building (no Gradio), so it is tested directly.

Everything that comes from a model or a user passes through html.escape: output is text, never markup.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Callable

from specplay.run.comparison import Comparison, divergence_candidates
from specplay.core.events import BASELINE, ENGINE_DELTA, PER_REQUEST, SPECULATIVE
from specplay.page.css import CSS  # noqa: F401  (the page's stylesheet: ui.py passes views.CSS)
from specplay.hosting.settings import scrub
from specplay.presets.verifiers import Verifier, verifier_named

PREFILL_COLOR = "#c7d2fe"
ZERO_COLOR = "#e5e7eb"  # a step that accepted nothing: only the target's own token
_LOW, _HIGH = (0xFE, 0xF0, 0x8A), (0x34, 0xD3, 0x99)  # 1 accepted (amber) .. k accepted (green)

Decode = Callable[[list[int]], str]


def esc(text: str) -> str:
    return html.escape(text, quote=True)


def esc_message(text: str) -> str:
    """An error or status message from the server: escaped, and without server paths."""
    return esc(scrub(text))


def accepted_color(accepted: int, k: int) -> str:
    """Background for a step that accepted `accepted` of `k` drafted tokens."""
    if accepted <= 0:
        return ZERO_COLOR
    f = 0.0 if k <= 1 else min(accepted - 1, k - 1) / (k - 1)
    r, g, b = (round(lo + (hi - lo) * f) for lo, hi in zip(_LOW, _HIGH))
    return f"#{r:02x}{g:02x}{b:02x}"


# -- token text --------------------------------------------------------------------------------------------
MAX_PENDING_TOKENS = 8  # a UTF-8 character is at most 4 bytes, a byte-level token at least one


@dataclass
class TokenPieces:
    """Each output token's text, decoded incrementally so multi-byte characters split over several tokens
    come out whole (the pending bytes are shown with the token that completes them). Without a tokenizer
    (dummy-weight presets) each token shows as its id."""

    decode: Decode | None
    pieces: list[str] = field(default_factory=list)
    _done: int = 0  # tokens whose text is final

    def update(self, ids: list[int]) -> list[str]:
        if self.decode is None:
            self.pieces = [f"{t} " for t in ids]
            return self.pieces
        if len(ids) <= self._done:  # a prefix of what was decoded already (a replay): no decoding
            return self.pieces[:len(ids)]
        del self.pieces[self._done:]
        start = self._done
        for i in range(self._done, len(ids)):
            context = max(0, start - 4)  # a few tokens before: byte-level BPE spacing depends on them
            before = self.decode(ids[context:start])
            after = self.decode(ids[context:i + 1])
            # incomplete character: wait for the next token, but no longer than a character can take (else
            # a run of ids that never completes one, which no real output has, decodes in quadratic time)
            if after.endswith("\ufffd") and i < len(ids) - 1 and i - start < MAX_PENDING_TOKENS:
                self.pieces.append("")
                continue
            self.pieces.append(after[len(before):] if after.startswith(before) else after)
            start = i + 1
            if not after.endswith("\ufffd"):
                self._done = i + 1
        return self.pieces


# -- panes ---------------------------------------------------------------------------------------------
def _tokens_html(pieces: list[str], titles: list[str], styles: list[str], classes: list[str]) -> str:
    parts = []
    for piece, title, style, cls in zip(pieces, titles, styles, classes):
        style_attr = f' style="{style}"' if style else ""
        parts.append(f'<span class="{cls}" title="{esc(title)}"{style_attr}>{esc(piece)}</span>')
    return "".join(parts)


def baseline_tokens_html(pieces: list[str], divergence: int | None, stop_token: bool) -> str:
    n = len(pieces)
    titles = [f"token {i + 1} (one step each)" for i in range(n)]
    classes = ["tok" + (" div" if divergence is not None and i >= divergence else "") for i in range(n)]
    if stop_token and n:
        classes[-1] += " eos"
        titles[-1] = f"token {n}: end of sequence"
    return _tokens_html(pieces, titles, [""] * n, classes)


def speculative_tokens_html(pieces: list[str], step_sizes: list[int], k: int, divergence: int | None,
                            stop_token: bool) -> str:
    """Each step's tokens share a background whose colour is how many drafted tokens that step accepted
    (step size - 1); step 0 is prefill. A left rule marks where each step starts."""
    titles, styles, classes = [], [], []
    index = 0
    for step, size in enumerate(step_sizes):
        accepted = size - 1
        for j in range(size):
            if step == 0:
                title, color, cls = "step 0: prefill (the first token comes from the prompt pass)", PREFILL_COLOR, "tok prefill"
            else:
                title = f"step {step}: accepted {accepted} of {k} drafted, {size} token{'s' if size > 1 else ''}"
                color, cls = accepted_color(accepted, k), "tok"
            if j == 0:
                cls += " start"
            if divergence is not None and index >= divergence:
                cls += " div"
            titles.append(title)
            styles.append(f"background:{color}")
            classes.append(cls)
            index += 1
    n = min(len(pieces), index)
    if stop_token and n:
        classes[n - 1] += " eos"
        titles[n - 1] += "; end of sequence"
    return _tokens_html(pieces[:n], titles[:n], styles[:n], classes[:n])


def waiting_html(text: str) -> str:
    return f'<span class="waiting">{esc(text)}</span>'


def pane_html(role: str, title: str, subtitle: str, body: str, stats: str = "") -> str:
    """The pane ends with its newest token and leaves its tags open (the browser closes them), so while a side
    streams each frame is the last one plus new tokens: Gradio sends it as an append of a few kB, not the
    whole pane (~100 kB at 900 tokens). `stats` changes every frame, so a side shows it once it's finished."""
    return (f'<div class="pane pane-{role}"><div class="pane-head"><span class="pane-title">{esc(title)}</span>'
            f'<span class="pane-sub">{esc(subtitle)}</span><span class="pane-stats">{esc(stats)}</span></div>'
            f'<div class="pane-body" id="pane-{role}"><div class="pane-text">{body}')


def legend_html(k: int) -> str:
    chips = [f'<span class="chip prefill" style="background:{PREFILL_COLOR}">prefill</span>']
    for accepted in range(k + 1):
        label = f"{accepted} accepted" + (" (target token only)" if accepted == 0 else "")
        chips.append(f'<span class="chip" style="background:{accepted_color(accepted, k)}">{esc(label)}</span>')
    return ('<div class="legend"><span class="legend-title">Speculative pane: colour = drafted tokens a '
            'verification step accepted (hover a token for its step)</span>' + "".join(chips) + "</div>")


def stats_line(comparison: Comparison, role: str) -> str:
    trace = comparison.traces[role]
    rate = trace.tokens_per_s
    text = f"{len(trace.token_ids)} tokens · {trace.steps} steps"
    return text + (f" · {rate:.1f} tok/s" if rate else "")


# -- badge -----------------------------------------------------------------------------------------------
WHY_T0 = ("Why: the speculative engine verifies k+1 tokens in one forward pass where the baseline computes "
          "one, and the floating-point differences between those two passes can flip a near-tie between "
          "two tokens; from there the outputs go separate ways.")
WHY_SAMPLED = ("Why: at a temperature above 0 both engines sample, and speculative decoding consumes random "
               "numbers differently (rejection sampling), so different outputs are expected by design; only "
               "the distribution of outputs is the same.")


def _one_line(text: str) -> str:
    return esc(text.replace("\n", "↵ "))


def _context(pieces: list[str], start: int, end: int) -> str:
    return _one_line("".join(pieces[start:end])) or "<em>(end of output)</em>"


def badge_html(comparison: Comparison | None, pieces: dict[str, list[str]] | None = None,
               temperature: float = 0.0, verifier: Verifier | None = None, max_tokens: int | None = None,
               phase: str = "live", note: str = "") -> str:
    """The identity verdict. Before a run: a hint; while streaming or replaying (`phase`): progress; when both finished:
    identical, or where they diverged with both continuations and why that happens (`verifier`: the preset's,
    presets.verifiers; a lossy or synthetic one differs by design)."""
    if comparison is None:
        return '<div class="badge idle">Run a prompt: both engines answer it, and the panes race.</div>'
    b, s = comparison.baseline, comparison.speculative
    finished = comparison.finished
    if finished is None:
        total = f" / {max_tokens}" if max_tokens else ""
        doing = {"replay": "Replaying both runs on one clock, each at the speed it had alone…",
                 "sequential": "Streaming… baseline first, then speculative, each alone on the device:"}.get(
            phase, "Streaming…")
        return (f'<div class="badge running">{doing}{esc(note)} baseline {len(b.token_ids)}{total} · speculative '
                f'{len(s.token_ids)}{total} tokens</div>')
    if finished.error:
        return f'<div class="badge error">Run failed: {esc_message(finished.error)}</div>'
    index = comparison.first_divergence
    if finished.cancelled:
        if not b.token_ids or not s.token_ids:  # a sequential run stopped before the speculative engine's turn
            same = "nothing to compare yet"
        else:
            same = ("identical so far" if index is None or index >= min(len(b.token_ids), len(s.token_ids))
                    else f"diverged at token {index + 1}")
        return (f'<div class="badge stopped">Stopped: partial outputs ({len(b.token_ids)} and '
                f'{len(s.token_ids)} tokens), {same}.</div>')
    if index is None:
        return (f'<div class="badge identical"><span class="verdict">✓ Identical</span> both engines produced '
                f'the same {len(b.token_ids)} tokens.</div>')
    pieces = pieces or {}
    pb, ps = pieces.get(BASELINE, []), pieces.get(SPECULATIVE, [])
    verifier = verifier or verifier_named(None)
    why = verifier.why_different or (WHY_SAMPLED if temperature > 0 else WHY_T0)
    common = _one_line("".join(pb[max(0, index - 8):index]))
    return (f'<div class="badge diverged"><span class="verdict">≠ Diverged at token {index + 1}</span> '
            f'(the first {index} tokens are identical)'
            f'<div class="ctx"><div><b>baseline:</b> …{common}<mark class="div-b">{_context(pb, index, index + 12)}</mark></div>'
            f'<div><b>speculative:</b> …{common}<mark class="div-s">{_context(ps, index, index + 12)}</mark></div></div>'
            f'<div class="why">{esc(why)}</div>'
            # synthetic acceptance emits drafts whatever the model rates them: no near-tie to tell apart
            f'{candidates_html(divergence_candidates(b, s, index)) if verifier.reads_target else ""}</div>')


NEAR_TIE_NATS = 0.5  # the two sides' picks within this of each other in the baseline's own log-probabilities


def _tie_note(candidates: dict) -> str:
    """One sentence: whether the speculative engine's pick was a near-tie in the baseline's eyes."""
    base, spec = candidates.get(BASELINE) or [], candidates.get(SPECULATIVE) or []
    if not base or not spec:
        return ""
    rated = dict((text, lp) for text, lp in base)
    pick = spec[0][0]
    if pick not in rated:
        return (f"The speculative engine's top token {pick!r} is not among the baseline's top {len(base)}: more "
                "than a rounding tie, worth a look.")
    gap = base[0][1] - rated[pick]
    if gap <= NEAR_TIE_NATS:
        return (f"A near-tie: the baseline rates {pick!r} only {gap:.2f} nats below its own pick, within what "
                "bf16 rounding or sampling moves.")
    return f"The baseline rates {pick!r} {gap:.2f} nats below its own pick: a clear preference, not a tie."


def candidates_html(candidates: dict | None) -> str:
    """The top candidates and their log-probabilities on both sides at the first divergence (a table)."""
    if not candidates:
        return ""
    base, spec = candidates.get(BASELINE) or [], candidates.get(SPECULATIVE) or []
    rows = []
    for i in range(max(len(base), len(spec))):
        cells = []
        for side in (base, spec):
            text, lp = side[i] if i < len(side) else ("", None)
            cells.append(f"<td><code>{esc(repr(text)[1:-1])}</code></td><td>{'' if lp is None else f'{lp:.3f}'}</td>")
        rows.append(f"<tr><td>{i + 1}</td>{''.join(cells)}</tr>")
    return ('<div class="cands"><table><thead><tr><th>#</th><th>baseline token</th><th>logprob</th>'
            f'<th>speculative token</th><th>logprob</th></tr></thead><tbody>{"".join(rows)}</tbody></table>'
            f'<div class="tie">{esc(_tie_note(candidates))}</div></div>')


# -- why: the speedup's two factors -------------------------------------------------------------------
def _factor_card(label: str, raw: float | None, note: str, good: bool | None, scale_max: float) -> str:
    value = "—" if raw is None else f"{raw:.2f}×"
    cls = "" if good is None else " good" if good else " bad"
    bar = ""
    if raw is not None:
        width = max(2.0, min(100.0, raw / scale_max * 100))
        one = 100.0 / scale_max
        bar = (f'<div class="f-bar"><span style="width:{width:.1f}%"></span>'
               f'<i style="left:{one:.1f}%" title="1× (no change)"></i></div>')
    return (f'<div class="factor{cls}"><div class="f-label">{esc(label)}</div><div class="f-value">{value}</div>'
            f'{bar}<div class="f-note">{esc(note)}</div></div>')


# acceptance_source -> (chip text, tooltip)
ACCEPTANCE_SOURCES = {
    PER_REQUEST: ("this request's own (vLLM per-request metrics)",
                  "exact whatever else the engine runs"),
    ENGINE_DELTA: ("engine counters over the run",
                   "no per-request metrics for this run (vLLM < 0.29, or the run was stopped): exact while "
                   "the run has the engine to itself"),
}


def explain_html(result, expectation: str | None = None) -> str:
    """speedup = tokens-per-step ratio ÷ step-time ratio, as three cards with bars against 1×, which engine
    got async scheduling, where the acceptance counters came from, and the sentence that says which factor
    decides (`result`: a RunResult, or None before a run)."""
    if result is None or result.speedup is None:
        return ('<div class="explain idle">After a run: the speedup split into what acceptance buys '
                '(tokens per step) and what a speculative step costs (step time).</div>')
    gain, cost, speedup = result.tokens_per_step_ratio, result.step_cost_ratio, result.speedup
    top = max(2.0, *(v for v in (gain, cost, speedup) if v)) * 1.1
    cards = (_factor_card("tokens per step", gain, "speculative ÷ baseline: what acceptance buys",
                          None if gain is None else gain > 1.0, top)
             + '<div class="op">÷</div>'
             + _factor_card("step time", cost, "speculative ÷ baseline: what a step costs",
                            None if cost is None else cost <= 1.0, top)
             + '<div class="op">=</div>'
             + _factor_card("speedup", speedup, "decode tokens/s, speculative ÷ baseline", speedup >= 1.0, top))
    chips = []
    for role, label in ((BASELINE, "baseline"), (SPECULATIVE, "speculative")):
        flag = result.async_scheduling(role)
        state = "unknown" if flag is None else "on" if flag else "off"
        runner = {"v1": ", V1 model runner", "v2": ", Model Runner V2"}.get(result.model_runner(role), "")
        chips.append(f'<span class="chip async-{state}">{label}: async scheduling {state}{runner}</span>')
    source = ACCEPTANCE_SOURCES.get(result.acceptance_source)
    if source:
        chips.append(f'<span class="chip source" title="{esc(source[1])}">acceptance: {esc(source[0])}</span>')
    out = (f'<div class="explain"><div class="factors">{cards}</div>'
           f'<div class="async">{"".join(chips)}</div>')
    if result.explanation:
        out += f'<div class="why-sentence">{esc(result.explanation)}</div>'
    if expectation:
        out += f'<div class="expectation">{esc(expectation)}</div>'
    return out + "</div>"


def explain_html_pooled(explain: str, pooled, done: int, total: int) -> str:
    """A series' explanation ("Run 3×"): the last run's, under the pooled speedup of its finished runs
    (run.noise.Pooled: their steps summed, one 95% interval over all of them) and the single runs' spread."""
    if pooled is None:
        return explain
    interval, spread = pooled.speedup_interval, pooled.single_run_spread
    interval_text = f", 95% interval {interval}" if interval else ""
    verdict = " It holds 1×: within noise even over these runs." if pooled.within_noise else ""
    spread_text = f" Single runs measured {spread.low:.2f}× to {spread.high:.2f}×." if spread else ""
    return (f'<div class="pooled" id="pooled">Over {done} of {total} runs, pooled: speedup '
            f'<b>{pooled.speedup:.2f}×</b>{interval_text} ({pooled.tokens_per_step_ratio:.2f}× the tokens per step '
            f'at {pooled.step_cost_ratio:.2f}× the step time).{verdict}{spread_text} The last run:</div>{explain}')


# -- status and errors -------------------------------------------------------------------------------------
def status_html(state: str, preset: str, message: str, progress: float, elapsed_s: float | None,
                hardware: str) -> str:
    name = esc(preset)
    if state == "ready":
        return f'<div class="status ready">● Ready: <b>{name}</b> on {esc(hardware)}</div>'
    if state == "loading":
        pct = max(0, min(100, round(progress * 100)))
        took = f" · {elapsed_s:.0f} s" if elapsed_s is not None else ""
        return (f'<div class="status loading">Loading <b>{name}</b>: {esc(message)}{took} '
                f'<progress max="100" value="{pct}"></progress> {pct}% · Run is disabled until both engines '
                f'are ready (about a minute on a CPU).</div>')
    if state == "error":
        return f'<div class="status error">✗ Preset <b>{name}</b> failed to load: {esc_message(message)}</div>'
    return f'<div class="status idle">{esc(message) or "No engines loaded."}</div>'


def recorded_html(label: str | None) -> str:
    """A recording's provenance over what it shows (page/recordings_view.py): never passing as a live run."""
    return f'<div class="recorded" role="note">{esc(label)}</div>' if label else ""


def error_html(message: str | None) -> str:
    return f'<div class="page-error" role="alert">⚠ {esc_message(message)}</div>' if message else ""
