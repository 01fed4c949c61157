"""The playground page (Gradio Blocks): prompt and controls, the two streaming panes, identity badge, live
charts, summary and history tables, the preset's `vllm serve` lines. The only module that imports Gradio.

A run is a generator over pair.stream(): events go into a Comparison as they arrive, and the page is
redrawn at most UPDATE_HZ times a second, so rendering never falls behind (or slows) the engines.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

import gradio as gr

from playground import charts, views
from playground.comparison import Comparison
from playground.engine import PromptError
from playground.events import BASELINE, SPECULATIVE, GenerationRequest, RunFinished, StepEvent
from playground.pair_manager import PairManager, PresetNotAllowed
from playground.presets import Preset, resolve_model, serve_commands

UPDATE_HZ = 4.0
MAX_PROMPT_CHARS = 20_000
TEMPERATURE_MAX = 2.0

EXAMPLES = {
    "code": ("Rename the variable `total` to `running_sum` in this Python function and return the whole "
             "function:\n\ndef average(values):\n    total = 0\n    for value in values:\n        total += value\n"
             "    return total / len(values)\n"),
    "rewrite": ("Rewrite this paragraph in the passive voice, keeping every detail:\n\nThe committee approved "
                "the new budget on Monday. The mayor signed the order the next day, and the city council "
                "published the full text on its website."),
    "chat": "What are three simple tips for staying focused while studying?",
    "creative": "Write a short poem about a lighthouse keeper who talks to the sea.",
}
# Dummy-weight presets take token ids; a repeating pattern gives n-gram style drafts something to match.
TOKEN_EXAMPLES = {
    "code": "1000, 1001, 1002, 1003, 1000, 1001, 1002, 1003",
    "rewrite": ", ".join(str(1200 + i % 16) for i in range(48)),
    "chat": "128000, 9906, 11, 1268, 527, 499, 3432, 30",
    "creative": " ".join(str(5000 + 7 * i) for i in range(24)),
}


class InputError(ValueError):
    """A bad input from the page; the message is shown as is."""


# -- inputs ------------------------------------------------------------------------------------------------
def max_tokens_limit(preset: Preset) -> int:
    return max(1, preset.target["max_model_len"] // 2)


def _vocab_size(preset: Preset) -> int | None:
    try:
        with open(os.path.join(resolve_model(preset.target["model"]), "config.json")) as f:
            config = json.load(f)
        return int(config["vocab_size"])
    except Exception:  # a hub model we haven't downloaded: the engine checks the ids
        return None


def parse_token_ids(text: str, vocab_size: int | None) -> tuple[int, ...]:
    parts = [p for p in text.replace(",", " ").split() if p]
    if not parts:
        raise InputError("The prompt is empty: this preset takes token ids, e.g. 1000, 1001, 1002.")
    ids = []
    for p in parts:
        if not p.isdigit():
            raise InputError(f"This preset has no tokenizer: give the prompt as token ids separated by commas "
                             f"or spaces ({p[:20]!r} is not a non-negative integer).")
        ids.append(int(p))
    if vocab_size and max(ids) >= vocab_size:
        raise InputError(f"Token id {max(ids)} is outside the vocabulary (0 to {vocab_size - 1}).")
    return tuple(ids)


def build_request(preset: Preset, prompt: str, max_tokens, temperature) -> GenerationRequest:
    """Validate the page's inputs for this preset; raises InputError with a message for people."""
    limit = max_tokens_limit(preset)
    try:
        max_tokens_value = float(max_tokens)
    except (TypeError, ValueError):
        raise InputError("Max tokens must be a whole number.") from None
    if not 1 <= max_tokens_value <= limit or max_tokens_value != int(max_tokens_value):  # range first: inf, nan
        raise InputError(f"Max tokens must be a whole number from 1 to {limit} for this preset.")
    try:
        temperature = float(temperature)
    except (TypeError, ValueError):
        raise InputError("Temperature must be a number.") from None
    if not 0.0 <= temperature <= TEMPERATURE_MAX:
        raise InputError(f"Temperature must be between 0 and {TEMPERATURE_MAX:g}.")
    prompt = prompt or ""
    if len(prompt) > MAX_PROMPT_CHARS:
        raise InputError(f"The prompt is {len(prompt):,} characters; the page accepts up to {MAX_PROMPT_CHARS:,}.")
    common = {"max_tokens": int(max_tokens_value), "temperature": temperature, "ignore_eos": preset.ignore_eos}
    if preset.prompt_input == "token_ids":
        return GenerationRequest(prompt_token_ids=parse_token_ids(prompt, _vocab_size(preset)), **common)
    if not prompt.strip():
        raise InputError("The prompt is empty: type something for both engines to answer.")
    return GenerationRequest(prompt=prompt, **common)


