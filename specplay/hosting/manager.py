"""The page's engine pair over its lifetime: load in the background, report progress, switch presets
(only among those the operator allowed), reload after an engine dies, and sample memory while ready.
No Gradio here: the page and the page benchmark both drive it.

A lock and a state beside the pair's own, on purpose, because they cover more than one pair and more than
one request. The pair's lock keeps one request at a time on its engines (a stream, a batch, a swap); the
manager's `run_lock` is held for as long as one visitor holds the engines: a whole comparison, a whole
bench (many batches and engine swaps, which another visitor's run must not slip between), or a switch
while it swaps pairs (when there may be no pair to lock). The pair's status is its engines' (loading,
ready, stopped); the manager's spans pairs: the preset, "loading" before a pair exists and while the old
one shuts down, the error of a pair that never started, and a generation, so a stale loader can't win.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable

from specplay.core.events import PairState
from specplay.core.hardware import Hardware, detect
from specplay.presets.catalog import Preset
from specplay.engine.telemetry import MemorySampler, sampler_for_pair


@dataclass(frozen=True)
class ManagerStatus:
    """A snapshot of the page's engines for the status line, the poller and /health: the pair's PairStatus
    (engine.pair) as the page last read it, plus the preset, the time spent and whether it is recovering."""

    state: PairState  # idle | loading | ready | error: the pair's vocabulary (a StrEnum: compares as its string)
    preset: str
    message: str
    progress: float
    elapsed_s: float | None  # seconds spent loading so far (loading) or in total (ready)
    recovering: bool = False  # loading again after an engine died or hung (retried with backoff)

    @property
    def key(self) -> tuple:
        """What the page shows, coarsely: the poller redraws only when this changes."""
        return self.state, self.preset, self.message, round(self.progress, 2), (
            int(self.elapsed_s // 5) if self.state == PairState.LOADING and self.elapsed_s else None)


class PresetNotAllowed(ValueError):
    pass


RETRY_DELAYS_S = (10.0, 30.0, 90.0)  # between the attempts of a reload after an engine died
WATCH_INTERVAL_S = 2.0  # how often the watcher looks at an idle pair's engine processes
# A load (both engines started and warmed up) not done after this long is taken for hung: the status turns to
# "error" (GET /health then says so) and a new load is accepted. The longest measured: ~500 s for the CPU
# page on a busy 2-core machine without bytecode; a large model on a GPU takes minutes. The warm-up has its
# own, shorter deadline (engine/pair.py's WARMUP_TIMEOUT_S).
LOAD_TIMEOUT_S = 1800.0


def dead_roles(pair) -> tuple[str, ...]:
    """The roles whose engine no longer answers to vLLM (errored) or whose engine-core process is gone."""
    try:
        import psutil
    except ImportError:
        psutil = None

    def alive(role: str) -> bool:
        if not pair.engines[role].is_alive():
            return False
        if psutil is None or not hasattr(pair, "process_ids"):
            return True  # nothing more to look at
        try:
            return all(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
                       for pid in pair.process_ids().get(role, ()))
        except Exception:  # psutil.NoSuchProcess: a process is gone
            return False
    return tuple(role for role in pair.engines if not alive(role))


def error_message(exc: Exception) -> str:
    """A load failure as the page may show it: vLLM's first line, without its pointer to a log or paths."""
    from specplay.hosting.settings import MESSAGE_MAX_CHARS, scrub  # no Gradio there

    return scrub(f"{type(exc).__name__}: {exc}", limit=MESSAGE_MAX_CHARS)


