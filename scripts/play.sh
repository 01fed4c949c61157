#!/usr/bin/env bash
# Set up (first time only) and start the playground page: http://127.0.0.1:7860 by default.
# Arguments go to app.py; `scripts/play.sh --help` prints them without setting anything up.
set -euo pipefail
cd "$(dirname "$0")/.."
for arg in "$@"; do
  if [ "$arg" = "-h" ] || [ "$arg" = "--help" ]; then
    # app.py's help needs only the standard library; use the project's Python once set-up has made it
    python=.venv/bin/python; [ -x "$python" ] || python=${PYTHON:-python3}
    echo "usage: scripts/play.sh [app.py options]   (sets up .venv on first use, then runs app.py)"
    exec "$python" app.py --help
  fi
done
scripts/setup.sh
exec .venv/bin/python app.py "$@"