# -- one run, rendered -----------------------------------------------------------------------------------
@dataclass
class LiveRun:
    """A run in progress: its Comparison, per-token text for both panes, acceptance over time."""

    preset: Preset
    request: GenerationRequest
    decoders: dict
    comparison: Comparison = None
    pieces: dict = field(default_factory=dict)
    acceptance: list = field(default_factory=list)  # (time, SpecDecodeCounters) per speculative step

    def __post_init__(self):
        decode = self.decoders.get(BASELINE)
        self.comparison = Comparison(decode=decode, num_speculative_tokens=self.preset.num_speculative_tokens)
        self.pieces = {role: views.TokenPieces(self.decoders.get(role)) for role in (BASELINE, SPECULATIVE)}

    def add(self, event) -> None:
        self.comparison.add(event)
        if isinstance(event, StepEvent) and event.counters is not None:
            self.acceptance.append((event.time, event.counters))

    @property
    def synthetic(self) -> bool:
        return self.preset.speculative_config.get("rejection_sample_method") == "synthetic"

    def panes(self) -> tuple[str, str, dict]:
        c = self.comparison
        done = c.done and not (c.finished and c.finished.error)
        divergence = c.first_divergence if done else None
        texts = {role: self.pieces[role].update(c.traces[role].token_ids) for role in (BASELINE, SPECULATIVE)}

        def stop_token(role):  # vLLM keeps the EOS id in the output; show it, dimmed, as what ended the text
            return (c.traces[role].finish_reason == "stop" and self.preset.prompt_input == "text"
                    and not self.request.ignore_eos)

        k = self.preset.num_speculative_tokens
        base = views.pane_html(BASELINE, "Baseline", "target model alone, one token per step",
                               views.baseline_tokens_html(texts[BASELINE], divergence, stop_token(BASELINE)),
                               views.stats_line(c, BASELINE))
        spec = views.pane_html(SPECULATIVE, "Speculative", f"{self.preset.method}, k={k}: verified drafts",
                               views.speculative_tokens_html(texts[SPECULATIVE], c.speculative.step_sizes, k,
                                                             divergence, stop_token(SPECULATIVE)),
                               views.stats_line(c, SPECULATIVE))
        return base, spec, texts

    def badge(self, texts: dict) -> str:
        return views.badge_html(self.comparison, texts, temperature=self.request.temperature,
                                synthetic=self.synthetic, max_tokens=self.request.max_tokens)

    def figures(self, sampler):
        c = self.comparison
        origin = charts.run_origin(c)
        memory = sampler.series(since=(origin - 2.0) if origin else None) if sampler else {}
        label = sampler.label if sampler else "not sampled"
        return (charts.tokens_per_s_figure(c),
                charts.acceptance_figure(self.acceptance, c.counters, self.preset.num_speculative_tokens, origin),
                charts.memory_figure(memory, label, origin))

    def result(self) -> dict:
        out = self.comparison.as_dict()
        out["preset"] = self.preset.name
        out["request"] = {"max_tokens": self.request.max_tokens, "temperature": self.request.temperature}
        return out


class CancelRegistry:
    """Stop buttons find their session's run here (sessions are Gradio's session_hash)."""

    def __init__(self):
        self._events: dict[str, threading.Event] = {}
        self._lock = threading.Lock()

    def new(self, session: str) -> threading.Event:
        with self._lock:
            self._events[session] = event = threading.Event()
            return event

    def cancel(self, session: str) -> bool:
        with self._lock:
            event = self._events.get(session)
        if event is None:
            return False
        event.set()
        return True

    def done(self, session: str, event: threading.Event) -> None:
        with self._lock:
            if self._events.get(session) is event:
                del self._events[session]


# -- the page --------------------------------------------------------------------------------------------
@dataclass
class Page:
    """Components the handlers write to (built by the small functions below)."""

    c: dict = field(default_factory=dict)

    def __getattr__(self, name):
        try:
            return self.__dict__["c"][name]
        except KeyError:
            raise AttributeError(name) from None