class PairManager:
    def __init__(self, presets: dict[str, Preset], initial: str, hardware: Hardware | None = None,
                 pair_factory: Callable | None = None, log=print, retry_delays: tuple = RETRY_DELAYS_S,
                 on_give_up: Callable | None = None, load_timeout_s: float = LOAD_TIMEOUT_S):
        if initial not in presets:
            raise PresetNotAllowed(f"initial preset {initial!r} is not among the offered presets")
        self.presets = presets
        self.hardware = hardware or detect()
        self._factory = pair_factory
        self._log = log
        self._lock = threading.Lock()  # guards the fields below
        # Held by a run for its whole duration and by a switch while it swaps pairs: a switch never pulls
        # the engines from under a run.
        self.run_lock = threading.Lock()
        self._pair = None
        self._sampler: MemorySampler | None = None
        self._state, self._preset, self._message, self._progress = PairState.IDLE, initial, "", 0.0
        self._started_at: float | None = None
        self._load_seconds: float | None = None
        self._generation = 0  # bumps on each load, so a stale loader thread can't overwrite a newer one
        self.load_timeout_s = load_timeout_s  # read by each load as it starts (an operator may change it)
        self._loading = False  # a load runs (its thread hasn't ended it): its deadline timer may fail it
        # recovery: a reload after an engine died is retried after each delay, then `on_give_up` (the server
        # exits non-zero, for its supervisor to restart it)
        self._retry_delays, self._on_give_up = tuple(retry_delays), on_give_up
        self._recovering, self._attempt = False, 0
        self._cause = ""  # why the engines are being reloaded, said in the status while they are
        self._watcher: threading.Thread | None = None
        self._stop_watching = threading.Event()

    # -- reading ------------------------------------------------------------------------------------------
    def status(self) -> ManagerStatus:
        with self._lock:
            elapsed = (time.monotonic() - self._started_at if self._state == PairState.LOADING and self._started_at
                       else self._load_seconds)
            recovering = self._recovering and self._state != PairState.READY
            message = f"{self._cause}: {self._message}" if recovering and self._cause else self._message
            return ManagerStatus(self._state, self._preset, message, self._progress, elapsed, recovering)

    @property
    def preset(self) -> Preset:
        return self.presets[self._preset]

    @property
    def pair(self):
        """The ready pair, or None while loading / after a failure."""
        with self._lock:
            return self._pair if self._state == PairState.READY else None

    @property
    def sampler(self) -> MemorySampler | None:
        return self._sampler

    # -- loading --------------------------------------------------------------------------------------------
    def load(self, name: str, wait_for_run: float = 0.0, full: bool = False, dead: tuple[str, ...] = ()) -> None:
        """Replace the current pair by one for `name`, loading in a background thread. Raises
        PresetNotAllowed for a preset the operator didn't offer, RuntimeError while a run holds the engines
        (after waiting `wait_for_run` seconds) or while another load is in progress. `full` reloads both
        engines even when the target is shared (after an engine hung); `dead` names engines to start anew
        though their settings stay (after they died: the live one stays loaded)."""
        if name not in self.presets:
            raise PresetNotAllowed(f"preset {name!r} is not offered on this page")
        from specplay.plan.gate import PairRefused, gate

        try:  # the gate every door asks (plan.gate); a factory's engines (remote servers) were checked there
            gate(self.presets[name], self.hardware, remote=self._factory is not None)
        except PairRefused as exc:
            raise PresetNotAllowed(str(exc)) from None
        acquired = (self.run_lock.acquire(timeout=wait_for_run) if wait_for_run
                    else self.run_lock.acquire(blocking=False))
        if not acquired:
            raise RuntimeError("A run is in progress; switch presets when it has finished.")
        try:
            with self._lock:
                if self._state == PairState.LOADING:
                    raise RuntimeError("Engines are already loading; wait until they are ready.")
                old_pair, old_sampler = self._pair, self._sampler
                self._pair = self._sampler = None
                self._generation += 1
                generation = self._generation
                self._state, self._preset, self._message, self._progress = PairState.LOADING, name, "starting", 0.0
                self._started_at, self._load_seconds = time.monotonic(), None
                self._loading = True
        finally:
            self.run_lock.release()
        deadline_s = self.load_timeout_s
        timer = threading.Timer(deadline_s, self._expire, args=(name, generation, deadline_s))
        timer.daemon = True
        timer.start()
        thread = threading.Thread(target=self._load, args=(name, generation, old_pair, old_sampler, full, dead),
                                  name=f"load-{name}", daemon=True)
        thread.start()

    def _report(self, generation: int, message: str, fraction: float) -> None:
        with self._lock:
            if generation == self._generation:
                self._message, self._progress = message, fraction

    def _load(self, name: str, generation: int, old_pair, old_sampler, full: bool = False,
              dead: tuple[str, ...] = ()) -> None:
        if old_sampler is not None:
            old_sampler.stop()
        pair = None
        progress = lambda message, fraction: self._report(generation, message, fraction)  # noqa: E731
        try:
            if old_pair is not None and self._factory is None and not full:
                from specplay.run.pairs import switch_in_place

                if switch_in_place(old_pair, self.presets[name], self.hardware, progress, log=self._log, dead=dead):
                    pair, old_pair = old_pair, None  # an engine stays loaded: the shared target, or the live one
            if old_pair is not None:
                self._report(generation, "shutting down the previous engines", 0.0)
                old_pair.shutdown()
            if pair is None:
                factory = self._factory
                if factory is None:
                    from specplay.run.pairs import open_pair as factory
                pair = factory(self.presets[name], self.hardware, log=self._log)
                pair.start(progress=progress)
            sampler = sampler_for_pair(pair, gpu=self.hardware.device == "gpu").start()
        except Exception as exc:
            for leftover in (pair, old_pair):  # old_pair: a switch in place that failed half-way
                if leftover is not None:
                    leftover.shutdown()
            with self._lock:
                current = generation == self._generation
                if current:
                    self._state, self._message = PairState.ERROR, error_message(exc)
                    self._loading = False
            self._log(f"preset {name} failed to load: {exc}")
            if current and self._recovering:
                self._retry(name, generation)
            return
        with self._lock:
            if generation != self._generation:  # superseded while loading (shutdown): don't leak it
                stale = True
            else:
                stale = False
                self._pair, self._sampler = pair, sampler
                self._state, self._message, self._progress = PairState.READY, "ready", 1.0
                self._load_seconds = time.monotonic() - self._started_at
                self._recovering, self._attempt = False, 0
                self._loading = False
        if stale:
            sampler.stop()
            pair.shutdown()

    def _expire(self, name: str, generation: int, deadline_s: float) -> None:
        """The load's deadline passed: if it is still loading, it failed (an engine core hung while starting or
        warming up). Its thread is left behind: should it ever return, its pair is stale and shut down."""
        with self._lock:
            if generation != self._generation or not self._loading:  # ended, or superseded
                return
            self._generation += 1
            generation = self._generation
            self._state, self._loading = PairState.ERROR, False
            self._message = (f"The engines did not become ready within {deadline_s:g} s (an engine "
                             "stopped answering while loading); load the preset again to retry.")
            recovering = self._recovering
        self._log(f"preset {name}: not ready after {deadline_s:g} s; given up on that load")
        if recovering:
            self._retry(name, generation)

    def reload_if_dead(self, hung: bool = False) -> tuple[str, ...]:
        """If an engine died, start it again, the live one staying loaded; if one stopped answering (`hung`),
        both. Retried with backoff (other users get them back). Returns the roles being reloaded (none: no
        reload)."""
        with self._lock:
            ready = self._state == PairState.READY and self._pair is not None
            roles = tuple(self._pair.engines) if ready and hung else dead_roles(self._pair) if ready else ()
            cause = ("an engine stopped answering" if hung
                     else f"the {' and '.join(roles)} engine stopped" if roles else "")
            if roles:
                self._recovering, self._attempt, self._cause = True, 0, cause
        if not roles:
            return ()
        self._log(f"{cause}; reloading {'both engines' if hung else 'it'}")
        try:  # a hung engine may still hold its request: both fresh; a dead one is replaced, the other stays
            self.load(self._preset, wait_for_run=5, full=hung, dead=roles)
        except RuntimeError as exc:  # already reloading (the watcher was first), or a run holds the engines
            self._log(f"reload not started here: {exc}")
            return roles if self.status().recovering else ()
        return roles

    def _retry(self, name: str, generation: int) -> None:
        """A reload failed: try again after the next delay, or give up (the process should exit)."""
        if self._attempt >= len(self._retry_delays):
            self._log(f"preset {name}: reload failed {self._attempt + 1} times; giving up")
            with self._lock:
                self._recovering = False  # /health: "error", for good
            if self._on_give_up is not None:
                self._on_give_up()
            return
        delay = self._retry_delays[self._attempt]
        self._attempt += 1
        with self._lock:
            self._state, self._message = PairState.LOADING, f"reload failed; retrying in {delay:g} s"
        self._log(f"preset {name}: reload failed; retry {self._attempt} in {delay:g} s")

        def again():
            if self._stop_watching.wait(delay) or generation != self._generation:
                return
            with self._lock:
                self._state = PairState.ERROR  # load() refuses while "loading"
            try:
                self.load(name, wait_for_run=60, full=True)
            except RuntimeError as exc:
                self._log(f"retry not started: {exc}")
        threading.Thread(target=again, name=f"retry-{name}", daemon=True).start()

    def watch(self, interval_s: float = WATCH_INTERVAL_S) -> "PairManager":
        """Start a thread that notices a dead engine while idle (its process gone) and reloads it."""
        def loop():
            while not self._stop_watching.wait(interval_s):
                if not self.run_lock.locked():  # a run in progress notices (and reports) it itself
                    try:
                        self._check_servers()
                        self.reload_if_dead()
                    except Exception as exc:  # the watcher must outlive whatever a check raises
                        self._log(f"watcher: {type(exc).__name__}: {exc}")
        if self._watcher is None:
            self._watcher = threading.Thread(target=loop, name="engine-watcher", daemon=True)
            self._watcher.start()
        return self

    def _check_servers(self) -> None:
        """Ask the ready pair's servers whether they are up (remote mode: GET /health), outside the lock the
        status is read under: a server that went away while nobody ran is found now, not by a visitor's run.
        In-process engines have nothing to ask (their processes are looked at by dead_roles)."""
        pair = self.pair
        for engine in list(pair.engines.values()) if pair is not None else ():
            check = getattr(engine, "check_alive", None)
            if check is not None:
                check()

    def shutdown(self) -> None:
        self._stop_watching.set()
        with self._lock:
            self._generation += 1
            pair, sampler = self._pair, self._sampler
            self._pair = self._sampler = None
            self._state, self._message = PairState.IDLE, "shut down"
        if sampler is not None:
            sampler.stop()
        if pair is not None:
            pair.shutdown()
