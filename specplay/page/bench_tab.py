"""The page's Bench tab (Gradio): bounded controls, Run bench / Stop, a progress bar, and the table, the
advice and the charts filled in as rows arrive. It benches the loaded preset and holds the engines
(`manager.run_lock`) while it measures; a comparison in progress makes it decline rather than wait.
What it shows comes from `bench_view`; handlers return {output name: value}, mapped onto the tab's own
components (a Section) by `tab.out`.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import gradio as gr

from specplay.page import bench_view as bv
from specplay.page import views
from specplay.bench.runner import BenchError, BenchRun, is_synthetic, load_prompts
from specplay.bench.charts import figures as bench_figures
from specplay.bench.outputs import write_results
from specplay.hosting.cancel import CancelRegistry, stops_first
from specplay.hosting.files import clean_old, session_token
from specplay.hosting.settings import PageSettings, scrub
from specplay.page.section import Section
from specplay.hosting.session import session_id
from specplay.bench.workloads import WORKLOADS

INTRO = ("### Where speculation pays\nThe loaded preset, measured over workloads × k × temperature × "
         "concurrency. Each engine runs its batch alone (baseline, then speculative); another k restarts only "
         "the speculative engine, and the preset's own is loaded back at the end. The Compare tab waits "
         "while a bench runs, and a bench stops at the page's run time limit. Bigger sweeps: `python -m specplay bench`.")


def bench_tab(manager, settings: PageSettings, folder: Path) -> Section:
    """Lay out the tab's components (names prefixed bench_, inside the caller's gr.Tab) and wire its events."""
    tab = Section()
    k = manager.preset.num_speculative_tokens
    gr.Markdown(INTRO)
    with gr.Row():
        with gr.Column(scale=3):
            tab.c["bench_workloads"] = gr.CheckboxGroup(list(WORKLOADS), value=list(bv.DEFAULT_WORKLOADS),
                                                         label="Workloads", elem_id="bench-workloads",
                                                         info="token-id prompts for presets without a tokenizer")
            with gr.Row():
                tab.c["bench_k"] = gr.CheckboxGroup(list(bv.K_CHOICES), value=[k] if k in bv.K_CHOICES else [],
                                                     label="k (num_speculative_tokens)", elem_id="bench-k")
                tab.c["bench_temperature"] = gr.CheckboxGroup(list(bv.TEMPERATURE_CHOICES), value=[0.0],
                                                               label="Temperature", elem_id="bench-temperature")
            with gr.Row():
                tab.c["bench_concurrency"] = gr.CheckboxGroup(list(bv.CONCURRENCY_CHOICES), value=[1],
                                                               label="Concurrency (requests in flight)",
                                                               elem_id="bench-concurrency")
                tab.c["bench_acceptance"] = gr.CheckboxGroup(list(bv.ACCEPTANCE_CHOICES), value=[],
                                                              label="Synthetic acceptance (dummy-* presets)",
                                                              elem_id="bench-acceptance")
        with gr.Column(scale=1, min_width=220):
            tab.c["bench_n"] = gr.Slider(1, bv.N_MAX, value=bv.DEFAULT_N, step=1, label="Prompts per workload",
                                          elem_id="bench-n")
            tab.c["bench_max_tokens"] = gr.Slider(bv.MAX_TOKENS_MIN, bv.MAX_TOKENS_MAX, value=bv.DEFAULT_MAX_TOKENS,
                                                   step=8, label="Max tokens", elem_id="bench-max-tokens")
            with gr.Row():
                tab.c["bench_run"] = gr.Button("Run bench", variant="primary", elem_id="bench-run")
                tab.c["bench_stop"] = gr.Button("Stop", variant="stop", elem_id="bench-stop")
    start = bv.empty_frame()
    tab.c["bench_status"] = gr.HTML(start["bench_status"], elem_id="bench-status")
    tab.c["bench_error"] = gr.HTML(elem_id="bench-error")
    tab.c["bench_advice"] = gr.HTML(elem_id="bench-advice")
    tab.c["bench_table"] = gr.DataFrame(start["bench_table"], label="One row per setting", interactive=False,
                                         elem_id="bench-table")
    names = list(bv.CHART_OUTPUTS)
    for i in range(0, len(names), 2):
        with gr.Row():
            for name in names[i:i + 2]:
                tab.c[name] = gr.Plot(label=bv.CHART_OUTPUTS[name].replace("_", " "), elem_id=name.replace("_", "-"))
    with gr.Row():  # exports: CSV, JSON, the charts as PNG, the table as Markdown
        tab.c["bench_file"] = gr.DownloadButton("Download the bench (CSV)", value=None, size="sm",
                                                 elem_id="bench-csv")
        tab.c["bench_json"] = gr.DownloadButton("Download the bench (JSON)", value=None, size="sm",
                                                 elem_id="bench-json")
    tab.c["bench_pngs"] = gr.File(label="Charts (PNG)", file_count="multiple", interactive=False, elem_id="bench-pngs")
    with gr.Accordion("The table as Markdown (copy into an issue)", open=False):
        tab.c["bench_md"] = gr.Code("", language="markdown", interactive=False, elem_id="bench-md")
    _wire(tab, manager, settings, Path(folder))
    return tab


def _wire(tab: Section, manager, settings: PageSettings, folder: Path) -> None:
    registry = CancelRegistry()
    inputs = tab.list(("bench_workloads", "bench_n", "bench_k", "bench_temperature", "bench_concurrency",
                        "bench_acceptance", "bench_max_tokens"))

    def run(*values, request: gr.Request = None):
        try:
            for out in run_bench(manager, registry, folder, session_id(request), *values, settings=settings):
                yield tab.out(out)
        except Exception as exc:  # writing the results, drawing them: said, scrubbed, and Run bench is back
            message = scrub(f"The bench failed: {type(exc).__name__}: {exc}")
            yield tab.out({"bench_error": views.error_html(message), "bench_run": gr.update(interactive=True)})

    def stop(request: gr.Request = None):
        registry.cancel(session_id(request))

    # its own queue: a comparison in progress makes the bench decline (run_lock), not queue behind it
    tab["bench_run"].click(run, inputs=inputs, outputs=tab.list(bv.OUTPUTS + ("bench_run",)), api_name="bench",
                         concurrency_limit=1, concurrency_id="bench", show_progress="hidden")
    # never queued behind runs; named, so it doesn't take the name "stop" from the comparison's Stop
    tab["bench_stop"].click(stops_first(stop, registry), api_name="bench_stop", api_visibility="private", queue=False, show_progress="hidden")


class _Hold:
    """The bench's hold on the engines: released once, whichever way the bench ends (finished, failed, the
    visitor gone), together with its Stop entry and its time limit."""

    def __init__(self, manager, registry: CancelRegistry, session: str, limit_s: float):
        self.manager, self.registry, self.session = manager, registry, session
        self.cancel = registry.new(session)
        self.timed_out = False
        self._timer = threading.Timer(limit_s, self._time_out)
        self._timer.daemon = True
        self._timer.start()
        self._released = threading.Lock()
        self._done = False

    def _time_out(self) -> None:
        self.timed_out = True
        self.cancel.set()

    def release(self) -> None:
        with self._released:
            if self._done:
                return
            self._done = True
        self._timer.cancel()
        self.registry.done(self.session, self.cancel)
        self.manager.run_lock.release()


def run_bench(manager, registry: CancelRegistry, folder, session: str, workloads, n, ks, temperatures,
              concurrency, acceptance, max_tokens, settings: PageSettings | None = None):
    """The handler: yields {output name: value}; never raises (messages go on the tab)."""
    settings = settings or PageSettings()
    idle = {"bench_run": gr.update(interactive=True)}
    picks = (workloads, n, ks, temperatures, concurrency, acceptance, max_tokens)
    if not settings.allow_bench:
        yield {"bench_error": views.error_html("The bench is turned off on this page (the operator's choice)."),
               **idle}
        return
    ready, refusal = _prepare(manager, *picks)
    if refusal is None and not manager.run_lock.acquire(blocking=False):
        refusal = "A comparison is running on the engines; run the bench when it has finished."
    if refusal is not None:
        yield {"bench_error": views.error_html(refusal), **idle}
        return
    hold = _Hold(manager, registry, session, settings.max_run_seconds)
    try:  # under the lock: the pair read again, as a reload may have replaced it since
        ready, refusal = _prepare(manager, *picks)
        bench = None
        if refusal is None:
            pair, preset, bench_settings, prompts = ready
            bench = BenchRun(pair, preset, bench_settings, prompts, manager.hardware, cancel=hold.cancel,
                             restore=True)
            if bench.plan.restarts and not settings.allow_switching:
                refusal = ("Another k or acceptance restarts the speculative engine, and switching engines is "
                           f"turned off on this page: bench k={preset.num_speculative_tokens} without acceptance.")
    except Exception as exc:
        refusal = f"The bench can't start: {type(exc).__name__}: {exc}"
    if refusal is not None:
        hold.release()
        yield {"bench_error": views.error_html(scrub(refusal)), **idle}
        return
    failure = yield from _measure(bench, hold)  # releases the hold
    if failure:
        manager.reload_if_dead()
    elif hold.timed_out:
        failure = (f"The bench was stopped at this page's limit of {settings.max_run_seconds:g} seconds; "
                   "the rows measured until then are kept.")
    report = bench.result()
    out = Path(folder)
    clean_old(out, settings.files_max_age_s)
    # a folder named by a keyed hash of the session, not its stem (= its prefix-cache salt, which a run's JSON
    # shows): every file under the page's bench folder is servable, so the name is all that keeps it private
    written = write_results(out / f"bench-{session_token(session)}", report,
                            bench_figures(bench.rows, bench.preset.num_speculative_tokens, is_synthetic(bench.preset)))
    yield {"bench_error": views.error_html(scrub(failure) if failure else failure),
           "bench_advice": bv.advice_html(bench_advice(report)),
           "bench_table": bv.table_frame(bench.rows), **bv.chart_frame(bench.rows, bench.preset),
           **bv.exports(written, bench.rows), **idle}


def _prepare(manager, *picks) -> tuple[tuple | None, str | None]:
    """((pair, preset, BenchSettings, prompts), None) from the visitor's picks, or (None, why it can't run)."""
    pair, preset = manager.pair, manager.preset
    if pair is None:
        return None, "The engines are not ready yet; the bench starts once they are."
    try:
        settings = bv.settings_from_picks(preset, *picks)
        prompts = load_prompts(settings, preset)
    except BenchError as exc:
        return None, str(exc)
    return (pair, preset, settings, prompts), None


def _measure(bench: BenchRun, hold: _Hold):
    """Yield the tab's redraws as the bench's rows arrive; returns a message if it failed. Always releases
    `hold`, from a worker thread: putting the preset's own speculative engine back is an engine start, and
    when the visitor has left, Gradio closes this generator on its event loop, which must not wait for it."""
    steps = bench.run()
    failure, finished, abandoned = None, False, False
    try:
        yield {**bv.empty_frame(), "bench_run": gr.update(interactive=False)}
        for step in steps:
            out = {"bench_status": bv.progress_html(step)}
            if step.row is not None:
                out.update(bench_table=bv.table_frame(bench.rows), **bv.chart_frame(bench.rows, bench.preset))
            yield out
        finished = True
    except GeneratorExit:  # the visitor left mid-bench: stop measuring, clean up off this thread
        abandoned = True
        raise
    except Exception as exc:  # an engine failed: the tab says so, the page stays up
        failure = f"The bench failed: {type(exc).__name__}: {exc}"
    finally:
        if not finished:
            bench.cancel.set()
        cleanup = threading.Thread(target=_close, args=(steps, hold), name="bench-cleanup", daemon=True)
        cleanup.start()
        if not abandoned:
            cleanup.join()
    return failure


def _close(steps, hold: _Hold) -> None:
    try:
        steps.close()  # puts the preset's own speculative engine back if the bench swapped it
    except Exception as exc:
        print(f"bench: restoring the preset's engine failed: {type(exc).__name__}: {exc}", file=sys.stderr)
    finally:
        hold.release()


def bench_advice(report) -> list:
    """The report's advice (bench.report.BenchReport: typed, nothing rebuilt from dicts)."""
    return list(report.advice)