RUN_OUTPUTS = ("error", "badge", "pane_b", "pane_s", "summary", "fig_rate", "fig_accept", "fig_mem",
               "history_df", "history_file", "result", "run_btn", "stop_btn", "history")
POLL_OUTPUTS = ("status", "run_btn", "preset", "preset_info", "serve_b", "serve_s", "max_tokens", "legend",
                "prompt", "poll_key")


def _header(page: Page, manager: PairManager, names: list[str]) -> None:
    with gr.Row(equal_height=True):
        with gr.Column(scale=3, min_width=300):
            gr.Markdown("## Speculative decoding playground\nThe same prompt goes to a baseline engine and a "
                        "speculative engine at once: same outputs, fewer steps.")
        with gr.Column(scale=2, min_width=260):
            page.c["preset"] = gr.Dropdown(choices=names, value=manager.status().preset, label="Preset",
                                           interactive=len(names) > 1, elem_id="preset")
    page.c["status"] = gr.HTML(elem_id="status")
    page.c["preset_info"] = gr.Markdown(elem_id="preset-info")


def _prompt_panel(page: Page, manager: PairManager) -> None:
    preset = manager.preset
    limit = max(max_tokens_limit(p) for p in manager.presets.values())
    with gr.Row():
        with gr.Column(scale=4):
            page.c["prompt"] = gr.Textbox(label="Prompt", lines=5, max_lines=14, value=EXAMPLES["rewrite"],
                                          elem_id="prompt")
            with gr.Row():
                gr.Markdown("Examples:", elem_classes=["examples-label"])
                for kind in EXAMPLES:
                    page.c[f"ex_{kind}"] = gr.Button(kind, size="sm", elem_id=f"example-{kind}")
        with gr.Column(scale=1, min_width=220):
            page.c["max_tokens"] = gr.Slider(1, limit, value=preset.default_max_tokens, step=1,
                                             label="Max tokens", elem_id="max-tokens")
            page.c["temperature"] = gr.Slider(0.0, TEMPERATURE_MAX, value=0.0, step=0.05,
                                              label="Temperature (0 = greedy: outputs should match)",
                                              elem_id="temperature")
            with gr.Row():
                page.c["run_btn"] = gr.Button("Run", variant="primary", interactive=False, elem_id="run")
                page.c["stop_btn"] = gr.Button("Stop", variant="stop", interactive=False, elem_id="stop")
    page.c["error"] = gr.HTML(elem_id="page-error")


def _panes(page: Page, k: int) -> None:
    page.c["badge"] = gr.HTML(views.badge_html(None), elem_id="badge")
    with gr.Row(equal_height=False):
        with gr.Column(min_width=320):
            page.c["pane_b"] = gr.HTML(views.pane_html(BASELINE, "Baseline", "target model alone", ""),
                                       elem_id="baseline-pane")
        with gr.Column(min_width=320):
            page.c["pane_s"] = gr.HTML(views.pane_html(SPECULATIVE, "Speculative", "verified drafts", ""),
                                       elem_id="speculative-pane")
            page.c["legend"] = gr.HTML(views.legend_html(k), elem_id="legend")


def _stats(page: Page, manager: PairManager) -> None:
    page.c["summary"] = gr.DataFrame(charts.summary_table(Comparison()).iloc[0:0], label="This run",
                                     interactive=False, elem_id="summary")
    # Empty charts to start with; building them also loads plotly's validators now rather than during the
    # first run, where that second of CPU would land in the engines' first tokens.
    empty = LiveRun(manager.preset, GenerationRequest(prompt="-"), {})
    rate, accept, memory = empty.figures(None)
    with gr.Row():
        page.c["fig_rate"] = gr.Plot(rate, label="tokens/s", elem_id="chart-rate")
        page.c["fig_accept"] = gr.Plot(accept, label="acceptance", elem_id="chart-acceptance")
        page.c["fig_mem"] = gr.Plot(memory, label="memory", elem_id="chart-memory")
    with gr.Accordion("Session history", open=True):
        page.c["history_df"] = gr.DataFrame(charts.history_table([]), interactive=False, elem_id="history")
        page.c["history_file"] = gr.DownloadButton("Download history (CSV)", value=None, size="sm",
                                                   elem_id="history-csv")
    with gr.Accordion("Raw result (JSON)", open=False):
        page.c["result"] = gr.JSON(elem_id="result")


