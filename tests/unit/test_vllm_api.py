"""The engine layer's vLLM surfaces are all in the installed vLLM (scripts/vllm_api_check.py; the same check
on the 0.33 and 0.34 wheels' source is in docs/results/vllm-0.33-api-check.txt and vllm-0.34-api-check.txt)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_every_surface_the_engine_layer_uses_is_in_the_installed_vllm():
    if importlib.util.find_spec("vllm") is None:
        pytest.skip("no vLLM installed")
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import vllm_api_check
    finally:
        sys.path.pop(0)
    missing = [f"{use} ({surface})" for surface, use, ok in vllm_api_check.check(vllm_api_check.package_dir(None))
               if not ok]
    assert not missing
    for release in ("0.33", "0.34"):
        assert "MISSING" not in (ROOT / "docs" / "results" / f"vllm-{release}-api-check.txt").read_text()
