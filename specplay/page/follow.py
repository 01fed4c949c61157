"""The page's side of a room that watches one run (hosting/room.py): the presenter's frames published into
the room as the page serves them (`published`), and a follower's page (`wire_follow`): its driving controls
hidden or locked, a banner saying whose run it shows, and a poll (unqueued, FOLLOW_HZ, writing no session
state) that draws what changed in the room since its last key. A follower holds no queue slot and no engines;
its poll costs the server one key comparison when nothing changed, and the changed values only when
something did: each chart is serialized once, when it is published, not once per follower."""

from __future__ import annotations

from collections.abc import Iterable

import gradio as gr
from gradio.components.plot import PlotData

from specplay.hosting.answered_first import answers_first
from specplay.hosting.gradio_internals import NotWired, skipped, wire_value
from specplay.hosting.room import Room
from specplay.page.section import Section

# A follower's polls a second (the presenter's page redraws at 4, live_run.UPDATE_HZ): each poll costs the
# page Gradio's fixed price of an unqueued call, and at 2 a second 32 followers doubled the presenter's run
# time on 2 CPU cores (docs/hosting.md, "Thirty-two followers against none")
FOLLOW_HZ = 1.0
# What a follower's Compare tab draws of the presenter's: a run's outputs, less the presenter's own history,
# files and share link, and the inputs of the presenter's last run
COMPARE_FOLLOWED = ("error", "badge", "explain", "pane_b", "pane_s", "summary", "fig_rate", "fig_accept", "fig_mem",
                    "result", "summary_md", "prompt", "max_tokens", "temperature", "schedule")
CHARTS = ("fig_rate", "fig_accept", "fig_mem")
LESSON = "lesson:"  # the Lesson tab's outputs in a frame and in the room
LESSON_FOLLOWED = ("steps", "card", "progress", "result", "answer")
# What a follower can't use, hidden (Compare, Lesson) and locked (what it would only change on its own page)
COMPARE_DRIVING = ("run_btn", "runs_btn", "stop_btn", "replay_btn", "share_btn", "share_link", "recording")
LESSON_DRIVING = ("prev", "run", "stop", "open", "next")
COMPARE_LOCKED = ("prompt", "max_tokens", "temperature", "schedule")


def banner_html(follower: bool) -> str:
    if follower:
        return ('<div class="room follower"><b>Following the presenter.</b> This page shows the presenter\'s run '
                'and lesson step as they happen; it can\'t start runs of its own.</div>')
    return ('<div class="room presenter"><b>You are presenting.</b> Every other visitor\'s page follows your '
            'runs and lesson steps, live and read-only.</div>')


def followed(values: dict) -> tuple[dict, dict]:
    """(the frame as the presenter's page is served it, what the room keeps of it): each chart as Gradio serves
    it, made once here (gr.Plot passes it on as it is), and only the outputs a follower draws."""
    charts = {name: PlotData(type="plotly", plot=values[name].to_json())
              for name in CHARTS if hasattr(values.get(name), "to_json")}
    values = {**values, **charts}
    return values, {**{n: v for n, v in values.items() if n in COMPARE_FOLLOWED}, **lesson_part(values)}


def lesson_part(values: dict) -> dict:
    """The Lesson tab's outputs of a frame that a follower draws."""
    return {name: value for name, value in values.items()
            if name.startswith(LESSON) and name[len(LESSON):] in LESSON_FOLLOWED}


def published(frames: Iterable[dict], room: Room):
    """`frames` as they are (charts made once), each put in the room first where one is open."""
    for values in frames:
        if room.on:
            values, kept = followed(values)
            room.publish(kept)
        yield values


def _drawn(changed: dict, compare: Section, lessons: Section) -> dict:
    """The room's changed values as {component: value} on a follower's page."""
    out = {}
    for name, value in changed.items():
        if name.startswith(LESSON):
            out[lessons[name[len(LESSON):]]] = value
        elif name in compare.c:
            out[compare[name]] = value
    return out


