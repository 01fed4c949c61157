"""The Compare tab's run and replay, as generators of {output name: value} (names from `live_run`): no
layout here (`compare_tab` maps the names onto its components). A run checks its inputs, holds the
engines while it streams (redrawing at most UPDATE_HZ times a second), then writes the session's history
and the verdict; a sequential run is replayed on one clock by a second event that doesn't hold the
engines, so the next visitor's run can start."""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from dataclasses import dataclass

import gradio as gr

from specplay.core.events import BASELINE, ROLES, SPECULATIVE, RunFinished
from specplay.engine.base import PromptError
from specplay.page import repeats, views
from specplay.hosting.cancel import CancelRegistry
from specplay.page import charts
from specplay.page.charts import history_table
from specplay.page.inputs import InputError, build_request, check_schedule, max_tokens_limit
from specplay.page.live_run import UPDATE_HZ, ChartClock, LiveRun
from specplay.hosting.manager import PairManager
from specplay.hosting.files import clean_old, drop_served_copies, hide_session_files
from specplay.hosting.room import Room
from specplay.page.finished_run import FinishedRun, exports
from specplay.page.follow import published
from specplay.hosting.session import ANONYMOUS, session_stem
from specplay.hosting.settings import PageSettings, scrub
from specplay.run.noise import pooled_runs

MAX_RUNS = 3  # "Run 3×": the most runs one queued event makes
ANSWER_GRACE_S = 30.0  # past max_run_seconds, an engine that hasn't ended its stream is taken for hung
NOT_READY = "The engines are not ready yet (see the status above); Run is enabled once they are."


@dataclass(frozen=True)
class RunPlace:
    """What every run on this page shares: the engines, the Stop registry, where the history CSVs go and
    the operator's limits."""

    manager: PairManager
    registry: CancelRegistry
    history_dir: str
    settings: PageSettings
    served_dir: str | None = None  # Gradio's cache, where it copies the files it serves
    recordings: dict = dataclasses.field(default_factory=dict)  # name -> recordings_view.Shelved, read at start
    room: Room = dataclasses.field(default_factory=Room)  # the presenter's room (hosting/room.py): off by default


@dataclass
class _Outcome:
    failure: str | None = None  # a message for the visitor: the run broke (not: it was stopped)
    timed_out: bool = False  # stopped at the operator's max_run_seconds
    live: LiveRun | None = None
    values: dict | None = None  # the finished run's outputs


def run_comparison(place: RunPlace, prompt, max_tokens, temperature, schedule, history: list, session: str):
    """The run handler: yields {output name: value}; never raises (errors go on the page, scrubbed, and Run
    is enabled again)."""
    yield from run_once(place, (prompt, max_tokens, temperature, schedule), history, session)


def run_once(place: RunPlace, inputs: tuple, history: list, session: str, cancel=None):
    """One run's frames; returns its _Outcome when it ran to its end or was stopped (None when refused or
    failed). `cancel`: a series' Stop event shared by all its runs (compare_series), else one of its own."""
    idle = {"run_btn": gr.update(interactive=place.manager.pair is not None), "stop_btn": gr.update(interactive=False)}
    try:
        _, _, refusal = _prepare(place.manager, *inputs, session)
        if refusal is not None:
            yield _failed(refusal, idle, history)
            return None
        outcome = yield from _stream(place, inputs, session, cancel)
        if outcome.failure is not None:
            yield _failed(outcome.failure, _idle(place), history)
            return None
        outcome.values = _finished(place, outcome.live, outcome.timed_out, history, session, _idle(place))
        yield outcome.values
        return outcome
    except GeneratorExit:
        raise
    except Exception as exc:  # whatever broke outside the run itself: said, scrubbed, and Run is back
        yield _failed(f"The run failed: {type(exc).__name__}: {exc}", _idle(place), history)
        return None


def served(frames, place: RunPlace, session: str):
    """A run event's frames as the page serves them (the Compare tab's runs and the Lesson tab's steps alike):
    the session's history CSV under a name nothing shown gives away (files.hide_session_files), and the
    finished run's exports (its JSON, named from its session, and its table as Markdown); in a room, each
    frame put in the room for the followers (follow.published: only the presenter's events reach a run)."""
    yield from published(_exported(frames, place, session), place.room)


