"""The one module that touches Gradio's private internals (its queue, its session store, its server
messages): the guard's limits are hooks into `Queue.push` and `Queue.send_message`, and unqueued calls of
unknown sessions share one blank `SessionState`. Gradio is pinned to the tested minor release (pyproject.toml,
requirements*.txt); `check()` runs at start and names the installed Gradio when something these hooks need
is gone, instead of a page that serves without its limits."""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import sys

from specplay.hosting.answered_first import first_answer
from specplay.hosting import guard
from specplay.hosting.guard import (ADDRESS_FULL, ADDRESS_PENDING, NOT_READ, ONE_PENDING, UNREAD_LIMIT_BYTES,
                                    counted_address)
from specplay.hosting.rate import makes_no_session
from specplay.hosting.room import FOLLOWER_REFUSAL
from specplay.hosting.session import SessionBook

TESTED = "6.31"  # the Gradio minor release these hooks were written against (and the requirements pin)
# What the hooks read or replace: (module, attribute path) checked at start
NEEDED = (
    ("gradio.queueing", "Queue.push"), ("gradio.queueing", "Queue.send_message"),
    ("gradio.state_holder", "StateHolder.__getitem__"), ("gradio.state_holder", "SessionState"),
    ("gradio.server_messages", "ProcessCompletedMessage"),
)
QUEUE_FIELDS = ("event_queue_per_concurrency_id", "active_jobs", "pending_messages_per_session", "blocks")
# launch()'s private `_frontend`: its only use is the check that HEADs the page's own URL after the server
# answered, with a 3 s timeout whose expiry raises "When localhost is not accessible, a shareable link must be
# created" (seen on a loaded 2-core machine, 2026-12-07)
NO_SELF_CHECK = {"_frontend": False}


class GradioInternalsChanged(RuntimeError):
    """The installed Gradio lacks an internal the page's limits hook into."""


def check(queue=None) -> None:
    """Raise GradioInternalsChanged, naming the installed Gradio and what is missing, if a hook's target is
    gone (and, given the page's queue, the fields the limits read)."""
    import importlib

    import gradio

    missing = []
    for module, path in NEEDED:
        try:
            target = importlib.import_module(module)
            for part in path.split("."):
                target = getattr(target, part)
        except (ImportError, AttributeError):
            missing.append(f"{module}.{path}")
    missing += [f"Queue.{name}" for name in QUEUE_FIELDS if queue is not None and not hasattr(queue, name)]
    launch_args = inspect.signature(gradio.Blocks.launch).parameters
    missing += [f"Blocks.launch({name}=)" for name in NO_SELF_CHECK if name not in launch_args]
    if missing:
        raise GradioInternalsChanged(
            f"Gradio {gradio.__version__} lacks what the page's visitor limits hook into ({', '.join(missing)}); "
            f"this playground is tested with Gradio {TESTED}.x: pip install 'gradio=={TESTED}.*'")


def queued_groups(blocks) -> set[str]:
    """The concurrency groups a visitor can join (every queued event's): the limits cover all of them."""
    return {fn.concurrency_id for fn in blocks.fns.values() if fn.queue is not False}


def pending_events(queue) -> list:
    """The events waiting in or being run by Gradio's queue, every group."""
    waiting = [e for q in queue.event_queue_per_concurrency_id.values() for e in q.queue]
    running = [e for job in queue.active_jobs if job for e in job if e.alive and not e.closed]
    return waiting + running


def limit_pending(queue, local: bool = True, book: SessionBook | None = None) -> None:
    """Wrap Gradio's `Queue.push`: an event is refused while its session has one pending in the same group, or
    its address ADDRESS_PENDING in any (`local`: the page listens on this machine only, see `guard.counted_address`),
    or when it would make a session for an address holding its share of the store already (`book`, the one
    `blank_for_unknown_sessions` reads: an unqueued handler joined through the queue, /call/<name>, makes
    none). The queue's own checks come after, unchanged."""
    push, book = queue.push, book or SessionBook()
    queue.playground_sessions = book

    async def guarded_push(body, request, username):
        fn = queue.blocks.fns.get(body.fn_index) if body.fn_index is not None else None
        if fn is not None:
            address = counted_address(request, local)
            stored = queue.blocks.state_holder.session_data
            if fn.queue is False:
                book.passing(body.session_hash, stored)
            elif (refusal := book.refusal(body.session_hash, address, stored)) is not None:
                return False, refusal, "error"
            # a run that has just sent its last output may not have left the queue's books yet: a moment's grace
            for _ in range(guard.GRACE_CHECKS):  # read at each join: a test shortens the grace (guard.GRACE_STEP_S)
                refusal = _refusal(queue, fn.concurrency_id, body.session_hash, address, local)
                if refusal is None:
                    break
                await asyncio.sleep(guard.GRACE_STEP_S)
            else:
                return False, refusal, "error"  # 400 with the message: the page shows it as it is
        return await push(body, request, username)

    queue.push = guarded_push


