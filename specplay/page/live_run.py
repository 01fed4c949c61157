"""One run as the page shows it, keyed by output name: the two panes, the identity badge, the speedup's
two factors, the charts and the tables, live while the engines stream and again while a sequential run is
replayed on one clock. No Gradio: the page maps these names onto its components, and the API tests and
the page benchmark read its outputs by the same names.

A sequential run (the default on a GPU) has each engine generate alone, one after the other, so each
one's timings are clean; the panes then replay both streams from their recorded arrival times on one
clock, so they race at the speeds the engines had alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from specplay.page import charts

from specplay.page import repeats, views
from specplay.run import stream
from specplay.run.comparison import Comparison
from specplay.run.result import RunResult
from specplay.core.events import BASELINE, SPECULATIVE, GenerationRequest, Schedule
from specplay.presets.catalog import Preset, where_it_pays
from specplay.presets.verifiers import Verifier, verifier_of

UPDATE_HZ = 4.0  # page redraws a second while streaming or replaying
# Chart (and streaming run JSON) redraws a second then: Plotly redraws whole figures, and at 4 Hz three charts took most of a browser's
# CPU on 2 loaded cores (a CPU profile of headless chromium, 2026-12-03: 15.8 of 36 s in PlotlyPlot, most of the
# rest its layout), so the page fell minutes behind the run and Stop or Esc came after the end.
CHART_HZ = 1.0


class ChartClock:
    """Whether this frame redraws the charts: at most CHART_HZ times a second (the first frame does)."""

    def __init__(self):
        self.last = float("-inf")

    def due(self, now: float) -> bool:
        if now - self.last < 1.0 / CHART_HZ:
            return False
        self.last = now
        return True
REPLAY_MAX_S = 30.0  # a longer replay is sped up to fit, and says so

# What a run writes on the page, in the order the `run` route lists them (the API returns these, in this
# order; the buttons and the session's history State are page-only and come after: Gradio's API leaves them out).
# The last, the page's "Link to this run" box, is emptied by each run: a link names the run it was made for.
API_OUTPUTS = ("error", "badge", "explain", "pane_b", "pane_s", "summary", "fig_rate", "fig_accept", "fig_mem",
               "history_df", "history_file", "result", "result_file", "summary_md", "share_link")
REPLAY_OUTPUTS = ("badge", "pane_b", "pane_s", "fig_rate", "fig_accept")


@dataclass
class LiveRun:
    """A run in progress or finished: its Comparison, and per-token text for both panes."""

    preset: Preset
    request: GenerationRequest
    decoders: dict
    schedule: str = Schedule.SEQUENTIAL
    device: str = "cpu"
    engines: dict = field(default_factory=dict)  # per role: how vLLM resolved it (async scheduling, dtype)
    comparison: Comparison = None
    pieces: dict = field(default_factory=dict)
    step_floor_s: float | None = None  # the baseline step's bandwidth floor; found from the preset on a GPU
    # a recording (page/recordings_view.py): its provenance line, over the badge and the explanation of every
    # frame (a replay's too), and its memory samples by role (engine.telemetry's MemorySeries' shape)
    label: str | None = None
    memory: dict = field(default_factory=dict)
    _result: RunResult | None = field(default=None, init=False, repr=False)

    def __post_init__(self):
        self.comparison = Comparison(decode=self.decoders.get(BASELINE),
                                     num_speculative_tokens=self.preset.num_speculative_tokens)
        self.pieces = {role: views.TokenPieces(self.decoders.get(role)) for role in (BASELINE, SPECULATIVE)}
        if self.step_floor_s is None and self.device == "gpu" and self.label is None:
            from specplay.core.hardware import detect
            from specplay.plan.memory import target_step_floor_s

            self.step_floor_s = target_step_floor_s(self.preset, detect())  # cached per preset and GPU

    @classmethod
    def recorded(cls, preset: Preset, request: GenerationRequest, result: RunResult, comparison: Comparison,
                 decoders: dict, device: str, label: str, memory: dict) -> "LiveRun":
        """A finished run made elsewhere: `comparison` rebuilt from `result` (run.recorded), which stays the
        run's result as it was recorded (its explanation was made where it ran)."""
        live = cls(preset, request, decoders, result.schedule or Schedule.SEQUENTIAL, device, dict(result.engines),
                   label=label, memory=memory)
        live.comparison, live._result = comparison, result
        return live

    def add(self, event) -> None:
        self.comparison.add(event)
        self._result = None

    def stream(self, pair, cancel=None):
        """Run this request on `pair`, each event added to the Comparison before it is yielded (the page
        redraws between them)."""
        for event in stream.events(pair, self.request, self.schedule, self.comparison, cancel):
            self._result = None
            yield event

    @property
    def verifier(self) -> Verifier:
        return verifier_of(self.preset.speculative_config)

    @property
    def replayable(self) -> bool:
        c = self.comparison
        return (self.schedule == Schedule.SEQUENTIAL and c.done and not c.finished.error and not c.finished.cancelled
                and c.replay_seconds > 0)

    def replay_speed(self) -> float:
        """1 (real time) unless the replay would last longer than REPLAY_MAX_S."""
        return max(1.0, self.comparison.replay_seconds / REPLAY_MAX_S)

    # -- frames ---------------------------------------------------------------------------------------------
    def frame(self, sampler=None, at: float | None = None, with_charts: bool = True) -> dict:
        """Panes, badge and charts (`with_charts`; without them the page keeps the last ones): live (`at` None)
        or as the replay stood `at` seconds in."""
        c = self.comparison if at is None else self.comparison.until(at)
        phase = "live" if at is None else "replay"
        done = c.done and not c.finished.error
        divergence = c.first_divergence if done else None
        texts = {role: self.pieces[role].update(c.traces[role].token_ids) for role in (BASELINE, SPECULATIVE)}
        waiting = (at is None and self.schedule == Schedule.SEQUENTIAL and not c.done and not c.speculative.token_ids)
        badge_phase = "sequential" if phase == "live" and self.schedule == Schedule.SEQUENTIAL else phase
        speed = self.replay_speed() if at is not None else 1.0
        note = f" (shown {speed:.1f}× faster than real time)" if speed > 1.0 else ""
        out = {
            "pane_b": self._pane(c, BASELINE, texts, divergence),
            "pane_s": self._pane(c, SPECULATIVE, texts, divergence, waiting),
            "badge": views.recorded_html(self.label) + views.badge_html(
                c, texts, temperature=self.request.temperature, verifier=self.verifier,
                max_tokens=self.request.max_tokens, phase=badge_phase, note=note),
        }
        if not with_charts:
            return out
        out["fig_rate"], out["fig_accept"] = charts.tokens_per_s_figure(c), charts.acceptance_figure(c)
        if at is None and self.label is not None:  # as recorded: this machine's sampler and plan aren't its
            out["fig_mem"] = charts.memory_figure(self.memory, "as recorded" if self.memory else "not recorded",
                                                  charts.run_origin(c))
        elif at is None:
            origin = charts.run_origin(c)
            memory = sampler.series(since=(origin - 2.0) if origin else None) if sampler else {}
            out["fig_mem"] = charts.memory_figure(memory, sampler.label if sampler else "not sampled", origin,
                                                  memory_plan_note(self.preset, self.device, self.engines))
        return out

    def _pane(self, c: Comparison, role: str, texts: dict, divergence: int | None, waiting: bool = False) -> str:
        trace = c.traces[role]
        # vLLM keeps the EOS id in the output: shown, dimmed, as what ended the text
        stop = trace.finish_reason == "stop" and self.preset.prompt_input == "text" and not self.request.ignore_eos
        stats = views.stats_line(c, role) if trace.finished or c.done else ""  # live, it would break the appends
        if role == BASELINE:
            body = views.baseline_tokens_html(texts[role], divergence, stop)
            return views.pane_html(role, "Baseline", "target model alone, one token per step", body, stats)
        k = self.preset.num_speculative_tokens
        body = (views.waiting_html("runs when the baseline has finished, so each engine has the device to itself")
                if waiting else views.speculative_tokens_html(texts[role], trace.step_sizes, k, divergence, stop))
        return views.pane_html(role, "Speculative", f"{self.preset.method}, k={k}: verified drafts", body, stats)

    def result(self) -> RunResult:
        """This run, typed; its dump is the `compare --json` object plus the page's run id and request."""
        if self._result is None or not self.comparison.done:
            self._result = RunResult.of(self.comparison, self.preset, device=self.device, engines=self.engines,
                                        run_id=self.comparison.run_id, request=self.request,
                                        step_floor_s=self.step_floor_s)
        return self._result

    def final(self, sampler=None, history: list | None = None, csv_path: str | None = None,
              error: str | None = None) -> dict:
        """Every output of the run route, for the finished run."""
        result = self.result()
        return {
            **self.frame(sampler),
            "error": views.error_html(error),
            "explain": views.recorded_html(self.label) + views.explain_html(result, self.expectation()),
            "summary": charts.summary_table(result),
            "history_df": charts.history_table(history or []),
            "history_file": csv_path,
            "result": result.model_dump(mode="json"),
        }

    def expectation(self) -> str | None:
        pays = where_it_pays(self.preset, self.device)
        return f"Where {self.preset.name} pays on a {self.device.upper()}: {pays}" if pays else None

    def history_row(self, number: int) -> dict:
        req = self.request
        prompt = req.prompt if req.prompt_token_ids is None else " ".join(map(str, req.prompt_token_ids))
        # and the digests a repeated greedy prompt is recognised by (page.repeats), in no column
        return {**charts.history_row(self.result(), number, prompt), **repeats.repeat_keys(self.result(), prompt)}


