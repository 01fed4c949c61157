"""Simulated visitors on a running page, through its HTTP API (gradio_client), as browsers would use it:
the client side of the load test, shared by `scripts/load_test.py` and the CI test. No engines and no
Gradio server here: only gradio_client, talking to a page that is already up.

Each visitor is its own gradio_client session (its own queue entry, Stop and history), presses Run once
with its own prompt, and records what it saw, timed on this side as the messages arrive:

- `clicked_at`: the visitor pressed Run (the join request is sent);
- `joined_at`: the page accepted the run into its queue (the join request returned);
- `started_at`: the page started the run (Gradio's `process_starts`);
- `first_token_at`: the first update with a baseline token in it;
- `finished_at`: the run's last message.

Visitors press Run in order: either each once the page has accepted the previous one (the queue's order
is then certainly theirs) or a fixed short interval apart, so that all of them wait in the queue at once
(`Visitors.start`). gradio_client reads each job's messages every 50 ms, and on a loaded machine later and
in bunches, so these times are what a visitor saw, not the page's own: first come, first served is judged
on the page's run numbers instead (see `fifo`).
"""

from __future__ import annotations

import html
import re
import threading
import time
from dataclasses import dataclass, field

from specplay.core import stats
from specplay.page.live_run import API_OUTPUTS

# One topic per visitor: distinct prompts, so a stream delivered to the wrong visitor shows up as another
# prompt's answer.
TOPICS = ["tea", "rain", "chess", "bread", "maps", "owls", "bikes", "glass", "salt", "kites", "volcanoes",
          "honey", "bridges", "comets", "violins", "cacti", "lighthouses", "origami", "penguins", "clocks",
          "deserts", "coral", "trains", "mushrooms", "magnets", "rivers", "candles", "wolves", "pianos",
          "tides", "lanterns", "bees", "glaciers", "paper", "dolphins", "marbles", "windmills", "silk",
          "cheese", "thunder", "compasses", "ferns", "castles", "pepper", "satellites", "snails", "mirrors",
          "canoes", "tulips", "caves"]
ENGINE_FAILED = "engine failed"  # what the page says to the run an engine died under ("the baseline engine failed")
NOT_READY = "The engines are not ready yet"  # what it says to runs queued while the engines reload
FIFO_TOLERANCE_S = 0.1  # two messages' arrival times are good to ~0.05 s each (gradio_client's polling),
# on an idle client machine; the page's own run ids are what FIFO is judged on (see `fifo`)


def visitor_prompts(n: int) -> list[str]:
    """n distinct short prompts."""
    out = []
    for i in range(n):
        topic = TOPICS[i % len(TOPICS)]
        suffix = f" (visitor {i})" if i >= len(TOPICS) else ""
        out.append(f"In one sentence, what is special about {topic}?{suffix}")
    return out


def client(url: str, headers: dict | None = None):
    """A gradio_client session of its own: one visitor (`headers` sent with each request: X-Forwarded-For,
    as a proxy would add it). Files the page offers are not downloaded."""
    from gradio_client import Client

    return Client(url, verbose=False, download_files=False, analytics_enabled=False, headers=headers)


def run_once(c, prompt: str, max_tokens: int, temperature: float = 0.0, schedule: str = "sequential",
             timeout_s: float = 600.0) -> dict:
    """One run, waited for (at most `timeout_s`): every output of the run route by name."""
    job = c.submit(prompt, max_tokens, temperature, schedule, api_name="/run")
    return dict(zip(API_OUTPUTS, job.result(timeout=timeout_s)))


def plain(message_html) -> str:
    """The page's error box as text ("" when there is none)."""
    text = html.unescape(re.sub(r"<[^>]+>", "", str(message_html or "")))
    return text.replace("⚠", "").strip()


def outcome(outputs: dict) -> dict:
    """What a visitor got: error text, and each engine's token ids."""
    result = outputs.get("result") or {}
    return {
        "error": plain(outputs.get("error")) or (result.get("error") if isinstance(result, dict) else None) or None,
        "baseline": list((result.get("baseline") or {}).get("token_ids") or []),
        "speculative": list((result.get("speculative") or {}).get("token_ids") or []),
        "identical": result.get("identical"),
        "ttft_s": (result.get("baseline") or {}).get("ttft_s"),
        "run": _run_number(result.get("run_id")),
    }


def _run_number(run_id) -> int | None:
    """The page's run id ("run-12") as a number: runs are numbered in the order they take the engines."""
    try:
        return int(str(run_id).rsplit("-", 1)[1])
    except (IndexError, ValueError):
        return None


