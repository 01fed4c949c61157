"""A soak of a running page: many runs from a few visitors (gradio_client, as in `visitors`), some stopped
with Stop, some abandoned mid-run (the job cancelled and the session closed without reading the result, as
a closed tab leaves it), while the page's process family (the app and its engine processes) and the files
it writes are sampled every few runs. Shared by `scripts/soak.py` (which starts the page) and the CI test
(which reuses the suite's page). No engines and no Gradio server here.

The verdict compares the sample at the end of the warm-up with the last one: memory, open files, threads
and disk may not keep growing once the page has served its first runs (caches filled, pools grown).
"""

from __future__ import annotations

import concurrent.futures
import os
import stat
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from loadtest import visitors as vis

FULL, STOP, ABANDON = "full", "stop", "abandon"
MB = 1 << 20


@dataclass(frozen=True)
class Plan:
    runs: int = 1000
    visitors: int = 4
    max_tokens: int = 32
    stop_every: int = 5  # every 5th run is stopped with Stop once it streams
    abandon_every: int = 7  # every 7th is abandoned mid-run (a run both 5th and 7th is abandoned)
    # max tokens of the runs to be stopped or abandoned (0: max_tokens), and their prompt ("": the visitor's):
    # long enough that Stop lands while they stream, not after a short run has ended (then read as a full
    # run: nothing to stop). Max tokens alone don't make a run long: the visitors' one-sentence answers end
    # at their end-of-sequence token after ~30 (a clean-clone run, 2026-12-07: all 6 to be stopped ended so,
    # at 384 max tokens, before a frame reached the client)
    interrupted_tokens: int = 0
    interrupted_prompt: str = ""
    sample_every: int = 100
    warmup_runs: int = 200
    run_timeout_s: float = 300.0
    schedule: str = "sequential"

    def kind(self, number: int) -> str:
        """What run `number` (1-based, in the order runs are handed out) does."""
        if self.abandon_every and number % self.abandon_every == 0:
            return ABANDON
        if self.stop_every and number % self.stop_every == 0:
            return STOP
        return FULL

    def tokens(self, kind: str) -> int:
        return self.interrupted_tokens if kind != FULL and self.interrupted_tokens else self.max_tokens

    def prompt(self, kind: str, visitors: str) -> str:
        """The prompt of a run of `kind` by a visitor whose own prompt is `visitors`."""
        return self.interrupted_prompt if kind != FULL and self.interrupted_prompt else visitors


@dataclass(frozen=True)
class Limits:
    """How much may grow between the warm-up's sample and the last. Why these numbers: docs/benchmarks.md
    ("A long soak"); in short, a leak of a run's objects (its token lists, frames, a LiveRun: tens of KB
    each) over 800 runs crosses them, the allocator's and the engines' noise (a few MB) does not."""

    rss_mb: float = 50.0  # the app and its engine processes together
    rss_pct: float = 5.0
    # The page keeps a session's history CSV (at most history_rows = 100 rows, ~15 KB) and its last run's JSON
    # (a few KB), each twice (its file and Gradio's copy), for files_max_age_s (an hour): disk may grow by
    # that much per session opened, and each live session's CSV until its cap; never by a copy per run.
    disk_bytes_per_session: float = 64 * 1024
    tmp_entries: int = 0  # new entries in the page's temp folder (a socket, a file) once warm
    fds: int = 16  # open descriptors of the family: the visitors' connections come and go (±6 seen)
    threads: int = 16  # a thread a run kept would be hundreds


def tree_bytes(root: Path) -> tuple[int, int]:
    """(bytes, files) of the regular files under `root` (symlinks not followed: the cache's shared models)."""
    total = count = 0
    for folder, _, files in _walk(root):
        for name in files:
            try:
                info = os.lstat(os.path.join(folder, name))
            except OSError:
                continue  # deleted meanwhile (the page cleans its folders)
            if stat.S_ISREG(info.st_mode):
                total += info.st_size
                count += 1
    return total, count


def entries(root: Path) -> int:
    """Everything under `root` (files, folders, sockets), symlinks not followed."""
    return sum(len(folders) + len(files) for _, folders, files in _walk(root))


def _walk(root: Path):
    # os.walk skips a folder it can't list; Path.rglob raised when the page deleted one of Gradio's cache
    # folders mid-listing, which killed a soak visitor's thread in the middle of a sample
    return os.walk(root, followlinks=False)