def _exported(frames, place: RunPlace, session: str):
    for values in frames:
        values = hide_session_files(values, session, place.served_dir)
        yield {**values, **exports(values, place.history_dir)}


def runs_allowed(place: RunPlace, max_tokens, runs: int = MAX_RUNS) -> int:
    """How many runs "Run 3×" makes: at most MAX_RUNS, and only as many as keep runs × max tokens within one
    run's token limit (1 when a single run is at it), so a series generates no more than one run may."""
    try:
        tokens = int(float(max_tokens))
    except (TypeError, ValueError, OverflowError):
        return 1  # the run itself refuses it, with its message
    return max(1, min(runs, MAX_RUNS, max_tokens_limit(place.manager.preset) // max(1, tokens)))


def compare_series(place: RunPlace, prompt, max_tokens, temperature, schedule, history: list, session: str,
                   runs: int = MAX_RUNS):
    """"Run 3×": the same prompt run `runs_allowed` times in one queued event, then the runs' steps pooled
    (run.noise.pooled_runs) into one speedup with a narrower interval, beside the single runs' spread. The
    runs share one Stop (Stop during any run ends the series) and one max_run_seconds: the engines are held
    no longer than a single run may hold them."""
    total, started = runs_allowed(place, max_tokens, runs), time.monotonic()
    inputs = (prompt, max_tokens, temperature, schedule)
    cancel, finished, last, why = place.registry.new(session), [], None, None
    try:
        for number in range(1, total + 1):
            left = place.settings.max_run_seconds - (time.monotonic() - started)
            if left <= 0:
                why = f"the page's limit of {place.settings.max_run_seconds:g} seconds for a run was reached"
                break
            limited = dataclasses.replace(place, settings=dataclasses.replace(place.settings, max_run_seconds=left))
            outcome = yield from _labelled(run_once(limited, inputs, history, session, cancel), number, total)
            if outcome is None:  # refused or failed: its message is on the page
                return
            last, history = outcome, outcome.values["history"]
            if cancel.is_set() or outcome.live.comparison.finished.error:
                why = "it was stopped" if not outcome.timed_out else (
                    f"the page's limit of {place.settings.max_run_seconds:g} seconds for a run was reached")
                break
            finished.append(outcome.live.result())
        if last is not None:
            yield series_end(last.values, finished, total, why)
    finally:
        place.registry.done(session, cancel)


def _labelled(frames, number: int, total: int):
    """A run's frames with "run i of n" over the explanation; Stop stays enabled between the runs."""
    label = f'<div class="series-label">Run {number} of {total}</div>'
    outcome = None
    try:
        while True:
            values = next(frames)
            values = {**values, "explain": label + values.get("explain", "")}
            if number < total and "stop_btn" in values:
                values = {**values, **_running()}
            yield values
    except StopIteration as done:
        outcome = done.value
    return outcome


# shown by the last run's frame already; the page writes the run JSON again, with "pooled", from its "run"
_EXPORTED = ("history_file", "result_file", "summary_md")


def series_end(values: dict, results: list, total: int, why: str | None) -> dict:
    """The series' last frame: the pooled speedup and its interval under the last run's explanation and in
    its table and JSON, and why the series ended early."""
    pooled = pooled_runs(results) if len(results) > 1 else None
    note = (f"The series ended after {len(results)} of {total} runs: {why}." if why else None)
    kept = {name: value for name, value in values.items() if name not in _EXPORTED}
    out = {**kept, "explain": views.explain_html_pooled(values.get("explain", ""), pooled, len(results), total),
           "error": views.error_html(note) if note else ""}
    if pooled is not None:
        out["summary"] = _pooled_rows(values.get("summary"), pooled)
        run = values.get("run")
        if isinstance(run, FinishedRun):  # the session's run is the series' last, the series pooled into it
            out["run"] = run.pooled(pooled)
            out["result"] = out["run"].result.model_dump(mode="json")
    return out


def _pooled_rows(summary, pooled):
    """The last run's table with the pooled figures under it (the table's columns: figure, baseline, speculative)."""
    import pandas as pd

    interval, spread = pooled.speedup_interval, pooled.single_run_spread
    rows = [(f"speedup, {pooled.runs} runs pooled", "", f"{pooled.speedup:.2f}×"),
            (f"speedup 95% interval, {pooled.runs} runs pooled", "", str(interval) if interval else "—"),
            (f"single runs' speedups (lowest–highest)", "", str(spread) if spread else "—")]
    extra = pd.DataFrame(rows, columns=list(summary.columns) if summary is not None else charts.SUMMARY_COLUMNS)
    return extra if summary is None else pd.concat([summary, extra], ignore_index=True)


def _idle(place: RunPlace) -> dict:
    return {"run_btn": gr.update(interactive=place.manager.pair is not None), "stop_btn": gr.update(interactive=False)}


def _prepare(manager: PairManager, prompt, max_tokens, temperature, schedule, session: str = ANONYMOUS):
    """(pair, LiveRun, None) for a run that can start, else (None, None, why not)."""
    pair, preset = manager.pair, manager.preset
    if pair is None:
        return None, None, NOT_READY
    try:
        request = build_request(preset, prompt, max_tokens, temperature)
        schedule = check_schedule(schedule)
    except InputError as exc:
        return None, None, str(exc)
    # a prefix-cache salt per session: one visitor's cached prompt can't speed up (and so reveal) another's
    request = dataclasses.replace(request, cache_salt=session_stem(session))
    decoders = ({role: pair.engines[role].decode for role in ROLES} if preset.prompt_input == "text" else {})
    return pair, LiveRun(preset, request, decoders, schedule, manager.hardware.device, pair.engine_info()), None


def _failed(message: str, idle: dict, history: list) -> dict:
    message = scrub(message)
    # the session's run is gone with it: the stepper, what-if and "Link to this run" have nothing to show
    return {"error": views.error_html(message), "result": {"error": message}, **idle, "history": history,
            "run": None}


def _stream(place: RunPlace, inputs: tuple, session: str, shared_cancel=None):
    """Run on the engines (holding them), yielding redraws; returns the _Outcome. The pair is read under the
    lock (a reload before it was taken replaced it), and every wait has a deadline."""
    settings = place.settings
    outcome = _Outcome()
    if not place.manager.run_lock.acquire(timeout=settings.max_run_seconds + ANSWER_GRACE_S):
        outcome.failure = "The engines stayed busy too long (another run or a bench); try again."
        return outcome
    cancel = shared_cancel or place.registry.new(session)
    stream, abandoned = None, False
    try:
        pair, outcome.live, refusal = _prepare(place.manager, *inputs, session)
        if refusal is not None:
            outcome.failure = refusal
            return outcome
        pair.answer_timeout_s = settings.max_run_seconds + ANSWER_GRACE_S  # a hung engine ends the run
        stream = outcome.live.stream(pair, cancel)  # each event is in live.comparison once yielded
        if (yield from _redraws(place, outcome.live, stream, cancel, outcome)):
            stream = None  # finished: nothing left to abort
    except GeneratorExit:  # the visitor left: Gradio closes this generator, maybe on its event loop
        abandoned = True
        raise
    except PromptError as exc:
        outcome.failure = str(exc)
    except Exception as exc:  # the page stays up; the message says what broke
        outcome.failure = f"The run failed: {type(exc).__name__}: {exc}"
    finally:
        # closed early (browser gone, error): abort both requests and release the engines; off this thread
        # when abandoned, as waiting for the aborted requests to end must not stall the event loop
        release = threading.Thread(target=_release, args=(place, session, cancel, stream, shared_cancel is None),
                                   name="run-cleanup",
                                   daemon=True)
        release.start()
        if not abandoned:
            release.join()
    return outcome


def _release(place: RunPlace, session: str, cancel, stream, own_cancel: bool = True) -> None:
    try:
        if stream is not None:
            _abort(stream, cancel)
    finally:
        if own_cancel:  # a series' Stop event outlives each of its runs
            place.registry.done(session, cancel)
        place.manager.run_lock.release()


def _redraws(place: RunPlace, live: LiveRun, stream, cancel, outcome: _Outcome):
    """Feed the events into `live`, yielding a frame at most UPDATE_HZ times a second, and stop the run at
    the operator's limit. Returns whether the run finished (RunFinished arrived)."""
    last, started, clock = 0.0, time.monotonic(), ChartClock()
    for event in stream:
        if isinstance(event, RunFinished):
            return True
        now = time.monotonic()
        if now - started > place.settings.max_run_seconds and not cancel.is_set():
            outcome.timed_out = True
            cancel.set()
        if now - last >= 1.0 / UPDATE_HZ:  # tables only at the end: a DataFrame costs more than a chart
            last = now
            # the run JSON with the charts: each change of it posts it back to the stepper's and what-if's handlers
            due = clock.due(now)
            yield {**live.frame(place.manager.sampler, with_charts=due), **_running(),
                   **({"result": streaming_result(live)} if due else {})}
    return False


def _running() -> dict:
    return {"error": "", "run_btn": gr.update(interactive=False), "stop_btn": gr.update(interactive=True),
            "replay_btn": gr.update(interactive=False)}


def _abort(stream, cancel) -> None:
    cancel.set()
    try:
        for _ in stream:
            pass
    except Exception:
        pass


def streaming_result(live: LiveRun) -> dict:
    """The `result` output while a run streams: its id and each engine's token ids so far (what API
    clients such as the load test count, rather than parsing the panes' HTML)."""
    c = live.comparison
    return {"run_id": c.run_id, "streaming": True,
            **{role: {"token_ids": list(c.traces[role].token_ids)} for role in (BASELINE, SPECULATIVE)}}


def _finished(place: RunPlace, live: LiveRun, timed_out: bool, history: list, session: str, idle: dict) -> dict:
    # after every run, not only a failed one: an engine that died after its part of the run (or between
    # runs) is reloaded now, so the next visitor gets "not ready" rather than a failed run
    error = live.comparison.finished.error or ""
    reloading = place.manager.reload_if_dead(hung="stopped answering" in error)
    number = (history[-1]["run"] + 1) if history else 1
    history = (history + [live.history_row(number)])[-place.settings.history_rows:]
    clean_old(place.history_dir, place.settings.files_max_age_s)  # sessions gone quiet for an hour
    stem = session_stem(session)
    # this run's files replace the last run's on the page: Gradio's copies of those are linked no more
    drop_served_copies(place.served_dir, (f"history-{stem}.csv", f"run-{stem}.json"))
    path = os.path.join(place.history_dir, f"history-{stem}.csv")  # one a session, overwritten
    history_table(history).to_csv(path, index=False)
    message = _end_message(live, timed_out, reloading, place.settings.max_run_seconds)
    # the session's one run, kept on the server (a gr.State): the replay, stepper, what-if and share link read
    # it, never the run JSON the browser holds
    final = live.final(place.manager.sampler, history, path, message)
    final["explain"] += repeats.repeat_html(history)  # a greedy prompt whose output changed since an earlier run
    return {**final, **idle, "history": history, "run": FinishedRun.of(live, session),
            "replay_btn": gr.update(interactive=live.replayable)}


def _end_message(live: LiveRun, timed_out: bool, reloading: tuple[str, ...], limit_s: float) -> str | None:
    error = live.comparison.finished.error
    reload_note = ""
    if len(reloading) > 1:
        reload_note = " Both engines are being reloaded; Run is enabled again once they are ready."
    elif reloading:
        reload_note = (f" The {reloading[0]} engine is being reloaded (the other stays loaded); Run is enabled "
                       "again once it is ready.")
    if error:
        return scrub(f"The run stopped: {error}.{reload_note}")
    return f"The run was stopped at this page's limit of {limit_s:g} seconds." if timed_out else None


def replay_run(manager: PairManager, run: FinishedRun | None):
    """Both panes and the rate charts race on one clock from the recorded arrival times (sequential runs)."""
    live = run.live if run is not None else None
    if live is None or not live.replayable:
        yield {"replay_btn": gr.update(interactive=False)}
        return
    busy = {"run_btn": gr.update(interactive=False), "replay_btn": gr.update(interactive=False)}
    total, speed = live.comparison.replay_seconds, live.replay_speed()
    started, clock = time.monotonic(), ChartClock()
    while (at := (time.monotonic() - started) * speed) < total:
        yield {**live.frame(at=at, with_charts=clock.due(at / speed)), **busy}
        time.sleep(1.0 / UPDATE_HZ)
    yield {**live.frame(at=total), "run_btn": gr.update(interactive=manager.pair is not None),
           "replay_btn": gr.update(interactive=True)}
