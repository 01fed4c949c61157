"""Serve the playground page: `python app.py [options]` (`--help` lists them). What it does lives in
specplay/page: the options in `options`, serving in `server`, the process's life cycle in `process`."""

from __future__ import annotations

import sys

if __name__ == "__main__":  # required: vLLM spawns engine processes that re-import the main module
    from specplay.page.server import main

    main(sys.argv[1:])
