"""One visitor can't fill the queue (issue 32, 1): every queued group is under the one-pending limit (a replay
joined by its fn_index too), and a run nobody reads leaves little queued for its session. A real Gradio
page and queue on a FakePair; joins and reads over plain HTTP, as any client could send them."""

from __future__ import annotations

import json
from types import SimpleNamespace

import httpx
import pytest

from tests.public_page_fixtures import _manager
from tests.ui_fixtures import FakePair, synthetic_events

LONG = 1000  # tokens a side in a "long" run: its unread frames came to several MB before the fix


def _events_for(request):
    n = LONG if request.prompt.startswith("long") else 40
    return synthetic_events(list(range(n)), [[0]] + [[i, i + 1] for i in range(1, n, 2)])


@pytest.fixture
def page(tmp_path, monkeypatch):
    from specplay.page import ui
    from specplay.hosting import closing
    from tests.ui_fixtures import free_port

    monkeypatch.setattr(ui, "PAGE_DIR", tmp_path / "page")
    vocab = {i: f" w{i}" for i in range(LONG + 2)}

    def factory(preset, hw, log=print):
        pair = FakePair(_events_for, preset, step_delay=0.004)  # 1000 tokens in ~2 s a side
        for engine in pair.engines.values():
            engine.vocab = vocab
        return pair

    manager = _manager(factory)
    demo = ui.build_page(manager)
    ui.launch(demo, "127.0.0.1", free_port(), block=False)
    try:
        fns = {i: fn for i, fn in demo.fns.items()}
        yield SimpleNamespace(demo=demo, url=demo.local_url.rstrip("/"), manager=manager,
                              run=next(i for i, fn in fns.items() if fn.api_name == "run"),
                              replays=[i for i, fn in fns.items() if getattr(fn.fn, "__name__", "") == "replay"])
    finally:
        closing.close(demo)
        manager.shutdown()


def join(page, session, fn_index, data, headers=None):
    body = {"data": data, "fn_index": fn_index, "session_hash": session, "event_data": None, "trigger_id": None}
    return httpx.post(f"{page.url}/gradio_api/queue/join", json=body, headers=headers or {}, timeout=30)


def run_data(prompt="hello"):
    return [prompt, 8, 0.0, "sequential", None]


def read(page, session) -> tuple[list[dict], int]:
    """The session's messages from /queue/data until the stream closes, and how many bytes they took."""
    messages, size = [], 0
    with httpx.stream("GET", f"{page.url}/gradio_api/queue/data", params={"session_hash": session},
                      timeout=120) as stream:
        for line in stream.iter_lines():
            size += len(line) + 1
            if line.startswith("data: "):
                messages.append(json.loads(line[6:]))
                if messages[-1]["msg"] == "close_stream":
                    break
    return messages, size


def test_a_second_replay_join_from_one_session_is_refused_and_a_new_visitors_run_accepted(page):
    # a long run: its replay plays for seconds, so the second join comes while it plays however loaded the machine
    assert join(page, "s1", page.run, run_data("long replay")).status_code == 200
    done = read(page, "s1")[0]
    assert done[-2]["msg"] == "process_completed" and done[-2]["success"], done[-2]
    first = join(page, "s1", page.replays[0], [None])  # the run's replay, by fn_index (api_visibility private)
    assert first.status_code == 200, first.text
    second = join(page, "s1", page.replays[1], [None])  # while the first plays: refused, with the message
    assert second.status_code == 400 and "already have" in second.json()["detail"], second.text
    assert join(page, "s2", page.run, run_data()).status_code == 200  # a new visitor's Run is accepted
    replayed = read(page, "s1")[0]
    assert [m["msg"] for m in replayed].count("process_completed") == 1  # the one replay, played to its end


def test_a_group_added_later_is_under_the_limit_without_being_listed(tmp_path, monkeypatch):
    """The limits cover every queued event the page has, whatever its group: one added after the page was built
    (a future tab's), joined twice from one session while the first still runs: the second is refused."""
    import threading

    import gradio as gr

    from specplay.page import ui
    from specplay.hosting import closing
    from specplay.hosting.gradio_internals import queued_groups
    from tests.ui_fixtures import free_port

    monkeypatch.setattr(ui, "PAGE_DIR", tmp_path / "page")
    manager = _manager()
    demo = ui.build_page(manager)
    release, started = threading.Event(), threading.Event()

    def lesson(text):
        started.set()
        release.wait(60)
        return text

    with demo:
        box = gr.Textbox()
        box.submit(lesson, inputs=box, outputs=box, concurrency_id="lesson", concurrency_limit=None,
                   api_visibility="private")
    assert {"engines", "replay", "lesson"} <= queued_groups(demo)
    ui.launch(demo, "127.0.0.1", free_port(), block=False)
    try:
        page = SimpleNamespace(url=demo.local_url.rstrip("/"))
        index = next(i for i, fn in demo.fns.items() if fn.concurrency_id == "lesson")
        assert join(page, "s1", index, ["a"]).status_code == 200
        assert started.wait(30)  # the first is running
        second = join(page, "s1", index, ["b"])
        assert second.status_code == 400 and "already have" in second.json()["detail"], second.text
        assert join(page, "s2", index, ["c"]).status_code == 200  # another session: its own
    finally:
        release.set()
        closing.close(demo)
        manager.shutdown()