def family(app_pid: int) -> list:
    import psutil

    app = psutil.Process(app_pid)
    return [app, *app.children(recursive=True)]


def process_sample(app_pid: int) -> dict:
    """RSS of the app and of its children (the engine processes), open descriptors and threads of all."""
    import psutil

    rss_app = rss_children = anon = fds = threads = 0
    processes = 0
    for i, p in enumerate(family(app_pid)):
        try:
            with p.oneshot():
                memory, n_fds, n_threads = p.memory_info(), p.num_fds(), p.num_threads()
        except psutil.Error:
            continue  # ended between the listing and the reading
        processes += 1
        rss = memory.rss
        # file-backed and shared pages (the mapped weights) come and go as the kernel reclaims them on a busy
        # machine; what is left, anonymous memory, is where a leak shows
        anon += memory.rss - getattr(memory, "shared", 0)
        fds, threads = fds + n_fds, threads + n_threads
        if i == 0:
            rss_app = rss
        else:
            rss_children += rss
    return {"rss_app_mb": round(rss_app / MB, 1), "rss_children_mb": round(rss_children / MB, 1),
            "rss_mb": round((rss_app + rss_children) / MB, 1), "anon_mb": round(anon / MB, 1), "fds": fds, "threads": threads,
            "processes": processes}


@dataclass
class Sampler:
    """Samples of the page's process family and folders: `cache_dirs` (the page's files) and `tmp_dir` (the
    temp folder the page was given, or None)."""

    app_pid: int
    cache_dirs: list
    tmp_dir: Path | None = None
    samples: list = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def take(self, runs_done: int, t0: float) -> dict:
        with self._lock:
            sample = {"runs": runs_done, "t_s": round(time.time() - t0, 1), **process_sample(self.app_pid)}
            cache = [tree_bytes(Path(d)) for d in self.cache_dirs]
            sample["cache_bytes"], sample["cache_files"] = sum(b for b, _ in cache), sum(n for _, n in cache)
            if self.tmp_dir is not None:
                sample["tmp_bytes"], sample["tmp_files"] = tree_bytes(self.tmp_dir)
                sample["tmp_entries"] = entries(self.tmp_dir)
            self.samples.append(sample)
            return sample