def _serve_panel(page: Page) -> None:
    with gr.Accordion("Run it yourself: the `vllm serve` lines for this preset", open=False):
        page.c["serve_b"] = gr.Code(language="shell", label="baseline", interactive=False, elem_id="serve-baseline")
        page.c["serve_s"] = gr.Code(language="shell", label="speculative", interactive=False,
                                    elem_id="serve-speculative")


def _preset_info(preset: Preset, manager: PairManager) -> str:
    from playground.presets import availability

    notes = f"\n\n{preset.notes}" if preset.notes else ""
    return (f"**{preset.name}**: {preset.description} · guide: *{preset.guide_section}* · "
            f"{availability(preset, manager.hardware).reason}{notes}")


def build_page(manager: PairManager) -> gr.Blocks:
    names = list(manager.presets)
    registry = CancelRegistry()
    history_dir = tempfile.mkdtemp(prefix="playground-history-")
    page = Page()
    with gr.Blocks(title="Speculative decoding playground") as demo:
        _header(page, manager, names)
        _serve_panel(page)  # near the top: the preset's lesson in vLLM's own terms
        _prompt_panel(page, manager)
        _panes(page, manager.preset.num_speculative_tokens)
        _stats(page, manager)
        page.c["history"] = gr.State([])
        page.c["poll_key"] = gr.State(None)
        timer = gr.Timer(1.0)

        def outputs(names_):
            return [page.c[n] for n in names_]

        # -- status polling: the loading state, Run enabled only when ready, preset-dependent widgets --
        def poll(last_key):
            status = manager.status()
            if status.key == last_key:
                return tuple(gr.skip() for _ in POLL_OUTPUTS)
            preset = manager.presets[status.preset]
            lines = serve_commands(preset, manager.hardware)
            token_mode = preset.prompt_input == "token_ids"
            return (
                views.status_html(status.state, status.preset, status.message, status.progress,
                                  status.elapsed_s, manager.hardware.describe()),
                gr.update(interactive=status.state == "ready"),
                gr.update(value=status.preset),
                _preset_info(preset, manager),
                lines[BASELINE], lines[SPECULATIVE],
                gr.update(maximum=max_tokens_limit(preset)),
                views.legend_html(preset.num_speculative_tokens),
                gr.update(placeholder="token ids, e.g. 1000, 1001, 1002" if token_mode else "Type a prompt"),
                status.key,
            )

        timer.tick(poll, inputs=page.poll_key, outputs=outputs(POLL_OUTPUTS), show_progress="hidden",
                   api_visibility="private", concurrency_limit=None)
        demo.load(poll, inputs=page.poll_key, outputs=outputs(POLL_OUTPUTS), show_progress="hidden",
                  api_visibility="private", concurrency_limit=None)

        def switch(name):
            try:
                manager.load(name)
            except (PresetNotAllowed, RuntimeError) as exc:
                return views.error_html(str(exc))
            return ""

        page.preset.input(switch, inputs=page.preset, outputs=page.error, api_name="switch_preset",
                          concurrency_limit=1, concurrency_id="engines")

        for kind in EXAMPLES:
            page.c[f"ex_{kind}"].click(
                lambda kind=kind: (TOKEN_EXAMPLES if manager.preset.prompt_input == "token_ids" else EXAMPLES)[kind],
                outputs=page.prompt, queue=False, api_visibility="private")

        # -- a run --
        def run(prompt, max_tokens, temperature, history, request: gr.Request):
            yield from _run(manager, registry, history_dir, prompt, max_tokens, temperature, history,
                            _session(request))

        page.run_btn.click(run, inputs=[page.prompt, page.max_tokens, page.temperature, page.history],
                           outputs=outputs(RUN_OUTPUTS), api_name="run", concurrency_limit=1,
                           concurrency_id="engines", show_progress="minimal", show_progress_on=[page.badge])

        def stop(request: gr.Request):
            registry.cancel(_session(request))
            return gr.update(interactive=False)

        page.stop_btn.click(stop, outputs=page.stop_btn, api_name="stop", concurrency_limit=None,
                            show_progress="hidden")

        def status() -> dict:
            s = manager.status()
            pair = manager.pair
            return {"state": s.state, "preset": s.preset, "message": s.message, "progress": s.progress,
                    "elapsed_s": s.elapsed_s, "engine_pids": pair.process_ids() if pair else None}

        gr.api(status, api_name="status", concurrency_limit=None)
    return demo


