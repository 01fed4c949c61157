"""Test set-up: real vLLM CPU engines on the offline model, one set of engines alive at a time.

The tiers are folders, and each folder's tests carry its marker: `unit/` (no vLLM engine: stand-in engines
behind real pages; the quick tier, `scripts/test.sh --quick`), `container/` (the image's files and the health
route), `page/` (`page`: the real app server, `python app.py`, one for the session, over HTTP and in a headless browser) and `engines/`
(`engines`: an in-process pair). Engines take 30-90 s to start on a small CPU, so the suite runs in that
order (`pytest_collection_modifyitems`): the tests without engines first (the app server loads behind them),
then the page's, then the pair's, grouped by preset. The smollm2 presets share their target, so the pool
moves from one to the next by replacing only the speculative engine, as the page does.
"""

import os
import threading
from contextlib import contextmanager
from pathlib import Path

# Before anything imports torch: one OpenMP thread per process (each engine is pinned to its own core).
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("PLAYGROUND_FORCE_CPU", "1")
os.environ.setdefault("PLAYGROUND_CPU_EAGER", "1")  # half the start time; test_remote checks compiled tokens
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
# What gradio_client downloads in the tests goes under tests/artifacts, so a test can tell that the app
# server (which doesn't inherit this) writes nothing to /tmp/gradio.
os.environ.setdefault("GRADIO_TEMP_DIR", os.path.join(os.path.dirname(__file__), "artifacts", "client-downloads"))

import pytest  # noqa: E402
from hypothesis import settings as hypothesis_settings  # noqa: E402

# Hypothesis's default 200 ms deadline per example fails a property test on a loaded 2-core machine (a quick-tier
# run beside engine tests, 2026-12-07: test_diff's symmetry check) though nothing is wrong: no deadline, and
# the same examples every run, so that CI and a developer see the same outcome.
hypothesis_settings.register_profile("suite", deadline=None, derandomize=True)
hypothesis_settings.load_profile("suite")

# The in-process pair's presets, in the order the suite visits them (each after the first: one engine swap).
PAIR_FIXTURES = {"ngram_pair": "smollm2-ngram", "layerskip_pair": "smollm2-layerskip-draft",
                 "hetero_pair": "smollm2-hetero-draft"}


# The in-process pairs (and the servers test_remote launches) give each engine's worker a core of its own: a
# concurrent run then takes 4.1 s where the default fair layout (both workers on one core) takes 6.8 (SmolLM2,
# 64 tokens, 2 cores, 2026-12-07), and this process is never pinned to the host core, so what it starts after
# (CLI processes, launched servers, a browser) gets both cores. The app server, the page as users run it, keeps
# the default (tests/ui_fixtures.AppServer), and tests/page/test_app_cores.py checks that layout.
SUITE_PAIR_LAYOUT = "per-engine"


@contextmanager
def suite_pair_layout():
    """The suite's layout for engines started inside this block (read when their settings are made)."""
    from specplay.core.hardware import CORE_LAYOUT_ENV

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CORE_LAYOUT_ENV, SUITE_PAIR_LAYOUT)
        yield


class PairPool:
    """The session's in-process pair. Asking for another preset with the same target swaps only the
    speculative engine (`switch_in_place`, the page's own switch); otherwise the old pair is shut down and
    a new one started. The shared app server is stopped first: two sets of engines would fight for the cores.
    What is loaded is read off the pair itself, so a test that swapped an engine (a bench's k) can't fool it."""

    def __init__(self):
        self.pair = None
        self._starting: threading.Thread | None = None

    def start_early(self, preset_name: str) -> None:
        """Load `preset_name` in a thread while tests that need no engines run: a pair's start is mostly
        one process importing vLLM at a time, and the browser tests on stand-in pairs leave the other core
        idle (2026-12-07: 40-60% of both cores idle through each). The next get() or close() waits for it;
        a failed start is simply started again there, where its error is reported."""
        if self.pair is None and self._starting is None:
            self._starting = threading.Thread(target=self._start_quietly, args=(preset_name,), daemon=True,
                                              name=f"pool-{preset_name}")
            self._starting.start()

    def _start_quietly(self, preset_name: str) -> None:
        try:
            self.get(preset_name)
        except Exception:  # get() in the test that needs it starts it again and fails there, with its message
            pass

    def _settle(self) -> None:
        thread = self._starting
        if thread is not None and thread is not threading.current_thread():
            thread.join()
            self._starting = None

    def get(self, preset_name: str):
        from specplay.run.pairs import open_pair, switch_in_place
        from specplay.presets.catalog import get_preset
        from tests.ui_fixtures import stop_shared_app

        self._settle()

        preset = get_preset(preset_name)
        if self.pair is not None and self.pair.ready and self.pair.tag == preset:
            return self.pair
        stop_shared_app()
        with suite_pair_layout():
            if self.pair is not None and self.pair.ready:
                try:
                    if switch_in_place(self.pair, preset):
                        return self.pair
                except Exception:
                    self.close()
                    raise
            self.close()
            pair = open_pair(preset)
            try:
                pair.start()
            except Exception:
                pair.shutdown()
                raise
        self.pair = pair
        return pair

    def close(self):
        self._settle()
        if self.pair is not None:
            self.pair.shutdown()
        self.pair = None


_POOL = PairPool()


@pytest.fixture(scope="session")
def pair_pool():
    yield _POOL
    _POOL.close()


# Function-scoped on purpose: the pool's pair object stays the same across a swap, so a test asks for its
# preset each time (free when it is already loaded) and can never run on another preset's engine.
@pytest.fixture
def ngram_pair(pair_pool):
    return pair_pool.get("smollm2-ngram")