def wire_follow(demo: gr.Blocks, room: Room, banner, compare: Section, lessons: Section, locked: list) -> None:
    """A follower's page: on load the driving controls hidden, `locked` and the inputs made read-only, the banner shown and the poll started (drawing the room as it stands: a late joiner
    sees the run so far); the presenter's page: only the banner. Nothing here when no room is open."""
    if not room.on:
        return
    key = gr.Textbox(visible="hidden", elem_id="follow-key")  # in the browser: a poll reads no session
    timer = gr.Timer(1.0 / FOLLOW_HZ, active=False)
    hidden = [compare[n] for n in COMPARE_DRIVING if n in compare.c] + lessons.list(LESSON_DRIVING)
    read_only = compare.list(COMPARE_LOCKED) + [lessons["steps"]] + list(locked)
    names = [n for n in COMPARE_FOLLOWED if n in compare.c] + [LESSON + n for n in LESSON_FOLLOWED]
    drawn = compare.list(names[:-len(LESSON_FOLLOWED)]) + lessons.list(LESSON_FOLLOWED)

    def poll(seen):
        now, changed = room.since(seen)
        if now == seen:
            return {key: gr.skip()}  # nothing new: nothing redrawn
        return {key: now, **_drawn(changed, compare, lessons)}

    def enter(request: gr.Request):
        follower = room.follows(request)
        out = {banner: gr.update(value=banner_html(follower), visible=True), timer: gr.Timer(active=follower)}
        if follower:
            out.update({c: gr.update(visible=False) for c in hidden})
            drawn_now = poll(None)
            out.update(drawn_now)
            # an input drawn from the room stays read-only: one update with both
            out.update({c: gr.update(value=drawn_now[c], interactive=False) if c in drawn_now
                        else gr.update(interactive=False) for c in read_only})
        return out

    timer.tick(answers_first(poll, Answers(room, key, names, drawn)), inputs=key, outputs=[key] + drawn, queue=False,
               show_progress="hidden", api_visibility="private")
    outputs = list(dict.fromkeys([banner, timer, key] + hidden + read_only + drawn))  # each once
    demo.load(enter, outputs=outputs, queue=False,
              show_progress="hidden", api_visibility="private")


class Answers:
    """A follower's poll answered before Gradio (hosting/answered_first.py): Gradio made every output anew for
    each poll, a skipped one a new component, and 32 followers doubled the presenter's run time on 2 cores
    (docs/hosting.md). Here a poll costs a key comparison when nothing changed; what changed is made as Gradio
    sends it once per version of the room and seen-key, not once per follower. A value only Gradio can send
    (a prop update) hands the poll to Gradio."""

    def __init__(self, room: Room, key, names: list[str], blocks: list):
        self.room, self.outputs = room, list(zip(names, blocks))
        self.skipped = skipped([key, *blocks])  # the answer when nothing changed (the key too: gr.skip())
        self._now, self._made = None, {}  # the room's key the cache is for; {seen key: answer}

    def __call__(self, call: dict) -> list | None:
        data = call.get("data")
        seen = data[0] if isinstance(data, list) and len(data) == 1 else None
        if seen is not None and not isinstance(seen, str):
            return None  # not what a page sends: Gradio's own checks answer it
        now, changed = self.room.since(seen)
        if now == seen:
            return self.skipped
        if now != self._now:
            self._now, self._made = now, {}
        if seen not in self._made:
            try:
                values = [wire_value(block, changed[name]) if name in changed else skip
                          for (name, block), skip in zip(self.outputs, self.skipped[1:])]
                self._made[seen] = [now, *values]
            except NotWired:
                self._made[seen] = None
            while len(self._made) > 64:  # seen keys are the followers' own: a few per version, bounded anyway
                del self._made[next(iter(self._made))]
        return self._made[seen]
