"""`specplay diff A B` (issue 42, 4): two recordings or two bench results, per prompt or per bench row, with one
noise rule (intervals that don't overlap, else the bench's 2% tie margin), which factor moved, a table and
--json, and --fail-if-slower's exit codes. Recordings and bench reports are made through their models."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specplay.bench.diff import NOISE_RULE, Figure, beyond_noise, diff
from specplay.bench.report import BenchReport, BenchRow
from specplay.cli.main import main
from specplay.presets.catalog import get_preset
from specplay.run.noise import Interval
from specplay.run.recording import Provenance, Recording, write_recording
from specplay.run.result import RunResult
from tests.ui_fixtures import run_with_acceptance

RUN = RunResult.of(run_with_acceptance()[1], get_preset("smollm2-ngram"))


def made(vllm: str) -> Provenance:
    return Provenance(device="gpu", device_name="1× NVIDIA H100 80GB HBM3", vllm_version=vllm, backend="in-process",
                      preset="llama8b-eagle3", engine_args={"baseline": {"model": "m"}, "speculative": {"model": "m"}},
                      speculative_config={"method": "eagle3", "num_speculative_tokens": 3},
                      made_at=datetime(2026, 12, 6, 16, 0, tzinfo=timezone.utc), dummy_weights=False,
                      product_version="0.5.0")


def recording(vllm: str, speedup: float, per_step: float, cost: float, spread: float | None = 0.05,
              prompt: str = "Rewrite this paragraph formally.") -> Recording:
    around = (lambda v: Interval(low=v - spread, high=v + spread)) if spread is not None else (lambda v: None)
    run = RUN.model_copy(update={
        "speedup": speedup, "tokens_per_step_ratio": per_step, "step_cost_ratio": cost,
        "speedup_interval": around(speedup), "tokens_per_step_ratio_interval": around(per_step),
        "step_cost_ratio_interval": around(cost)})
    return Recording(made=made(vllm), prompt=prompt, run=run)


def write(tmp_path, name: str, rec: Recording) -> str:
    return str(write_recording(rec, tmp_path / name))


def test_the_noise_rule_intervals_where_both_have_one_else_the_tie_margin():
    a, b = Interval(low=1.3, high=1.5), Interval(low=1.45, high=1.6)
    assert not beyond_noise(1.4, 1.52, a, b)  # 8.6% apart, but the intervals overlap
    assert beyond_noise(1.4, 1.7, a, Interval(low=1.6, high=1.8))
    assert not beyond_noise(1.4, 1.42, None, None) and beyond_noise(1.4, 1.45, None, None)  # 1.4% / 3.6%
    assert beyond_noise(1.4, 1.3, a, None)  # one side without an interval: the margin
    assert not beyond_noise(None, 1.3, None, None) and "2%" in NOISE_RULE
    assert not beyond_noise(1.0, 1.0201, None, None)  # 1.0201 less 2% is below 1.0: a tie either way round
    assert not beyond_noise(1.0201, 1.0, None, None) and beyond_noise(1.0, 1.021, None, None)


figures = st.floats(0.05, 20, allow_nan=False)
intervals = st.one_of(st.none(), st.tuples(figures, figures).map(lambda t: Interval(low=min(t), high=max(t))))


@given(figures, figures, intervals, intervals)
def test_the_rule_is_symmetric_so_a_diff_and_its_reverse_agree(a, b, a_interval, b_interval):
    assert beyond_noise(a, b, a_interval, b_interval) == beyond_noise(b, a, b_interval, a_interval)
    ab, ba = Figure.of("speedup", 1, a, b, a_interval, b_interval), Figure.of("speedup", 1, b, a, b_interval, a_interval)
    assert ab.beyond_noise == ba.beyond_noise
    assert ab.better is None or a == b or ab.better is not ba.better  # faster one way is slower the other


def test_recordings_slower_beyond_noise_name_the_factor_and_fail_if_slower(tmp_path, capsys):
    a = write(tmp_path, "a.json", recording("0.33.0", 1.50, 2.4, 1.60))
    b = write(tmp_path, "b.json", recording("0.34.0", 1.20, 2.4, 2.00))  # the step got dearer; acceptance held
    result = diff(a, b)
    (row,) = result.rows
    assert result.kind == "recordings" and result.slower and row.slower
    assert row.moved == ["step cost worse"] and not row.figure("tokens_per_step_ratio").beyond_noise
    assert row.figure("speedup").change == pytest.approx(-0.2)
    assert "vLLM 0.33.0" in result.a.about and "vLLM 0.34.0" in result.b.about
    assert main(["diff", a, b]) == 0  # without the flag a slowdown is reported, not failed
    table = capsys.readouterr().out
    assert "WORSE" in table and "-20.0%" in table and "verdict: slower in B" in table and "step cost worse" in table
    assert "1.500 [1.450, 1.550]" in table
    assert main(["diff", a, b, "--fail-if-slower"]) == 1
    assert main(["diff", b, a, "--fail-if-slower"]) == 0  # the other way round it got faster
    capsys.readouterr()
    assert main(["diff", a, b, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["slower"] is True and out["rows"][0]["moved"] == ["step cost worse"]
    assert out["rows"][0]["figures"][0]["a_interval"] == [1.45, 1.55]  # an interval's JSON


def test_recordings_within_noise_pass_fail_if_slower(tmp_path, capsys):
    a = write(tmp_path, "a.json", recording("0.33.0", 1.50, 2.4, 1.60, spread=0.2))
    b = write(tmp_path, "b.json", recording("0.34.0", 1.40, 2.3, 1.64, spread=0.2))  # 6.7% lower, overlapping
    assert not diff(a, b).slower
    assert main(["diff", a, b, "--fail-if-slower"]) == 0
    assert "within noise" in capsys.readouterr().out
    c = write(tmp_path, "c.json", recording("0.34.0", 1.40, 2.3, 1.64, spread=None))  # no intervals: the margin
    assert main(["diff", a, c, "--fail-if-slower"]) == 1


def test_folders_of_recordings_pair_by_prompt(tmp_path, capsys):
    for side, speedup in (("a", 1.5), ("b", 1.51)):
        (tmp_path / side).mkdir()
        write(tmp_path / side, "one.json", recording("x", speedup, 2.4, 1.6))
        write(tmp_path / side, f"{side}-only.json", recording("x", 1.0, 1.0, 1.0, prompt=f"only {side}"))
    result = diff(tmp_path / "a", tmp_path / "b")
    assert [row.key for row in result.rows] == ["Rewrite this paragraph formally."] and not result.slower
    assert result.only_a == ("only a",) and result.only_b == ("only b",)
    single = diff(tmp_path / "a" / "one.json", tmp_path / "b" / "b-only.json")  # two files: compared, with a note
    assert "different prompts" in single.rows[0].note


def row(k: int, concurrency: int, speedup: float, per_step: float = 2.0, cost: float | None = None) -> BenchRow:
    return BenchRow(workload="chat", temperature=0.0, concurrency=concurrency, k=k, speedup=speedup,
                    tokens_per_step_ratio=per_step, step_cost_ratio=cost or per_step / speedup)


def bench(tmp_path, name: str, *rows: BenchRow) -> str:
    (tmp_path / name).mkdir()
    BenchReport(preset="llama8b-eagle3", rows=rows, started_utc="2026-12-06T16:00:00Z").save(
        tmp_path / name / "bench.json")
    return str(tmp_path / name)


def test_bench_rows_diff_by_setting_with_the_tie_margin(tmp_path, capsys):
    a = bench(tmp_path, "a", row(4, 1, 1.80), row(4, 8, 1.20), row(2, 1, 1.5), row(2, 1, 1.7))
    b = bench(tmp_path, "b", row(4, 1, 1.79), row(4, 8, 1.10, per_step=1.8), row(2, 1, 1.6), row(3, 1, 1.5))
    result = diff(a, b)
    keys = {r.key: r for r in result.rows}
    assert set(keys) == {"chat k=4 c=1 T=0", "chat k=4 c=8 T=0", "chat k=2 c=1 T=0"}
    assert not keys["chat k=4 c=1 T=0"].slower  # 0.6% lower: within the 2% margin
    assert keys["chat k=4 c=8 T=0"].slower and keys["chat k=4 c=8 T=0"].moved[0] == "tokens/step worse"
    assert keys["chat k=2 c=1 T=0"].figure("speedup").a == pytest.approx((1.5 * 1.7) ** 0.5)  # repeats: geomean
    assert result.only_b == ("chat k=3 c=1 T=0",) and result.only_a == ()
    assert main(["diff", a, b, "--fail-if-slower"]) == 1
    assert main(["diff", str(tmp_path / "a" / "bench.json"), a, "--fail-if-slower"]) == 0  # the same: no change
    assert "chat k=4 c=8 T=0" in capsys.readouterr().out


def test_mixed_kinds_and_bad_bench_files_exit_2_in_one_line(tmp_path, capsys):
    a = bench(tmp_path, "a", row(4, 1, 1.8))
    rec = write(tmp_path, "r.json", recording("x", 1.5, 2.4, 1.6))
    assert main(["diff", a, rec]) == 2
    assert "one is a bench result" in capsys.readouterr().err
    bad = tmp_path / "bad"
    bad.mkdir()
    data = json.loads((tmp_path / "a" / "bench.json").read_text())
    data["rows"][0]["concurrency"] = "many"
    (bad / "bench.json").write_text(json.dumps(data))
    assert main(["diff", a, str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "rows.0.concurrency" in err, err