def solo_runs(c, prompts: list[str], max_tokens: int, schedule: str = "sequential") -> dict[str, dict]:
    """Each prompt run alone (nothing else queued): the reference every later run of it must equal."""
    return {p: outcome(run_once(c, p, max_tokens, schedule=schedule)) for p in prompts}


def error_kind(error: str | None) -> str | None:
    if not error:
        return None
    if ENGINE_FAILED in error:
        return "engine_failed"
    if NOT_READY in error:
        return "not_ready"
    return "other"


@dataclass
class Visit:
    index: int
    prompt: str
    client: object = None
    job: object = None
    clicked_at: float | None = None
    joined_at: float | None = None
    started_at: float | None = None
    first_token_at: float | None = None
    finished_at: float | None = None
    places: list = field(default_factory=list)  # (queue size, rank) from each of the page's queue updates
    baseline_seen: int = 0  # tokens in the latest update's panes
    speculative_seen: int = 0
    got: dict | None = None  # outcome() of the final outputs
    exception: str | None = None
    raised: object = field(default=None, repr=False)  # the exception (a refused join: the page's message)
    _pending_token: bool = field(default=False, repr=False)

    @property
    def done(self) -> bool:
        return self.got is not None or self.exception is not None

    @property
    def error(self) -> str | None:
        return self.exception or (self.got or {}).get("error")

    def equals(self, solo: dict) -> bool:
        g = self.got or {}
        return (not self.error and g.get("identical") is True and g.get("baseline") == solo["baseline"]
                and g.get("speculative") == solo["speculative"] and bool(solo["baseline"]))

    def row(self, t0: float, solo: dict | None = None) -> dict:
        rel = lambda t: None if t is None else round(t - t0, 3)  # noqa: E731
        return {
            "visitor": self.index, "prompt": self.prompt,
            "clicked_s": rel(self.clicked_at), "joined_s": rel(self.joined_at), "started_s": rel(self.started_at),
            "first_token_s": rel(self.first_token_at), "finished_s": rel(self.finished_at),
            "queue_wait_s": _diff(self.started_at, self.clicked_at),
            "ttft_s": _diff(self.first_token_at, self.clicked_at),
            "engine_ttft_s": (self.got or {}).get("ttft_s"), "run": (self.got or {}).get("run"),
            "error": self.error, "error_kind": "exception" if self.exception else error_kind(self.error),
            "equal_to_solo": self.equals(solo) if solo is not None else None,
            "tokens": len((self.got or {}).get("baseline") or []),
            "places": [list(p) for p in self.places],
        }


def _diff(a, b):
    return None if a is None or b is None else round(a - b, 3)


class Visitors:
    """n visitors pressing Run at nearly the same moment. `start()` joins them in order; `watch()` follows
    every run until all are done (or the deadline), calling `on_tick(visits)` between reads."""

    def __init__(self, url: str, prompts: list[str], max_tokens: int, schedule: str = "sequential",
                 indices: list[int] | None = None):
        """`indices`: the visitors' numbers (increasing: the order they join in); default 0, 1, 2, ..."""
        self.url, self.max_tokens, self.schedule = url, max_tokens, schedule
        indices = list(range(len(prompts))) if indices is None else indices
        self.visits = [Visit(i, p) for i, p in zip(indices, prompts)]

    def connect(self) -> None:
        """One session per visitor, opened before the clock starts (each reads the page's config)."""
        for v in self.visits:
            v.client = client(self.url)

    def start(self, spacing_s: float | None = None, join_timeout_s: float = 60.0) -> None:
        """Every visitor presses Run, in order. `spacing_s` None: each once the page has accepted the
        previous one's run into its queue (the order is certain, but on a busy page joining takes a while);
        otherwise one every `spacing_s` seconds without waiting, so all of them are queued at once."""
        for i, v in enumerate(self.visits):
            v.clicked_at = time.time()
            v.job = v.client.submit(v.prompt, self.max_tokens, 0.0, self.schedule, api_name="/run")
            deadline = v.clicked_at + (spacing_s if spacing_s is not None else join_timeout_s)
            while time.time() < deadline:
                for w in self.visits[:i + 1]:
                    if w.joined_at is None and _joined(w):
                        w.joined_at = time.time()
                if spacing_s is None and (v.joined_at is not None or v.job.done()):
                    break
                time.sleep(0.002)

    def watch(self, deadline: float, on_tick=None, poll_s: float = 0.02) -> None:
        """Follow every run until all are done or `deadline` (time.time()); unfinished ones get an
        exception saying they never finished."""
        while time.time() < deadline:
            for v in self.visits:
                if not v.done:
                    self._read(v)
            if on_tick is not None:
                on_tick(self.visits)
            if all(v.done for v in self.visits):
                return
            time.sleep(poll_s)
        for v in self.visits:
            if not v.done:
                v.exception = "no result before the deadline (a hang)"

    def _read(self, v: Visit) -> None:
        if v.joined_at is None and _joined(v):
            v.joined_at = time.time()
        updates = v.job.communicator.updates
        while True:
            try:
                update = updates.get_nowait()
            except Exception:  # empty
                break
            if getattr(update, "type", None) == "output" and not hasattr(update, "code"):
                values = dict(zip(API_OUTPUTS, update.outputs)) if isinstance(update.outputs, (list, tuple)) else {}
                v.baseline_seen = max(v.baseline_seen, tokens_so_far(values.get("result"), "baseline"))
                v.speculative_seen = max(v.speculative_seen, tokens_so_far(values.get("result"), "speculative"))
                if v.baseline_seen and v.first_token_at is None:
                    v._pending_token = True  # timed by the status message that follows it
                continue
            code = getattr(getattr(update, "code", None), "value", None)
            at = update.time.timestamp() if getattr(update, "time", None) else time.time()
            if code == "IN_QUEUE" and update.rank is not None and update.queue_size is not None:
                v.places.append((update.queue_size, update.rank))
            if code in ("PROCESSING", "ITERATING", "FINISHED") and v.started_at is None:
                v.started_at = at
            if v._pending_token:
                v.first_token_at, v._pending_token = at, False
            if code == "FINISHED":
                v.finished_at = at
        if v.job.done():
            try:
                v.got = outcome(dict(zip(API_OUTPUTS, v.job.result(timeout=0))))
            except Exception as exc:
                v.exception, v.raised = f"{type(exc).__name__}: {str(exc)[:300]}", exc
            if v.finished_at is None:
                v.finished_at = time.time()

    def close(self) -> None:
        """End every session (each close waits up to a second for its heartbeat thread: all at once)."""
        closers = [threading.Thread(target=close_client, args=(v.client,), daemon=True) for v in self.visits if v.client]
        for t in closers:
            t.start()
        for t in closers:
            t.join(timeout=5)


