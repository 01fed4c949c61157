#!/usr/bin/env bash
# Set up (first time only) and run the test suite on the CPU: real vLLM engines on the offline model, a real
# Gradio server, a real headless browser. 17:36 to 18:32 on 2 cores from a clean clone (three runs), set-up (about a
# minute) included, nothing else running (2026-12-08, 897 tests; 18:09 to 24:33 the day before: this machine's speed
# moves by a third and more); runs beside other work take up to twice as long (docs/benchmarks.md, "How long does
# the test suite take?").
#   scripts/test.sh            every test (what CI runs)
#   scripts/test.sh --quick    the tests without engines or a server (tests/unit, tests/container), 4 pytest-xdist
#                              workers a file each (most of these tests wait on a page or a fake engine's clock,
#                              so 4 beat 2 on 2 cores): 2:05-2:08 on a quiet machine, 2:48 on a slow one (2026-12-07, 806 tests)
# Other arguments go to pytest (e.g. scripts/test.sh tests/engines -k ngram).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --test
# PLAYGROUND_CPU_EAGER: engines without torch.compile start in half the time (same tokens: benchmarks/eager_check.py).
export OMP_NUM_THREADS=1 PLAYGROUND_FORCE_CPU=1 PLAYGROUND_CPU_EAGER=${PLAYGROUND_CPU_EAGER:-1}
QUICK="not engines and not page and not own_engines"  # the engine-free tests: tests/unit and tests/container
if [ "${1:-}" = "--quick" ]; then
  shift
  exec .venv/bin/python -m pytest -q -rs -n 4 --dist loadfile -m "$QUICK" tests/unit tests/container "$@"
fi
# A test path given (scripts/test.sh tests/engines -k ngram): only that, in one process
for arg in "$@"; do
  if [ -e "${arg%%::*}" ]; then exec .venv/bin/python -m pytest -v -rs --durations=25 "$@"; fi
done
# Every test. The engine-free ones (tests/unit, tests/container) run first, in 4 xdist workers, while the rest
# (one process: the page's app server, then the in-process pairs, then launched servers, one set of engines at
# a time) loads the app server; its first test needing the app waits for them to end (PLAYGROUND_TESTS_AFTER),
# so no engine test shares the cores with them. (Beside the engines' tests, 2 workers took 10 min and slowed
# those tests by as much; in one process they took 6:27 of a 24:44 run.)
log=$(mktemp) after=$(mktemp -u)
# The flag is written whatever pytest's exit status: under `set -e` a failing pytest would end the subshell
# before it, and the other process would wait out its 30-minute limit on it (CI, 2026-12-06: 3008 s).
( set +e; .venv/bin/python -m pytest -q -rs -n 4 --dist loadfile -p no:cacheprovider -m "$QUICK" tests/unit \
    tests/container "$@" >"$log" 2>&1; echo $? >"$after" ) &
set +e
PLAYGROUND_TESTS_AFTER=$after .venv/bin/python -m pytest -v -rs --durations=25 -m "not ($QUICK)" tests "$@"
rest=$?
wait
echo "=== the engine-free tests (tests/unit, tests/container), run while the app server loaded ==="
cat "$log"
quick_rc=$(cat "$after" 2>/dev/null || echo 1)
rm -f "$log" "$after"
[ "$rest" = 0 ] && [ "$quick_rc" = 0 ]
