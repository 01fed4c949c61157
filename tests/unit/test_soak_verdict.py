"""The soak's judgement (loadtest/soak.py) on made-up samples: what counts as growth after the warm-up."""

from __future__ import annotations

from loadtest import soak

PLAN = soak.Plan(runs=400, visitors=4, sample_every=100, warmup_runs=200)


def sample(runs, rss_mb=3000.0, cache_bytes=50_000, sessions=10, tmp_entries=70, fds=300, threads=140):
    return {"runs": runs, "rss_mb": rss_mb, "cache_bytes": cache_bytes, "tmp_bytes": 0, "tmp_entries": tmp_entries,
            "sessions": sessions, "fds": fds, "threads": threads}


def records(n=400):
    return [{"run": i, "kind": PLAN.kind(i), "outcome": "ok"} for i in range(1, n + 1)]


def test_every_fifth_run_is_stopped_and_every_seventh_abandoned():
    kinds = [PLAN.kind(i) for i in range(1, 36)]
    assert kinds.count(soak.ABANDON) == 5 and kinds.count(soak.STOP) == 6  # 35 is abandoned, not stopped
    assert kinds[4] == soak.STOP and kinds[6] == soak.ABANDON and kinds[0] == soak.FULL


def test_growth_during_the_warm_up_is_not_held_against_the_page():
    flat_after = [sample(0, rss_mb=2000, cache_bytes=0), sample(100, rss_mb=2900), sample(200), sample(300),
                  sample(400, rss_mb=3010)]
    verdict = soak.verdict(flat_after, records(), PLAN)
    assert verdict["passed"], verdict
    assert verdict["growth"]["from_runs"] == 200 and verdict["growth"]["rss_mb"] == 10


def test_memory_or_a_copy_a_run_after_the_warm_up_fails():
    leaking = [sample(200), sample(300, rss_mb=3040), sample(400, rss_mb=3080)]  # 400 KB a run
    assert not soak.verdict(leaking, records(), PLAN)["checks"]["rss_bounded"]
    copies = [sample(200), sample(400, cache_bytes=50_000 + 200 * 5_000)]  # 5 KB more a run, no new session
    verdict = soak.verdict(copies, records(), PLAN)
    assert not verdict["checks"]["disk_bounded"] and verdict["checks"]["rss_bounded"]
    sessions = [sample(200), sample(400, cache_bytes=50_000 + 30 * 40_000, sessions=40)]  # files of new sessions
    assert soak.verdict(sessions, records(), PLAN)["checks"]["disk_bounded"]


def test_a_socket_left_or_a_run_without_an_outcome_fails():
    assert not soak.verdict([sample(200), sample(400, tmp_entries=71)], records(), PLAN)["passed"]
    broken = records()
    broken[10]["outcome"] = "exception"
    assert not soak.verdict([sample(200), sample(400)], broken, PLAN)["checks"]["no_exception_or_error"]
    assert not soak.verdict([sample(200), sample(400)], records()[:-2] + records()[-1:], PLAN)["checks"][
        "every_run_recorded"]


def test_the_samplers_folder_counts_skip_a_folder_that_cannot_be_listed(tmp_path):
    """The page deletes folders of Gradio's cache while the soak lists them (a soak visitor's thread died of
    the FileNotFoundError); a folder that can't be listed is skipped, here one past PATH_MAX (certain)."""
    import os

    (tmp_path / "a.txt").write_bytes(b"12345")
    fd = os.open(tmp_path, os.O_RDONLY)
    for _ in range(20):  # 20 folders of 250 characters: the last ones' paths are past PATH_MAX (4,096)
        os.mkdir("d" * 250, dir_fd=fd)
        fd, parent = os.open("d" * 250, os.O_RDONLY, dir_fd=fd), fd
        os.close(parent)
    os.close(fd)
    assert soak.tree_bytes(tmp_path) == (5, 1)
    assert 2 <= soak.entries(tmp_path) <= 21  # the file and the folders that could be listed


def test_a_run_lost_at_its_submit_is_submitted_again_once_the_page_takes_it():
    """gradio_client's stream-close race at a run's submit (a clean-clone soak, 2026-12-07): the job cancelled
    client-side while the page ran it, then the session's next join refused (400) until that run ended. The
    soak submits it again and records the loss, instead of two exceptions. A scripted client, the same replies."""
    import concurrent.futures

    import httpx

    from loadtest import visitors as vis

    done = {"result": {"baseline": {"token_ids": [1, 2]}, "speculative": {"token_ids": [1, 2]}, "identical": True}}
    outputs = [done.get(name) for name in vis.API_OUTPUTS]
    refused = httpx.HTTPStatusError("400", request=httpx.Request("POST", "http://page/gradio_api/queue/join"),
                                    response=httpx.Response(soak.REFUSED_WHILE_PENDING))

    class Job:
        def __init__(self, reply):
            self.reply = reply

        def result(self, timeout=None):
            if isinstance(self.reply, BaseException):
                raise self.reply
            return self.reply

    class Client:
        def __init__(self, replies):
            self.replies = replies

        def submit(self, *args, api_name=None):
            reply = self.replies.pop(0)
            if isinstance(reply, httpx.HTTPStatusError):
                raise reply
            return Job(reply)

    plan = soak.Plan(run_timeout_s=30)
    client = Client([concurrent.futures.CancelledError(), refused, outputs])
    record = soak.one_run(client, "hello", plan, soak.FULL)
    assert record["outcome"] == "ok" and record["submit_lost"] is True and not client.replies
    twice = Client([concurrent.futures.CancelledError(), concurrent.futures.CancelledError()])
    try:
        soak.one_run(twice, "hello", plan, soak.FULL)
        raise AssertionError("a second loss must be reported")
    except concurrent.futures.CancelledError:
        pass
