"""The page's entry point: `python app.py`, the `specplay-page` console script and `python -m
specplay.page.entry` (what `specplay launch` starts). Serving is the hosting layer's (`hosting/server.py`); this
hands it the page, imported only once the options are good: `--help` stays instant, and vLLM's engine
processes, which re-import the main module, don't load Gradio."""

from __future__ import annotations

import sys


def load_page():
    from specplay.page import ui

    return ui


def main(argv=None) -> None:
    from specplay.hosting.server import main as serve_main

    serve_main(sys.argv[1:] if argv is None else argv, load_page)


if __name__ == "__main__":  # required: vLLM spawns engine processes that re-import the main module
    main()