@pytest.fixture
def layerskip_pair(pair_pool):
    return pair_pool.get("smollm2-layerskip-draft")


@pytest.fixture
def hetero_pair(pair_pool):
    return pair_pool.get("smollm2-hetero-draft")


@pytest.fixture(scope="module")
def app(pair_pool):
    """The real `python app.py` server (smollm2-ngram), shared by the UI test modules."""
    from tests.ui_fixtures import shared_app

    pair_pool.close()  # one set of engines on the cores at a time
    return shared_app()


TIERS = {"engines": "engines", "page": "page", "container": "container"}  # folder -> marker


def tier_of(item) -> str | None:
    folder = Path(str(item.fspath)).parent.name
    return TIERS.get(folder)


def suite_order(item) -> tuple:
    """(group, preset, position): the tests without engines, then the page's, then the in-process pair's,
    preset by preset in PAIR_FIXTURES' order; `order(n)` places a test within its group."""
    marker = item.get_closest_marker("order")
    position = marker.args[0] if marker else 0
    if item.get_closest_marker("own_engines"):  # with the in-process engines' tests, after the pool's pairs: its
        return 2, len(PAIR_FIXTURES), position  # vLLM import is then done (first, it took 24 s of the app's load)
    if item.get_closest_marker("page"):
        if "app" not in getattr(item, "fixturenames", ()):  # a browser on stand-in pairs: after the app's
            return 1, 1, position                             # tests, while the first pair loads (start_early)
        return 1, 0, position
    if item.get_closest_marker("engines"):
        names = set(getattr(item, "fixturenames", ()))
        if "remote_servers" in names:  # last: launched servers, once the in-process engines are gone
            return 3, 0, position
        presets = [i for i, name in enumerate(PAIR_FIXTURES) if name in names]
        return 2, max(presets) if presets else len(PAIR_FIXTURES), position
    slow = Path(str(item.fspath)).name in SLOW_ENGINE_FREE_FILES
    return 0, 0 if slow else 1, position


# The engine-free tests' slowest files (a clean clone's --durations, 2026-12-07: 40-85 s each in 4 workers),
# collected first: pytest-xdist hands files out in collection order, and one of these started last kept a
# worker busy for a minute after the others had finished (both cores 10-37% idle while the page tests waited).
SLOW_ENGINE_FREE_FILES = ("test_presets_in_vllm_config.py", "test_visitors.py", "test_hostile_inputs.py",
                          "test_cli.py", "test_guard_queue.py", "test_guard_address.py", "test_public_page_doors.py",
                          "test_presets.py", "test_own_pair.py", "test_public_page_visitors.py", "test_methods.py")


def pytest_collection_modifyitems(session, config, items):
    for item in items:
        tier = tier_of(item)
        if tier:
            item.add_marker(tier)
    items.sort(key=suite_order)  # stable: file order among equal keys


def pytest_collection_finish(session):
    # Read off the tests that will run, after -m/-k deselected theirs (this file's modifyitems runs before
    # them), and only those on the app: the quick tier loaded the app's engines behind it for nothing.
    session.config._playground_needs_app = any("app" in getattr(item, "fixturenames", ()) for item in session.items)


def pytest_runtest_teardown(item, nextitem):
    # A test's own engines under the default fair layout (a CLI compare's draft engine, an in-process page)
    # pin this process to the host core. Left so, everything started after inherits one core: `specplay
    # launch`'s servers then imported on one core while the other idled (2026-12-07: 49% idle for 110 s).
    from specplay.core.hardware import pin_process, usable_cores

    cores = usable_cores()
    if set(os.sched_getaffinity(0)) != set(cores):
        pin_process(cores)


def pytest_runtest_setup(item):
    # The app server's engines take minutes to load, one core at a time: start it as soon as the tests that
    # start engines of their own are done, and let the engine-free tests run meanwhile (in this process, or
    # beside it: scripts/test.sh runs them in their own).
    if getattr(item.config, "_playground_needs_app", False) and not item.get_closest_marker("own_engines"):
        from tests.ui_fixtures import start_shared_app

        item.config._playground_needs_app = False  # once
        start_shared_app()
    if suite_order(item)[0] >= 2 and not getattr(item.config, "_playground_launch_started", False):
        _launch_when_the_pool_is_done(item)
    if suite_order(item)[:2] == (1, 1) and not getattr(item.config, "_playground_pool_started", False):
        # the app's tests are done (its last one stopped it): the in-process pairs' first preset loads
        # behind the browser tests on stand-in pairs
        item.config._playground_pool_started = True
        first = next((name for later in item.session.items[item.session.items.index(item):]
                      for name in PAIR_FIXTURES if name in getattr(later, "fixturenames", ())), None)
        if first is not None:
            from tests.ui_fixtures import stop_shared_app

            stop_shared_app()
            _POOL.start_early(PAIR_FIXTURES[first])


POOL_FIXTURES = {*PAIR_FIXTURES, "pair_pool"}


def _launch_when_the_pool_is_done(item) -> None:
    """The remote tests' `specplay launch` starts as soon as no test left uses the in-process pool (the pool's
    shutdown test is done: the launch's sockets can't land in its temp-folder check), beside the tests that
    start engines of their own (tests/launched.py says why)."""
    rest = item.session.items[item.session.items.index(item):]
    uses = [set(getattr(later, "fixturenames", ())) for later in rest]
    remote = [names for names in uses if "remote_servers" in names]
    if remote and not any(names & POOL_FIXTURES for names in uses if "remote_servers" not in names):
        from tests import launched

        item.config._playground_launch_started = True
        launched.start_early()


def pytest_sessionfinish(session, exitstatus):
    from tests import launched

    launched.stop_early()  # one started early that no test took
