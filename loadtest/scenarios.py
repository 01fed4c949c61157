"""Visitors by network address (issue 32): what a public page promises per address, seen from the visitors'
side. The page is started with `--trusted-proxies 127.0.0.1`, so this machine stands for a proxy the
operator trusts, and each visitor's X-Forwarded-For is the address the page counts it under:

- one address for all (a training room behind one NAT): a few runs pending per address
  (`specplay.hosting.guard.ADDRESS_PENDING`), every other Run refused at once with the page's message; a
  refused visitor presses Run again `retry_s` later, until its run is served;
- an address each: every Run accepted into the queue and served in order.

A visitor's wait is from its first press of Run to the start of the run it was served (refusals and retries
included). Nothing lost: every visitor ends with its own run (equal to its prompt's solo run) or a refusal
it can retry, never a lost or mixed stream. Only gradio_client here, as in loadtest/visitors.py."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from loadtest import visitors as vis

NAT_ADDRESS = "198.51.100.7"  # documentation addresses (RFC 5737): nobody's real one


def addresses(n_visitors: int, n_addresses: int) -> list[str]:
    """Visitor i's address: one of `n_addresses`, in turn (1: everyone behind one NAT)."""
    if n_addresses <= 1:
        return [NAT_ADDRESS] * n_visitors
    return [f"203.0.{113 + k // 250}.{k % 250 + 1}" for k in (i % n_addresses for i in range(n_visitors))]


@dataclass
class AddressVisit(vis.Visit):
    address: str = ""
    refusals: list = field(default_factory=list)  # (when, the page's message) for each Run refused
    next_try_at: float | None = None  # when a refused visitor presses Run again


def refusal_message(exception) -> str | None:
    """The page's message when it refused the join (HTTP 400 with a detail), else None."""
    response = getattr(exception, "response", None)
    if response is None or getattr(response, "status_code", None) != 400:
        return None
    try:
        detail = response.json().get("detail")
    except Exception:
        return None
    return detail if isinstance(detail, str) and detail else None


class AddressVisitors(vis.Visitors):
    """`Visitors` whose sessions each send X-Forwarded-For (their address) and press Run again, `retry_s`
    after a refusal, until served or `max_tries` refusals."""

    def __init__(self, url: str, prompts: list[str], max_tokens: int, n_addresses: int,
                 schedule: str = "sequential", retry_s: float = 1.0, max_tries: int = 10_000):
        super().__init__(url, prompts, max_tokens, schedule)
        self.retry_s, self.max_tries = retry_s, max_tries
        self.visits = [AddressVisit(v.index, v.prompt, address=a)
                       for v, a in zip(self.visits, addresses(len(prompts), n_addresses))]

    def connect(self) -> None:
        for v in self.visits:
            v.client = vis.client(self.url, headers={"X-Forwarded-For": v.address})

    def _read(self, v: AddressVisit) -> None:
        if v.job is None:  # refused: Run again when it's time
            if time.time() >= v.next_try_at:
                v.next_try_at = None
                v.job = v.client.submit(v.prompt, self.max_tokens, 0.0, self.schedule, api_name="/run")
            return
        super()._read(v)
        message = refusal_message(v.raised) if v.exception else None
        if message is not None and len(v.refusals) < self.max_tries:
            v.refusals.append((time.time(), message))
            v.exception = v.raised = v.finished_at = v.job = None
            v.next_try_at = time.time() + self.retry_s

    def watch(self, deadline: float, on_tick=None, poll_s: float = 0.02) -> None:
        super().watch(deadline, on_tick, poll_s)
        for v in self.visits:  # still refused at the deadline: that is its outcome, not a hang
            if v.job is None and v.exception and v.refusals:
                v.exception = f"refused {len(v.refusals)} times: {v.refusals[-1][1]}"


def summary(visits: list[AddressVisit], solo: dict[str, dict], expected_refusal: str) -> dict:
    """visitors.summary (waits from the first press of Run, FIFO on the page's messages) and the refusals:
    how many, how many visitors got one, whether each carried the page's message, and the most runs
    the page reported waiting in its queue at once."""
    out = vis.summary(visits, solo)
    messages = [m for v in visits for _, m in v.refusals]
    served = [v for v in visits if v.done and not v.error]
    out.update(
        addresses=len({v.address for v in visits}),
        served=len(served),
        refusals=len(messages),
        visitors_refused=sum(1 for v in visits if v.refusals),
        refusals_with_the_message=sum(1 for m in messages if m == expected_refusal),
        refusals_per_visitor_max=max((len(v.refusals) for v in visits), default=0),
        largest_queue_reported=max((size for v in visits for size, _ in v.places), default=0),
        distinct_outputs=len({tuple((v.got or {}).get("baseline") or []) for v in served}),
        lost=sum(1 for v in visits if not (v.done and not v.error) and not v.refusals),
    )
    return out


def row(v: AddressVisit, t0: float, solo: dict | None) -> dict:
    """`Visit.row` with the address and each refusal (seconds from t0, the page's message)."""
    return v.row(t0, solo) | {"address": v.address,
                              "refusals": [[round(t - t0, 3), m] for t, m in v.refusals]}