def presenter_only(queue, room) -> None:
    """Wrap Gradio's `Queue.push` (outside `limit_pending`'s): while a room is open (hosting/room.py) a queued
    event of a follower is refused before anything else, so a follower never holds a queue slot, a worker or a
    stored session; the presenter's events go on to the page's usual limits."""
    push = queue.push

    async def presenter_push(body, request, username):
        fn = queue.blocks.fns.get(body.fn_index) if body.fn_index is not None else None
        # an unqueued handler joined through the queue (gradio_client's /status) is no run: a follower's too
        if room.follows(request) and (fn is None or fn.queue is not False):
            return False, FOLLOWER_REFUSAL, "error"
        return await push(body, request, username)

    queue.push = presenter_push


def _refusal(queue, group: str, session: str | None, address: str | None, local: bool) -> str | None:
    from_address = 0
    for event in pending_events(queue):
        if session and event.session_hash == session and event.concurrency_id == group:
            return ONE_PENDING
        if address is not None and counted_address(event.request, local) == address:
            from_address += 1
    return ADDRESS_FULL if from_address >= ADDRESS_PENDING else None


def bound_unread(queue, limit: int = UNREAD_LIMIT_BYTES) -> None:
    """Wrap Gradio's `Queue.send_message`: Gradio keeps every frame of a session until it reads /queue/data.
    Once the frames waiting for a session pass `limit`, it isn't reading: its events are stopped (as if it had
    left: a run releases the engines), its unread frames dropped, and a late reader told why. What waits, not
    what was sent since the queue last emptied: a reader on a loaded machine that stays a few frames behind
    (seen: a 900-token run's Stop) reads on, and was stopped by the old count mid-run."""
    send = queue.send_message

    def bounded_send(event, message):
        send(event, message)
        messages = queue.pending_messages_per_session.get(event.session_hash)
        if messages is None or not event.alive:
            return
        if _waiting_bytes(messages) > limit:
            _stop_unread(queue, event, messages)

    queue.send_message = bounded_send


def _waiting_bytes(messages) -> int:
    """The bytes of the frames in Gradio's queue of the session (an asyncio.Queue: its `_queue` deque), each
    frame sized once (kept on the queue, which goes when the session does)."""
    known = getattr(messages, "playground_sizes", {})
    sizes = {}
    for message in messages._queue:
        kept = known.get(id(message))
        sizes[id(message)] = kept if kept and kept[0] is message else (message, _size(message))
    messages.playground_sizes = sizes
    return sum(size for _, size in sizes.values())


def _size(message) -> int:
    try:
        return len(message.model_dump_json())
    except Exception:  # a value pydantic can't write (Gradio's own send uses orjson's default=str)
        return len(repr(message))


def _stop_unread(queue, event, messages) -> None:
    from gradio.server_messages import ProcessCompletedMessage

    failed = {"output": {"error": NOT_READ}, "success": False}
    ends = []
    while not messages.empty():  # the frames go; an earlier event's end stays, small, so a reader's stream closes
        old = messages.get_nowait()
        if getattr(old, "msg", None) == "process_completed":
            ends.append(old.model_copy(update=failed))
    for message in ends + [ProcessCompletedMessage(event_id=event._id, **failed)]:
        messages.put_nowait(message)
    messages.playground_sizes = {}
    for job in queue.active_jobs:
        for other in job or ():
            if other.session_hash == event.session_hash:
                other.alive = False  # Gradio's own mark for a client gone: the run's generator is closed


def blank_for_unknown_sessions(page, unqueued, book: SessionBook) -> None:
    from gradio.state_holder import SessionState, StateHolder

    for fn in page.fns.values():
        if fn.queue is False and any(type(b).__name__ == "State" for b in fn.outputs):
            raise ValueError(f"an unqueued handler can't write a session's state: {fn.api_name or fn.name}")

    class Holder(StateHolder):
        blank = None

        def __getitem__(self, session_id):
            if (unqueued.get() or book.is_passing(session_id)) and session_id not in self.session_data:
                if Holder.blank is None:
                    Holder.blank = SessionState(self.blocks)
                return Holder.blank
            return super().__getitem__(session_id)

    page.state_holder.__class__ = Holder