def empty_frame(preset: Preset) -> dict:
    """What the page shows before any run (also loads plotly's machinery at start, not in a run)."""
    live = LiveRun(preset, GenerationRequest(prompt="-"), {})
    return {**live.frame(), "badge": views.badge_html(None), "explain": views.explain_html(None),
            "summary": charts.summary_table(None)}


_PLANS: dict = {}


def memory_plan_note(preset: Preset, device: str, engines: dict | None = None) -> str | None:
    """What each engine's memory holds: weights by the memory plan (specplay.plan), the KV cache as vLLM
    reserved it (`engines`: role -> EngineInfo, whose kv_cache_bytes is the engine's own figure) beside the
    plan's estimate. The plan is made once per preset; None where it can't be made (a model's config not to
    be had)."""
    key = (preset.name, preset.num_speculative_tokens, device)
    if key not in _PLANS:
        try:
            from specplay.core.hardware import detect
            from specplay.plan.memory import plan

            _PLANS[key] = plan(preset, detect())
        except Exception:  # the note only explains the chart: never fail a frame for it
            _PLANS[key] = None
    if _PLANS[key] is None:
        return None
    reserved = {role: info.kv_cache_bytes for role, info in (engines or {}).items() if info.started}
    return charts.plan_note(_PLANS[key], reserved)