def close_client(c) -> None:
    try:
        c.close()
    except Exception:
        pass


def _joined(v: Visit) -> bool:
    """The join request has returned once the job knows its event id: the page has queued the run."""
    return v.job.communicator.event_id is not None


def tokens_so_far(result, role: str) -> int:
    """Tokens `role`'s engine has produced, from the run's `result` output (JSON: while the run streams,
    each engine's token ids so far; at the end, the whole result)."""
    side = result.get(role) if isinstance(result, dict) else None
    return len(side.get("token_ids") or []) if isinstance(side, dict) else 0


def fifo(visits: list[Visit], joins_ordered: bool = False, tolerance_s: float = FIFO_TOLERANCE_S) -> dict:
    """First come, first served: runs take the engines in the order the page queued them. Judged on the
    page's own messages, not on arrival times: Gradio tells every waiting visitor its place in the queue
    (rank, with the queue's size) whenever the queue changes, and the page numbers runs as they take the
    engines (`run_id`). Once nobody joins any more, each start sends every waiting visitor its new place:
    a picture of the whole queue (each waiting visitor one rank, ranks 0..size-1); in every such picture
    the runs must be numbered in rank order. With `joins_ordered` (each visitor pressed Run once the page had accepted the previous one) the
    runs must also be numbered in the visitors' order. Runs refused before the engines (engines not ready,
    bad input) carry no number and are left out.

    `client_view`: what the visitors saw (a later visitor's run reported started more than `tolerance_s`
    before an earlier one's, or before the previous run was reported finished). Messages reach a loaded
    client late and in bunches, so this view is reported, not judged."""
    run = {v.index: (v.got or {}).get("run") for v in visits if (v.got or {}).get("run") is not None}
    by_size: dict[int, dict[int, set]] = {}
    for v in visits:
        for size, rank in _after_last_join(v.places):
            by_size.setdefault(size, {}).setdefault(v.index, set()).add(rank)
    snapshots, inversions, checked = 0, 0, 0
    largest = 0
    for size, seen in by_size.items():
        if len(seen) != size or any(len(r) != 1 for r in seen.values()):
            continue  # not one picture of the whole queue (a join or a start in between)
        places = {index: next(iter(r)) for index, r in seen.items()}
        if sorted(places.values()) != list(range(size)):
            continue
        numbers = [run[i] for i in sorted(places, key=places.get) if i in run]
        snapshots += 1
        largest = max(largest, len(numbers))
        checked += max(0, len(numbers) - 1)
        inversions += sum(1 for a, b in zip(numbers, numbers[1:]) if b < a)
    in_order = [run[v.index] for v in sorted(visits, key=lambda v: v.index) if v.index in run]
    order_inversions = sum(1 for a, b in zip(in_order, in_order[1:]) if b < a)
    kept = inversions == 0 and (order_inversions == 0 if joins_ordered else True)
    return {"kept": kept, "verified": checked > 0 or (joins_ordered and len(in_order) > 1),
            "runs_on_engines": len(run), "queue_snapshots": snapshots, "largest_snapshot": largest,
            "pairs_checked": checked, "inversions": inversions,
            "joins_ordered": joins_ordered, "inversions_against_press_order": order_inversions,
            "order": [i for i in sorted(run, key=run.get)], "client_view": _client_view(visits, tolerance_s)}


