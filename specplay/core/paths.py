"""Where the playground keeps its files: presets and workloads inside the package, everything generated
under one cache."""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent
# A source checkout (the README's set-up, a Space running app.py) keeps its cache beside the code; an
# installed package keeps it in the user's cache folder.
PROJECT_ROOT = PACKAGE_DIR.parent
_CHECKOUT = (PROJECT_ROOT / "pyproject.toml").is_file() and (PROJECT_ROOT / "app.py").is_file()
# Package data, so an installed wheel carries them (pyproject.toml's package-data).
PRESETS_DIR = PACKAGE_DIR / "presets" / "data"
BUNDLED_MODELS_DIR = PRESETS_DIR / "models"  # config-only models for load_format: dummy (`bundled:NAME`)
WORKLOADS_DIR = PACKAGE_DIR / "bench" / "data"
# Recorded runs the page offers by default (app.py --recordings): GPU runs a CPU page can replay. In a
# checkout (a Space's), not in a wheel: where the folder is missing, the page offers none.
RECORDINGS_DIR = PROJECT_ROOT / "docs" / "results" / "recordings"
# Everything the playground writes (converted models, vLLM and torch compile caches) lives here, so a
# second start is warm and `rm -rf .cache` is a full reset. PLAYGROUND_CACHE moves it (e.g. a Space's /data).
_DEFAULT_CACHE = PROJECT_ROOT / ".cache" if _CHECKOUT else Path.home() / ".cache" / "specplay"
CACHE_DIR = Path(os.environ.get("PLAYGROUND_CACHE", _DEFAULT_CACHE)).resolve()
MODELS_DIR = CACHE_DIR / "models"
VLLM_CACHE_DIR = CACHE_DIR / "vllm"
PAGE_DIR = CACHE_DIR / "page"  # the page's files: history CSVs, and Gradio's copies of what it serves


def configure_cache_env() -> None:
    """Point vLLM's and torch's caches into the project cache (kept between runs: warm starts)."""
    os.environ.setdefault("VLLM_CACHE_ROOT", str(VLLM_CACHE_DIR))
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(CACHE_DIR / "torchinductor"))
    os.environ.setdefault("TRITON_CACHE_DIR", str(CACHE_DIR / "triton"))
    os.environ.setdefault("GRADIO_TEMP_DIR", str(PAGE_DIR / "gradio"))
