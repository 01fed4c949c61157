"""Where the playground keeps its files: presets in the repo, everything generated under one cache."""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
PRESETS_DIR = PROJECT_ROOT / "presets"
# Everything the playground writes (converted models, vLLM and torch compile caches) lives here, so a
# second start is warm and `rm -rf .cache` is a full reset. PLAYGROUND_CACHE moves it (e.g. a Space's /data).
CACHE_DIR = Path(os.environ.get("PLAYGROUND_CACHE", PROJECT_ROOT / ".cache")).resolve()
MODELS_DIR = CACHE_DIR / "models"
VLLM_CACHE_DIR = CACHE_DIR / "vllm"
PAGE_DIR = CACHE_DIR / "page"  # the page's files: history CSVs, and Gradio's copies of what it serves


def configure_cache_env() -> None:
    """Point vLLM's and torch's caches into the project cache (kept between runs: warm starts)."""
    os.environ.setdefault("VLLM_CACHE_ROOT", str(VLLM_CACHE_DIR))
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(CACHE_DIR / "torchinductor"))
    os.environ.setdefault("TRITON_CACHE_DIR", str(CACHE_DIR / "triton"))
    os.environ.setdefault("GRADIO_TEMP_DIR", str(PAGE_DIR / "gradio"))
