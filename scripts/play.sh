#!/usr/bin/env bash
# Set up (first time only) and start the playground page: http://localhost:7860 by default.
# Arguments go to app.py (see `scripts/play.sh --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/python app.py "$@"
