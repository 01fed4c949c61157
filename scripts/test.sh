#!/usr/bin/env bash
# Set up (first time only) and run the test suite on the CPU: real vLLM engines on the offline model, a real
# Gradio server, a real headless browser. 17-46 minutes on 2 cores from a clean clone, set-up included
# (46:09 on 2026-12-03 at 6399b47, 595 passed, 1 failed, with other test runs beside it; 26:02 on 2026-12-02,
# 456 passed; machines differ day to day).
#   scripts/test.sh            every test (what CI runs)
#   scripts/test.sh --quick    the tests without engines or a server (tests/unit, tests/container), 4 pytest-xdist
#                              workers a file each (most of these tests wait on a page or a fake engine's clock,
#                              so 4 beat 2 on 2 cores): 1:54 on a quiet machine (2026-12-03), 4:58 in one process
# Other arguments go to pytest (e.g. scripts/test.sh tests/engines -k ngram).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --test
# PLAYGROUND_CPU_EAGER: engines without torch.compile start in half the time (same tokens: benchmarks/eager_check.py).
export OMP_NUM_THREADS=1 PLAYGROUND_FORCE_CPU=1 PLAYGROUND_CPU_EAGER=${PLAYGROUND_CPU_EAGER:-1}
if [ "${1:-}" = "--quick" ]; then
  shift
  exec .venv/bin/python -m pytest -q -rs -n 4 --dist loadfile -m "not engines and not page and not own_engines" \
    tests/unit tests/container "$@"
fi
# The whole of tests/ unless a test path is given (scripts/test.sh tests/engines -k ngram runs only that)
where=(tests)
for arg in "$@"; do
  if [ -e "${arg%%::*}" ]; then where=(); break; fi
done
exec .venv/bin/python -m pytest -v -rs --durations=25 "${where[@]}" "$@"
