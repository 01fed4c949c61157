"""Dynamic k from the bench's k × concurrency table (specplay.bench.schedule): the best k per level as vLLM's
num_speculative_tokens_per_batch_size, and a preset saved with it that the catalog loads."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from specplay.bench.report import BenchRow
from specplay.bench.schedule import as_json, dynamic_k, save_preset
from specplay.core.paths import PRESETS_DIR
from specplay.presets.catalog import load_file

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results" / "h200-v034" / "h200-v034dyn-probe.json"


def h200_rows() -> list[BenchRow]:
    """The H200 run's fixed-k rows (vLLM 0.34, 8B + 1B draft, acceptance 0.7) as bench rows."""
    results = json.loads(RESULTS.read_text())["results"]
    base = results["baseline"]["batches"]
    rows = []
    for name, k in (("draft-k2-v2", 2), ("draft-k3-v2", 3)):
        for batch, figures in results[name]["batches"].items():
            rows.append(BenchRow(workload="token ids", temperature=0.0, concurrency=int(batch), k=k, acceptance=0.7,
                                 speedup=figures["tok_s_median"] / base[batch]["tok_s_median"]))
    return rows


def test_the_h200_table_becomes_a_schedule_of_the_best_k_per_level():
    dyn = dynamic_k(h200_rows())
    assert dyn.best_k == {1: 2, 8: 3, 32: 2, 64: 2}
    assert dyn.schedule == [[1, 7, 2], [8, 31, 3], [32, 1024, 2]]
    assert dyn.fragment == {"num_speculative_tokens": 3,
                            "num_speculative_tokens_per_batch_size": [[1, 7, 2], [8, 31, 3], [32, 1024, 2]]}
    assert "k=2 at 1 in flight" in dyn.sentence() and "k=3 at 8 in flight" in dyn.sentence()


def test_one_k_best_everywhere_needs_no_schedule_and_one_level_gives_none():
    rows = [BenchRow(workload="w", temperature=0.0, concurrency=c, k=k, speedup=s)
            for c in (1, 8) for k, s in ((2, 1.2), (3, 1.4))]
    dyn = dynamic_k(rows)
    assert dyn.schedule == [[1, 1024, 3]]
    assert "no schedule needed" in dyn.sentence()
    assert dynamic_k([r for r in rows if r.concurrency == 1]) is None
    assert as_json([]) is None
    # open-loop rows (a request rate) are not a concurrency level
    assert dynamic_k([replace(r, request_rate=4.0) for r in rows]) is None


def test_a_saved_preset_carries_the_schedule_and_loads(tmp_path):
    dyn = dynamic_k(h200_rows())
    path = save_preset(PRESETS_DIR / "dummy-llama8b-draft1b-k3.yaml", "my-dynamic-k", dyn, tmp_path)
    preset = load_file(path)
    spec = preset.speculative_config
    assert preset.name == "my-dynamic-k"
    assert spec["num_speculative_tokens_per_batch_size"] == [[1, 7, 2], [8, 31, 3], [32, 1024, 2]]
    assert spec["num_speculative_tokens"] == 3
    assert spec["synthetic_acceptance_rates"] == pytest.approx([0.7, 0.49, 0.343])
    with pytest.raises(ValueError, match="exists already"):
        save_preset(PRESETS_DIR / "dummy-llama8b-draft1b-k3.yaml", "my-dynamic-k", dyn, tmp_path)
    with pytest.raises(ValueError, match="not a preset name"):
        save_preset(PRESETS_DIR / "dummy-llama8b-draft1b-k3.yaml", "../evil", dyn, tmp_path)