class NoSessionFromUnqueued:
    """ASGI: Gradio makes (or revives) a session's state, a copy of the page's config, for every call that
    names a session, in a least-recently-used store of `session_capacity`: with more tabs open than that,
    each 1 Hz status poll evicted another tab's session (its history, its replay), and a client calling the
    stepper's or lesson's unqueued handlers under invented session names (~127 a second) evicted every real
    tab's. So an unqueued call (/run/predict) never makes a session: for a session Gradio doesn't keep, it
    gets one blank state, shared and never stored (a blank of its own cost 7.5 ms a call), so no unqueued
    handler may write a gr.State (checked at the first scope). Sessions are made by queued events only, which
    the queue's limits bound. Every spelling of a direct call counts (`rate.unqueued_call`: /run/predict/,
    /run/<name>, /api/<name>, /component_server) and Gradio's /call/<name>, not only /run/predict."""

    unqueued = contextvars.ContextVar("playground_unqueued", default=False)  # this request is a /run/predict

    def __init__(self, app, page):
        self.app, self.page, self.ready = app, page, False

    async def __call__(self, scope, receive, send):
        if not self.ready:
            queue = getattr(self.page, "_queue", None)
            book = getattr(queue, "playground_sessions", None) or SessionBook()
            blank_for_unknown_sessions(self.page, self.unqueued, book)
            self.ready = True
        if scope["type"] == "http" and makes_no_session(scope):
            self.unqueued.set(True)
        return await self.app(scope, receive, send)


def quiet_refused_values(page) -> None:
    """A posted value an input component refuses (outside its choices, a word for a slider: a forged post)
    printed Gradio's whole traceback: 1.7 kB of log per 100-byte request. Each input component says it in
    one line instead, and its refusal is raised as Gradio's Error without the traceback (`print_exception=
    False`): the caller is told Gradio's words (a value outside the choices), or which input refused (no
    internals). A handler's own failure keeps its traceback: that is the page's bug, not the caller's.
    The classes of the page's inputs are wrapped, not the objects: Gradio makes a new component object for a
    session whose handler updated one (the shared blank state of direct calls too)."""
    from gradio.exceptions import Error

    for cls in {type(block) for fn in page.fns.values() for block in fn.inputs}:
        preprocess = getattr(cls, "preprocess", None)
        if callable(preprocess) and not getattr(preprocess, "playground_quiet", False):
            cls.preprocess = _quiet(preprocess, Error)


def _quiet(preprocess, Error):
    def quiet_preprocess(block, payload):
        try:
            return preprocess(block, payload)
        except Exception as error:  # Gradio's Error (not a choice) or a TypeError, ValueError of its checks
            name = getattr(block, "elem_id", None) or getattr(block, "label", None) or type(block).__name__
            print(f"refused value for {name}: {repr(payload)[:80]} ({type(error).__name__})", file=sys.stderr,
                  flush=True)
            said = str(error)[:300] if isinstance(error, Error) else f"{name}: not a value this input takes"
            raise Error(said, print_exception=False) from None  # Gradio's own words (choices are public)

    quiet_preprocess.playground_quiet = True
    return quiet_preprocess


def first_answers(page, login: bool):
    """`find(fn_index, api_name)` for `answered_first.AnsweredFirst`: the answer function of an unqueued
    event's handler marked by `answered_first.answers_first`, by the index the browser posts or the name a
    client calls (/run/<name>); None for any other call."""

    def find(index, name):
        fn = page.fns.get(index) if index is not None else next(
            (f for f in page.fns.values() if f.api_name == name), None)
        if fn is None or fn.queue is not False:
            return None
        return first_answer(fn.fn, login)

    return find


def skipped(blocks) -> list:
    """gr.skip() for each of these output blocks as Gradio sends it (`postprocess_update_dict`: an update of
    nothing; an HTML block's carries its props), made once: a poll that finds nothing new answers this."""
    from gradio.blocks import postprocess_update_dict

    return [postprocess_update_dict(block, {"__type__": "update"}) for block in blocks]


class NotWired(ValueError):
    """A value only Gradio's own path sends (a prop update, a file)."""


def wire_value(block, value):
    """`value` of output `block` as Gradio sends it to the browser (`Blocks.postprocess_data` for a plain
    value: the component's postprocess, its data model dumped), made once where many answers share it.
    Raises NotWired for what only Gradio's own path makes (a prop update, a file)."""
    from gradio.data_classes import GradioModel, GradioRootModel
    from gradio.utils import is_prop_update

    if is_prop_update(value):
        raise NotWired("a prop update")
    out = block.postprocess(value)
    out = out.model_dump() if isinstance(out, (GradioModel, GradioRootModel)) else out
    if _has_file(out):
        raise NotWired("a file")
    return out


def _has_file(value) -> bool:
    if isinstance(value, dict):
        return "path" in value and "meta" in value or any(_has_file(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_has_file(v) for v in value)
    return False


def direct_answer(data: list) -> bytes:
    """What Gradio answers a direct call (`Blocks.process_api`'s output): `data`, one value per output,
    encoded as Gradio encodes its answers (its orjson response: numpy values, its data models)."""
    from gradio.routes import ORJSONResponse

    return ORJSONResponse._render({"data": data, "is_generating": False, "iterator": None, "duration": 0.0,
                                   "average_duration": None, "render_config": None, "changed_state_ids": [],
                                   "used_cache": None})