def test_an_unread_run_leaves_under_2_mb_queued_for_its_session(page):
    """A session that joins a long run and never opens /queue/data: what Gradio keeps for it is what a late
    reader gets. The run after it (another visitor's, read to its end) says the unread one is over."""
    assert join(page, "unread", page.run, run_data("long prompt")).status_code == 200
    assert join(page, "reader", page.run, run_data()).status_code == 200
    after = read(page, "reader")[0]
    assert after[-2]["msg"] == "process_completed" and after[-2]["success"]
    late, size = read(page, "unread")
    assert size < 2_000_000, f"{size} bytes queued for a session that never read"
    end = [m for m in late if m["msg"] == "process_completed"]
    # since the panes are appends a 1000-token run's frames stay under the limit and it ends as usual; past
    # the limit it is stopped and told why (the frame-level test below)
    assert len(end) == 1 and (end[0]["success"] or "did not read" in end[0]["output"]["error"]), end
    assert late[-1]["msg"] == "close_stream"



def _frames(page, session: str, reads_between: int, frames: int = 30, size: int = 100_000):
    """`frames` frames of `size` bytes sent to `session` through the page's own (wrapped) Gradio queue, the
    session's reader taking one frame after every `reads_between`-th send (0: it never reads). Returns what
    the reader got and then what was left, and how many frames waited at most."""
    import asyncio

    from gradio.queueing import Event
    from gradio.server_messages import ProcessGeneratingMessage

    queue = page.demo._queue
    queue.pending_messages_per_session[session] = asyncio.Queue()
    event = Event(session, page.demo.fns[page.run], request=None, username=None)
    got, most = [], 0
    for i in range(frames):
        queue.send_message(event, ProcessGeneratingMessage(output={"data": ["x" * size]}, success=True))
        messages = queue.pending_messages_per_session[session]
        most = max(most, messages.qsize())
        if reads_between and i % reads_between == 0 and i > 2 and not messages.empty():
            got.append(messages.get_nowait())  # the reader takes the oldest frame, as /queue/data does
    while not messages.empty():
        got.append(messages.get_nowait())
    return [m.msg for m in got], most


def test_a_reader_a_few_frames_behind_is_not_stopped_and_one_that_never_reads_is(page):
    """A reader on a loaded machine that stays 3 frames behind reads 3 MB in all and is never more than
    ~400 kB behind: it gets every frame (the old count, reset only when the queue emptied, stopped it at
    1 MiB: a 900-token run's Stop then never reached the page). One that never reads is stopped at the limit."""
    got, most = _frames(page, "lagging", reads_between=1)
    assert most <= 4 and got == ["process_generating"] * 30, (most, got[-3:])
    got, most = _frames(page, "gone", reads_between=0, frames=19)  # 19 frames of 100 kB and their JSON: just past the limit
    assert got == ["process_completed"], (most, got[-3:])  # its frames dropped, told why


def test_a_long_runs_frames_are_appends_not_whole_panes(page):
    """The panes end with their newest token, so Gradio sends each frame as an append (a few kB), not both
    panes whole (~210 kB a frame at 900 tokens): a reader on loaded cores stays well inside the unread limit
    (issue 32, 1; the Stop tests' client was stopped as unread when each frame was the whole pane). The charts
    (plotly JSON strings, sent whole) are most of what's left."""
    assert join(page, "long", page.run, run_data("long prompt")).status_code == 200
    messages, _ = read(page, "long")
    frames = [len(json.dumps(m)) for m in messages if m["msg"] == "process_generating"]
    assert len(frames) > 10, frames
    # a side's finish (its stats, the divergence marks) and the replay's start and end replace a pane once each
    assert sorted(frames)[-5] < 50_000, sorted(frames)[-8:]
    final = next(m for m in messages if m["msg"] == "process_completed")
    assert final["success"] and "w999" in json.dumps(final["output"]), str(final)[:300]
