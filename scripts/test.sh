#!/usr/bin/env bash
# Set up (first time only) and run the whole test suite on the CPU: real vLLM engines on the offline
# model, a real Gradio server, a real headless browser. About 15 minutes on 2 cores with a cold cache.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --test
export OMP_NUM_THREADS=1 PLAYGROUND_FORCE_CPU=1
exec .venv/bin/python -m pytest -v -rs tests "$@"
