"""The session's finished run as the page keeps it (its "run" gr.State, on the server only): the LiveRun it
streamed (the replay, the panes' token texts, the share link's inputs), the run itself, typed (`result`:
the RunResult whose dump is the run JSON; a "Run 3×" series' last run carries the series pooled), and whose
session it is, so its exports are named from the session, never from a file name. No Gradio."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from specplay.bench.outputs import markdown_table
from specplay.hosting.files import session_token
from specplay.page.live_run import LiveRun
from specplay.run.noise import Pooled
from specplay.run.result import RunResult


@dataclass(frozen=True)
class FinishedRun:
    live: LiveRun
    result: RunResult
    session: str
    # its views, each computed once (the stepper's decoded steps, the what-if's start): their slider and
    # arrows read them here, on the server, and never recompute (decode) on a visitor's click
    views: dict = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, live: LiveRun, session: str) -> "FinishedRun":
        return cls(live, live.result(), session)

    def pooled(self, pooled: Pooled | None) -> "FinishedRun":
        """This run as a series' last, the series pooled into it (its own views are still the run's)."""
        return FinishedRun(self.live, self.result.model_copy(update={"pooled": pooled}), self.session, self.views)

    @property
    def run_json_name(self) -> str:
        """Its download's name: keyed by this process's secret (files.session_token), as the history CSV's."""
        return f"run-{session_token(self.session)}.json"


def exports(values: dict, folder) -> dict:
    """The finished run's exports, added to a frame that carries the session's finished run ("run"): the
    run's JSON as a file in `folder`, one a session, overwritten (named by the session's token, which
    nothing shown gives away), and this run's table as Markdown."""
    run = values.get("run")
    if not isinstance(run, FinishedRun):
        return {}
    path = Path(folder) / run.run_json_name
    path.write_text(json.dumps(run.result.model_dump(mode="json"), indent=1) + "\n")
    summary = values.get("summary")
    md = markdown_table(list(summary.columns), summary.astype(str).values.tolist()) if summary is not None else ""
    return {"result_file": str(path), "summary_md": md}