@dataclass
class Soak:
    """V visitors taking run numbers 1..N from one counter, each run `Plan.kind` says; the sampler runs
    after every `sample_every`-th finished run (and once before the first)."""

    url: str
    plan: Plan
    sampler: Sampler
    prompts: list = field(default_factory=list)
    records: list = field(default_factory=list)
    on_sample: object = None
    stop_by: float | None = None  # time.time() after which no new run is handed out (a bounded soak)
    sessions: int = 0  # sessions opened so far (each visitor's first, and one after each abandoned run)
    session_hashes: list = field(default_factory=list)
    _next: int = 0
    _done: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def run(self) -> None:
        self.prompts = self.prompts or vis.visitor_prompts(self.plan.visitors)
        self.t0 = time.time()
        self._sample(0)
        workers = [threading.Thread(target=self._visitor, args=(i,), daemon=True) for i in range(self.plan.visitors)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        if self.sampler.samples[-1]["runs"] != self._done:  # cut short (stop_by): the end is sampled too
            self._sample(self._done)

    def _take_number(self) -> int | None:
        with self._lock:
            if self._next >= self.plan.runs or (self.stop_by is not None and time.time() > self.stop_by):
                return None
            self._next += 1
            return self._next

    def _finish(self, record: dict) -> None:
        with self._lock:
            self.records.append(record)
            self._done += 1
            done = self._done
        if done % self.plan.sample_every == 0 or done == self.plan.runs:
            self._sample(done)

    def _sample(self, done: int) -> None:
        sample = self.sampler.take(done, self.t0)
        sample["sessions"] = self.sessions
        if self.on_sample is not None:
            self.on_sample(sample)

    def _open(self, tries: int = 5):
        for i in range(tries):  # a busy page may be slow to hand out its config: a few tries
            try:
                c = vis.client(self.url)
                break
            except Exception:
                if i == tries - 1:
                    raise
                time.sleep(2)
        with self._lock:
            self.sessions += 1
            self.session_hashes.append(c.session_hash)
        return c

    def _visitor(self, index: int) -> None:
        c = self._open()
        try:
            while (number := self._take_number()) is not None:
                kind = self.plan.kind(number)
                started = time.time()
                try:
                    record = one_run(c, self.plan.prompt(kind, self.prompts[index]), self.plan, kind)
                except Exception as exc:  # recorded: the verdict counts them
                    record = {"outcome": "exception", "error": f"{type(exc).__name__}: {str(exc)[:200]}"}
                if kind == ABANDON:  # that tab is gone: the visitor comes back in a new one
                    vis.close_client(c)
                    c = self._open()
                self._finish({"run": number, "visitor": index, "kind": kind,
                              "seconds": round(time.time() - started, 2), **record})
        finally:
            vis.close_client(c)


REFUSED_WHILE_PENDING = 400  # the page's answer to a join while the session's run is pending (guard.ONE_PENDING)


def one_run(c, prompt: str, plan: Plan, kind: str) -> dict:
    """One run of `kind`: {"outcome", "tokens", "error"}. A run gradio_client lost at its submit is submitted
    again once the page takes the session's next run (`submit_lost` in the record).

    The loss is press_stop's race, hit by a run's own submit (a clean-clone run, 2026-12-07: a run cancelled
    0.1 s after its submit, the same visitor's next join refused with 400 while the page still ran the first):
    gradio_client registered the run on an event stream the page was closing, and that close cancelled the job
    client-side. The page had the run and ran it unread; its next join from the session is refused until then."""
    import httpx

    deadline, lost = time.time() + plan.run_timeout_s, False
    while True:
        try:
            record = _one_run(c, prompt, plan, kind)
            return {**record, "submit_lost": True} if lost else record
        except concurrent.futures.CancelledError:
            if lost or time.time() > deadline:  # a second loss is no race: reported
                raise
            lost = True
        except httpx.HTTPStatusError as exc:  # the lost run still pending on the page: its turn comes
            if not lost or exc.response.status_code != REFUSED_WHILE_PENDING or time.time() > deadline:
                raise
            time.sleep(1.0)


def _one_run(c, prompt: str, plan: Plan, kind: str) -> dict:
    t0 = time.time()
    job = c.submit(prompt, plan.tokens(kind), 0.0, plan.schedule, api_name="/run")
    if kind != FULL and not wait_streaming(job, plan.run_timeout_s):
        kind = FULL  # finished before it streamed: nothing to stop (read as a full run)
    # when the client saw the run stream and when Stop was answered, from the submit: where a slow run's time went
    times = {"streaming_s": round(time.time() - t0, 2)} if kind != FULL else {}
    if kind == ABANDON:
        job.cancel()  # the run is left, never read; the caller closes the session
        return {"outcome": "abandoned", "tokens": None, "error": None, **times}
    lost = kind == STOP and not press_stop(c)
    if kind == STOP:
        times["stop_answered_s"] = round(time.time() - t0, 2)
    outputs = dict(zip(vis.API_OUTPUTS, job.result(timeout=plan.run_timeout_s)))
    got = vis.outcome(outputs)
    result_ok = not got["error"] and bool(got["baseline"])
    full = result_ok and got["identical"] is True
    if lost:  # Stop was queued after the run had ended (press_stop): the run must read as whole, not stopped
        outcome = "stopped" if full and not (outputs.get("result") or {}).get("cancelled") else "error"
    elif kind == STOP:
        outcome = "stopped" if result_ok or got["error"] is None else "error"
    else:
        outcome = "ok" if full else "error"
    return {"outcome": outcome, "tokens": len(got["baseline"]), "error": got["error"], **times,
            **({"stop_reply_lost": True} if lost else {})}


def press_stop(c) -> bool:
    """Press Stop through the API: False when gradio_client lost Stop's own reply (the run is unaffected).

    That loss is a race between Gradio 6.31 and gradio_client 2.7, not the page's doing. A run's last
    message leaves the session with nothing pending, so the server closes the session's event stream
    (gradio/routes.py, sse_stream: CloseStreamMessage when pending_event_ids_session is empty); a Stop sent
    before this client has read that close is registered on the old stream (client.py, send_data:
    stream_open still True), so its messages go to a stream nobody reads, and the close then hands Stop's
    job a None (close_stream callback), which gradio_client raises as concurrent.futures.CancelledError
    (utils.py, stream_sse_v1plus). The page had already ended the run, so there was nothing to stop. Only
    that exception, and only from the Stop call: the run's own result is still read and judged."""
    try:
        c.predict(api_name="/stop")
    except concurrent.futures.CancelledError:
        return False
    return True


def wait_streaming(job, timeout_s: float) -> bool:
    """Until the run streams a baseline token (True) or ends first (False)."""
    deadline = time.time() + timeout_s
    while time.time() < deadline and not job.done():
        updates = job.outputs()
        if updates and vis.tokens_so_far(updates[-1][vis.API_OUTPUTS.index("result")], "baseline") >= 1:
            return True
        time.sleep(0.05)
    return False


def verdict(samples: list, records: list, plan: Plan, limits: Limits = Limits()) -> dict:
    """Growth from the sample at the end of the warm-up (the first with at least `warmup_runs` runs) to the
    last, checked against `limits`; and every run ended with an outcome (no exception, no hang)."""
    warm = next((s for s in samples if s["runs"] >= plan.warmup_runs), None)
    last = samples[-1] if samples else None
    outcomes: dict[str, int] = {}
    for r in records:
        outcomes[f"{r['kind']}:{r['outcome']}"] = outcomes.get(f"{r['kind']}:{r['outcome']}", 0) + 1
    out: dict = {"outcomes": outcomes, "runs_recorded": len(records), "checks": {},
                 "stop_replies_lost": sum(1 for r in records if r.get("stop_reply_lost"))}  # see press_stop
    checks = out["checks"]
    numbers = sorted(r["run"] for r in records)
    checks["every_run_recorded"] = numbers == list(range(1, len(records) + 1))  # each run handed out ended
    checks["no_exception_or_error"] = not any(r["outcome"] in ("exception", "error") for r in records)
    if warm is None or last is None or last is warm:
        out["growth"] = None
        checks["warm_sample_before_the_last"] = False
        return _passed(out)
    runs = max(1, last["runs"] - warm["runs"])
    disk = (last["cache_bytes"] - warm["cache_bytes"]) + (last.get("tmp_bytes", 0) - warm.get("tmp_bytes", 0))
    sessions = last.get("sessions", 0) - warm.get("sessions", 0)  # opened after the warm-up's sample
    growth = out["growth"] = {
        "from_runs": warm["runs"], "to_runs": last["runs"],
        "rss_mb": round(last["rss_mb"] - warm["rss_mb"], 1),
        "rss_pct": round(100 * (last["rss_mb"] - warm["rss_mb"]) / max(warm["rss_mb"], 1e-9), 2),
        "anon_mb": round(last.get("anon_mb", 0) - warm.get("anon_mb", 0), 1),
        "anon_pct": round(100 * (last.get("anon_mb", 0) - warm.get("anon_mb", 0)) / max(warm.get("anon_mb", 0), 1e-9), 2),
        "disk_bytes": disk, "disk_bytes_per_run": round(disk / runs, 1), "sessions_opened": sessions,
        "disk_budget_bytes": int(limits.disk_bytes_per_session * (sessions + plan.visitors)),
        "tmp_entries": last.get("tmp_entries", 0) - warm.get("tmp_entries", 0),
        "fds": last["fds"] - warm["fds"], "threads": last["threads"] - warm["threads"],
    }
    checks["rss_bounded"] = growth["rss_mb"] <= limits.rss_mb and growth["rss_pct"] <= limits.rss_pct
    checks["anon_bounded"] = growth["anon_mb"] <= limits.rss_mb and growth["anon_pct"] <= limits.rss_pct
    checks["disk_bounded"] = disk <= growth["disk_budget_bytes"]
    checks["no_new_temp_entries"] = growth["tmp_entries"] <= limits.tmp_entries
    checks["fds_bounded"] = growth["fds"] <= limits.fds
    checks["threads_bounded"] = growth["threads"] <= limits.threads
    out["limits"] = limits.__dict__
    return _passed(out)


def _passed(out: dict) -> dict:
    out["passed"] = all(out["checks"].values())
    return out


COLUMNS = ("runs", "t_s", "sessions", "rss_mb", "anon_mb", "rss_app_mb", "rss_children_mb", "cache_bytes", "cache_files", "tmp_bytes",
           "tmp_entries", "fds", "threads")


def table(samples: list) -> str:
    """The samples as a Markdown table (the columns a sample has)."""
    cols = [c for c in COLUMNS if any(c in s for s in samples)]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(s.get(c, "")) for c in cols) + " |" for s in samples]
    return "\n".join(lines)
