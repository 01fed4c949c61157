"""Whose address a join counts under (issue 32, 2): the peer's, unless the peer is a proxy the operator trusts
(--trusted-proxies), then X-Forwarded-For's rightmost hop that isn't one; one pending event per session, a
few per address, so a client can't queue many runs by inventing addresses and session hashes, and trainees
behind one NAT don't block each other. A real Gradio page and queue on a FakePair, joins over HTTP."""

from __future__ import annotations

import random
from types import SimpleNamespace

import httpx
import pytest

from tests.public_page_fixtures import _manager
from tests.ui_fixtures import FakePair, synthetic_events


@pytest.fixture
def page_with(tmp_path, monkeypatch):
    """A page factory (settings → page); each page's engines are held by the test until it lets them go, so
    no run finishes (and frees a place) while the joins are counted."""
    from specplay.page import closing, guard, ui
    from specplay.page.settings import PageSettings
    from tests.ui_fixtures import free_port

    monkeypatch.setattr(ui, "PAGE_DIR", tmp_path / "page")
    # the grace before a refusal waits for a run that is just ending; none ends here (the engines are held):
    # all five looks in 50 ms, not 500 (30 refusals: 15 s of the quick tier)
    monkeypatch.setattr(guard, "GRACE_STEP_S", 0.01)
    made = []

    def make(**settings):
        events = synthetic_events([1, 2, 3], [[1], [2, 3]])
        manager = _manager(lambda p, hw, log=print: FakePair(lambda r: events, p))
        demo = ui.build_page(manager, PageSettings(**settings))
        ui.launch(demo, "127.0.0.1", free_port(), block=False)
        manager.run_lock.acquire()  # as a bench would: runs wait their turn, none ends during the test
        made.append((demo, manager))
        return SimpleNamespace(url=demo.local_url.rstrip("/"),
                               run=next(i for i, fn in demo.fns.items() if fn.api_name == "run"))

    yield make
    for demo, manager in made:
        manager.run_lock.release()
        closing.close(demo)
        manager.shutdown()


def join(page, session, forwarded=None):
    body = {"data": ["hello", 3, 0.0, "sequential", None], "fn_index": page.run, "session_hash": session,
            "event_data": None, "trigger_id": None}
    headers = {"X-Forwarded-For": forwarded} if forwarded else {}
    return httpx.post(f"{page.url}/gradio_api/queue/join", json=body, headers=headers, timeout=30)


def random_address(rng) -> str:
    return ".".join(str(rng.randrange(1, 255)) for _ in range(4))


def test_33_joins_from_one_peer_with_invented_addresses_and_sessions_get_the_per_address_few(page_with):
    from specplay.page.guard import ADDRESS_PENDING

    page = page_with()  # no trusted proxies: X-Forwarded-For is the client's say, not believed
    rng = random.Random(32)
    codes = [join(page, f"{rng.getrandbits(64):016x}", random_address(rng)).status_code for _ in range(33)]
    assert codes.count(200) == ADDRESS_PENDING and codes.count(400) == 33 - ADDRESS_PENDING, codes


def test_behind_a_trusted_proxy_the_rightmost_untrusted_hop_is_the_address(page_with):
    from specplay.page.guard import ADDRESS_PENDING

    page = page_with(trusted_proxies=("127.0.0.1", "10.0.0.0/8"))
    nat = "198.51.100.7"  # a training room: one address, several trainees
    # what a client writes on the left is not believed; the proxies (10.x, then the one at 127.0.0.1) appended
    # the address they saw: trainees behind one NAT are each accepted, up to the few per address
    codes = [join(page, f"trainee-{i}", f"{random_address(random.Random(i))}, {nat}, 10.1.2.3").status_code
             for i in range(ADDRESS_PENDING + 1)]
    assert codes == [200] * ADDRESS_PENDING + [400], codes
    assert join(page, "elsewhere", "203.0.113.9").status_code == 200  # another address has its own few
    assert join(page, "trainee-0", "203.0.113.10").status_code == 400  # one pending per session, any address


def test_the_trusted_proxies_option_env_and_defaults():
    from specplay.page.options import DEFAULTS, parse_args, resolve_options, settings_from_options

    assert settings_from_options(resolve_options(parse_args([]))).trusted_proxies == ()
    args = parse_args(["--trusted-proxies", "127.0.0.1, 10.0.0.0/8"])
    assert settings_from_options(resolve_options(args)).trusted_proxies == ("127.0.0.1/32", "10.0.0.0/8")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PLAYGROUND_TRUSTED_PROXIES", "::1")
        assert resolve_options(parse_args([]))["trusted_proxies"] == ("::1/128",)
        # the command line wins over the environment
        assert resolve_options(args)["trusted_proxies"] == ("127.0.0.1/32", "10.0.0.0/8")
    for bad in ("*", "proxy.example.com"):
        with pytest.raises(SystemExit, match="trusted-proxies"):
            resolve_options(parse_args(["--trusted-proxies", bad]))
    assert DEFAULTS["trusted_proxies"] is None


def test_a_direct_local_client_is_exempt_only_on_a_page_served_to_this_machine():
    from specplay.page.guard import _address

    def request(host, forwarded=None):
        return SimpleNamespace(client=SimpleNamespace(host=host),
                               headers={"x-forwarded-for": forwarded} if forwarded else {})

    assert _address(request("127.0.0.1"), local=True) is None  # the operator, a load test on this machine
    assert _address(request("127.0.0.1"), local=False) == "127.0.0.1"  # 0.0.0.0 or --share: a local proxy
    assert _address(request("127.0.0.1", "203.0.113.7"), local=True) == "127.0.0.1"  # came through a proxy
    assert _address(request("203.0.113.7"), local=True) == "203.0.113.7"
