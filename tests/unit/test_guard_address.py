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
    from specplay.page import ui
    from specplay.hosting import closing, guard
    from specplay.hosting.settings import PageSettings
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
    from specplay.hosting.guard import ADDRESS_PENDING

    page = page_with()  # no trusted proxies: X-Forwarded-For is the client's say, not believed
    rng = random.Random(32)
    codes = [join(page, f"{rng.getrandbits(64):016x}", random_address(rng)).status_code for _ in range(33)]
    assert codes.count(200) == ADDRESS_PENDING and codes.count(400) == 33 - ADDRESS_PENDING, codes


def test_behind_a_trusted_proxy_the_rightmost_untrusted_hop_is_the_address(page_with):
    from specplay.hosting.guard import ADDRESS_PENDING

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
    from specplay.hosting.options import AppSettings, parse_args, resolve_options, settings_from_options

    assert settings_from_options(resolve_options(parse_args([]))).trusted_proxies == ()
    args = parse_args(["--trusted-proxies", "127.0.0.1, 10.0.0.0/8"])
    assert settings_from_options(resolve_options(args)).trusted_proxies == ("127.0.0.1/32", "10.0.0.0/8")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PLAYGROUND_TRUSTED_PROXIES", "::1")
        assert resolve_options(parse_args([])).trusted_proxies == ("::1/128",)
        # the command line wins over the environment
        assert resolve_options(args).trusted_proxies == ("127.0.0.1/32", "10.0.0.0/8")
    for bad in ("*", "proxy.example.com"):
        with pytest.raises(SystemExit, match="trusted-proxies"):
            resolve_options(parse_args(["--trusted-proxies", bad]))
    assert AppSettings.model_fields["trusted_proxies"].default == ()


def test_a_direct_local_client_is_exempt_only_on_a_page_served_to_this_machine():
    from specplay.hosting.guard import counted_address as _address

    def request(host, forwarded=None):
        return SimpleNamespace(client=SimpleNamespace(host=host),
                               headers={"x-forwarded-for": forwarded} if forwarded else {})

    assert _address(request("127.0.0.1"), local=True) is None  # the operator, a load test on this machine
    assert _address(request("127.0.0.1"), local=False) == "127.0.0.1"  # 0.0.0.0 or --share: a local proxy
    assert _address(request("127.0.0.1", "203.0.113.7"), local=True) == "127.0.0.1"  # came through a proxy
    assert _address(request("203.0.113.7"), local=True) == "203.0.113.7"


def test_an_ipv6_64_is_one_address_and_ipv4_counts_once_in_either_spelling(page_with):
    """Issue 36, 6: addresses were compared as strings, so one IPv6 /64 (a single customer's, 2^64 addresses)
    queued a run per address, and 198.51.100.7 and ::ffff:198.51.100.7 counted as two."""
    from specplay.hosting.guard import ADDRESS_PENDING, address_key

    assert address_key("::ffff:198.51.100.7") == address_key("198.51.100.7") == "198.51.100.7"
    assert address_key("2001:db8:1:2::a") == address_key("2001:db8:1:2:ffff::1") == "2001:db8:1:2::/64"
    assert address_key("2001:db8:1:3::a") != address_key("2001:db8:1:2::a")
    page = page_with(trusted_proxies=("127.0.0.1",))
    codes = [join(page, f"v6-{i}", f"2001:db8:1:2::{i + 1:x}").status_code for i in range(ADDRESS_PENDING + 3)]
    assert codes == [200] * ADDRESS_PENDING + [400] * 3, codes
    assert join(page, "v6-other", "2001:db8:1:3::1").status_code == 200  # the next /64 is another network
    spellings = ["198.51.100.7", "::ffff:198.51.100.7"] * ADDRESS_PENDING
    codes = [join(page, f"v4-{i}", a).status_code for i, a in enumerate(spellings)]
    assert codes.count(200) == ADDRESS_PENDING, codes


def test_on_a_space_the_platforms_proxy_is_trusted_so_one_visitor_cannot_block_the_rest(page_with):
    """Issue 36, 2: on a Hugging Face Space every visitor's peer is the platform's proxy; untrusted, they all
    shared its 3 places (one visitor's 3 tabs: 0 of 10 others accepted). The Space sets SPACE_ID, and the page
    then trusts the private ranges the proxy comes from; here 127.0.0.1 stands in for the proxy's peer."""
    from specplay.hosting.options import SPACE_PROXIES, parse_args, resolve_options

    with pytest.MonkeyPatch.context() as env:
        env.setenv("SPACE_ID", "someone/speculative-playground")
        env.delenv("PLAYGROUND_TRUSTED_PROXIES", raising=False)
        space = resolve_options(parse_args([])).trusted_proxies
        assert "10.0.0.0/8" in space and "fc00::/7" in space and len(space) == len(SPACE_PROXIES.split(","))
        env.setenv("PLAYGROUND_TRUSTED_PROXIES", "10.1.0.0/16")  # the operator's own setting wins
        assert resolve_options(parse_args([])).trusted_proxies == ("10.1.0.0/16",)
    page = page_with(trusted_proxies=(*space, "127.0.0.1"))
    tabs = [join(page, f"tab-{i}", "203.0.113.50, 10.20.30.40").status_code for i in range(3)]
    others = [join(page, f"visitor-{i}", f"198.51.100.{i + 1}, 10.20.30.40").status_code for i in range(10)]
    assert tabs == [200] * 3 and others == [200] * 10, (tabs, others)
    untrusted = page_with()  # as before: the proxy's address is everyone's
    tabs = [join(untrusted, f"tab-{i}", "203.0.113.50").status_code for i in range(3)]
    others = [join(untrusted, f"visitor-{i}", f"198.51.100.{i + 1}").status_code for i in range(10)]
    assert tabs == [200] * 3 and others == [400] * 10