def _after_last_join(places: list) -> list:
    """A visitor's last places, while only runs starting changed the queue (each one place nearer, in a queue
    one shorter): the queue's pictures from when nobody joined any more. Earlier ones mix pictures taken
    between joins, which can share a queue size."""
    tail = places[-1:]
    for size, rank in reversed(places[:-1]):
        if (size, rank) != (tail[0][0] + 1, tail[0][1] + 1):
            break
        tail.insert(0, (size, rank))
    return tail


def _client_view(visits: list[Visit], tolerance_s: float) -> dict:
    started = sorted((v for v in visits if v.started_at is not None), key=lambda v: v.index)
    late, worst, latest = 0, 0.0, None
    for v in started:
        if latest is not None:
            late += v.started_at < latest - tolerance_s
            worst = max(worst, latest - v.started_at)
        latest = v.started_at if latest is None else max(latest, v.started_at)
    by_start = sorted(started, key=lambda v: v.started_at)
    overlaps = sum(1 for a, b in zip(by_start, by_start[1:])
                   if a.finished_at is not None and b.started_at < a.finished_at - tolerance_s)
    return {"runs_started": len(started), "inversions": late, "overlaps": overlaps,
            "worst_inversion_s": round(worst, 3), "tolerance_s": tolerance_s}


def percentile(values: list[float], q: float) -> float | None:
    """Nearest rank, rounded to ms: a wait one of the visitors actually had (p95 of 50 is the 48th)."""
    value = stats.percentile(values, q, stats.NEAREST_RANK)
    return None if value is None else round(value, 3)


def most_waiting(visits: list[Visit]) -> int:
    """The most visitors waiting in the queue at one moment (Run pressed, their run not started yet)."""
    spans = [(v.clicked_at, v.started_at or v.finished_at or float("inf")) for v in visits if v.clicked_at]
    return max((sum(1 for a, b in spans if a <= t < b) for t, _ in spans), default=0)


def summary(visits: list[Visit], solo: dict[str, dict], joins_ordered: bool = False) -> dict:
    """The figures the load test reports (rows: `Visit.row`), over the runs that completed: queue wait =
    Run pressed → the run starts; TTFT = Run pressed → the first baseline token reaches the visitor (so it
    includes the wait); engine TTFT = the baseline engine's own (submission → first token, in the page)."""
    ok = [v for v in visits if v.done and not v.error]
    waits = [_diff(v.started_at, v.clicked_at) for v in ok]
    ttfts = [_diff(v.first_token_at, v.clicked_at) for v in ok]
    kinds: dict[str, int] = {}
    for v in visits:
        kind = "exception" if v.exception else error_kind(v.error)
        if kind:
            kinds[kind] = kinds.get(kind, 0) + 1
    order = fifo(visits, joins_ordered)
    return {
        "visitors": len(visits),
        "completed": len(ok),
        "errors": len(visits) - len(ok),
        "errors_by_kind": kinds,
        "hangs": sum(1 for v in visits if v.exception and "deadline" in v.exception),
        "equal_to_solo": sum(1 for v in ok if v.equals(solo[v.prompt])),
        "lost_or_mixed": sum(1 for v in ok if not v.equals(solo[v.prompt])),
        "fifo_kept": order["kept"] and order["verified"], "fifo": order,
        "queue_wait_p50_s": percentile(waits, 0.5), "queue_wait_p95_s": percentile(waits, 0.95),
        "ttft_p50_s": percentile(ttfts, 0.5), "ttft_p95_s": percentile(ttfts, 0.95),
        "engine_ttft_p50_s": percentile([v.got["ttft_s"] for v in ok], 0.5),
        "engine_ttft_p95_s": percentile([v.got["ttft_s"] for v in ok], 0.95),
        "most_waiting_at_once": most_waiting(visits),
        "joins_s": _diff(max((v.joined_at for v in visits if v.joined_at), default=None),
                         min((v.clicked_at for v in visits if v.clicked_at), default=None)),
        "load_s": _diff(max((v.finished_at for v in visits if v.finished_at), default=None),
                        min((v.clicked_at for v in visits if v.clicked_at), default=None)),
    }
