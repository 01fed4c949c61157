"""Serve the playground page: `python app.py [options]` (`--help` lists them). It only wires: the page
(specplay/page, its entry in `entry`) handed to its hosting (specplay/hosting: the options, serving, the
process's life cycle)."""

from __future__ import annotations

import sys

if __name__ == "__main__":  # required: vLLM spawns engine processes that re-import the main module
    from specplay.page.entry import main

    main(sys.argv[1:])