def _session(request: gr.Request | None) -> str:
    return getattr(request, "session_hash", None) or "anonymous"


def _run(manager: PairManager, registry: CancelRegistry, history_dir: str, prompt, max_tokens, temperature,
         history: list, session: str):
    """The run handler: yields tuples in RUN_OUTPUTS order; never raises (errors go on the page)."""
    skip = gr.skip()
    idle_buttons = (gr.update(interactive=manager.pair is not None), gr.update(interactive=False))

    def fail(message: str):
        return (views.error_html(message), skip, skip, skip, skip, skip, skip, skip, skip, skip,
                {"error": message}, *idle_buttons, history)

    pair, preset = manager.pair, manager.preset
    if pair is None:
        yield fail("The engines are not ready yet (see the status above); Run is enabled once they are.")
        return
    try:
        req = build_request(preset, prompt, max_tokens, temperature)
    except InputError as exc:
        yield fail(str(exc))
        return
    cancel = registry.new(session)
    decoders = ({role: pair.engines[role].decode for role in (BASELINE, SPECULATIVE)}
                if preset.prompt_input == "text" else {})
    live = LiveRun(preset, req, decoders)
    failure = None
    with manager.run_lock:
        stream = pair.stream(req, schedule="concurrent", cancel=cancel)
        finished = False
        try:
            last = 0.0
            for event in stream:
                live.add(event)
                finished = isinstance(event, RunFinished)
                now = time.monotonic()
                if finished:
                    break
                if now - last >= 1.0 / UPDATE_HZ:
                    last = now
                    yield _render(live, manager, running=True, history=history)
        except PromptError as exc:
            failure = str(exc)
        except Exception as exc:  # the page stays up; the message says what broke
            failure = f"The run failed: {type(exc).__name__}: {exc}"
        finally:
            if not finished:  # closed early (browser gone, error): abort both requests, release the engines
                cancel.set()
                try:
                    for _ in stream:
                        pass
                except Exception:
                    pass
            registry.done(session, cancel)
    if failure is not None:
        yield fail(failure)
        return
    error = live.comparison.finished.error if live.comparison.finished else None
    if error:
        manager.reload_if_dead()
    b = live.comparison
    row = charts.history_row(b, len(history) + 1, preset.name,
                             req.prompt if req.prompt_token_ids is None else " ".join(map(str, req.prompt_token_ids)),
                             req.max_tokens, req.temperature)
    history = history + [row]
    path = os.path.join(history_dir, f"history-{session[:12]}.csv")
    charts.history_table(history).to_csv(path, index=False)
    yield _render(live, manager, running=False, history=history, csv_path=path,
                  error=f"An engine failed during the run: {error}" if error else None)


def _render(live: LiveRun, manager: PairManager, running: bool, history: list, csv_path: str | None = None,
            error: str | None = None):
    skip = gr.skip()
    base, spec, texts = live.panes()
    badge = live.badge(texts)
    rate, accept, memory = live.figures(manager.sampler)
    if running:  # tables only at the end: a DataFrame update costs the server more than a chart does
        return ("", badge, base, spec, skip, rate, accept, memory, skip, skip, skip,
                gr.update(interactive=False), gr.update(interactive=True), history)
    return (views.error_html(error), badge, base, spec, charts.summary_table(live.comparison), rate, accept, memory,
            charts.history_table(history), csv_path, live.result(),
            gr.update(interactive=manager.pair is not None), gr.update(interactive=False), history)


def launch(demo: gr.Blocks, host: str, port: int, share: bool = False, auth: tuple[str, str] | None = None,
           block: bool = True):
    """Serve the page with a queue: runs wait their turn instead of fighting over the engines."""
    # The engines' outputs are read by an asyncio loop in this process; threads rendering the page must hand
    # the GIL back quickly (default: every 5 ms), or vLLM merges two steps' chunks before the loop reads them.
    sys.setswitchinterval(0.001)
    demo.queue(max_size=32, default_concurrency_limit=1)
    return demo.launch(server_name=host, server_port=port, share=share, auth=auth, css=views.CSS,
                       prevent_thread_lock=not block, show_error=True, footer_links=["api"],
                       theme=gr.themes.Soft())
