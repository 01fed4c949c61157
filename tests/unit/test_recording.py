"""A recording (issue 42, 1): `compare --record FILE` writes the finished run with its provenance; it reads back
equal through `read_recording` alone, and a hand-edited, truncated, oversized or non-regular file is refused in
one line naming the bad field (exit 2 from the CLI). The run here is a real `compare` on a stand-in pair
(tests.ui_fixtures' FakePair replaying a synthetic run), so no engine starts."""

from __future__ import annotations

import functools
import json
import os
from datetime import datetime, timezone
from types import SimpleNamespace

import pytest

from specplay.cli.main import main, version
from specplay.core.events import BASELINE, SPECULATIVE
from specplay.core.hardware import Hardware
from specplay.core.reading import RECORDING_MAX_BYTES
from specplay.engine.telemetry import MemorySeries
from specplay.presets.catalog import get_preset
from specplay.run.recording import (Recording, RecordingError, provenance, read_recording,
                                    recording_of, write_recording)
from specplay.run.result import RunResult
from tests.ui_fixtures import FakePair, run_with_acceptance, synthetic_events

PRESET = "smollm2-ngram"


class RecordedPair(FakePair):
    """FakePair with the load times EnginePair's status reports (compare's result_on reads them)."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.status = SimpleNamespace(load_seconds={BASELINE: 1.5, SPECULATIVE: 2.5})


def stand_in_pair() -> RecordedPair:
    events = synthetic_events(list(range(9)), [[0], [1, 2, 3], [4], [5, 6, 7, 8]], k=4, dt=0.5)
    return RecordedPair(lambda request: events, preset=get_preset(PRESET), step_delay=0.001, load_s=0)


def record(tmp_path, *more) -> tuple[int, object]:
    path = tmp_path / "run.json"
    code = main(["compare", "--preset", PRESET, "--max-tokens", "9", "--prompt", "Say hi.", "--json",
                 "--record", str(path), *more], pair=stand_in_pair())
    return code, path


def test_compare_record_writes_a_recording_that_reads_back_equal(tmp_path, capsys):
    code, path = record(tmp_path)
    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    back = read_recording(path)
    assert Recording.model_validate_json(back.dump_json()) == back  # written and read again: equal
    run = back.run
    assert run.model_dump(mode="json")["speedup"] == printed["speedup"]  # the run the command printed
    assert run.baseline.token_ids == tuple(range(9)) and run.speculative.token_ids == tuple(range(9))
    assert len(run.baseline.step_times) == 9 and len(run.speculative.step_times) == 4  # both streams' times
    assert run.step_detail is not None and len(run.step_detail.steps) >= 3  # the verification steps
    assert (run.counters.num_drafts, run.counters.num_accepted_tokens) == (3, 5)
    assert run.load_seconds == {BASELINE: 1.5, SPECULATIVE: 2.5}
    assert run.request.max_tokens == 9 and back.prompt == "Say hi." and back.prompt_token_ids is None
    made = back.made
    assert made.preset == PRESET and made.backend == "in-process" and made.device == "cpu"
    assert made.device_name.startswith("CPU") and made.vllm_version and not made.dummy_weights
    assert made.speculative_config["method"] == "ngram"
    assert made.engine_args[SPECULATIVE]["speculative_config"]["num_speculative_tokens"] == 4
    assert "speculative_config" not in made.engine_args[BASELINE]
    assert made.made_at.tzinfo is not None and made.product_version == version()
    assert (datetime.now(timezone.utc) - made.made_at).total_seconds() < 600


def test_a_recording_with_memory_samples_and_token_ids_round_trips(tmp_path):
    _, c = run_with_acceptance()
    preset = get_preset(PRESET)
    run = RunResult.of(c, preset)
    hardware = Hardware(gpu_count=1, gpu_name="NVIDIA H100 80GB HBM3", cpu_cores=(0, 1))
    made = provenance(preset, hardware, "0.5.0", made_at=datetime(2026, 12, 6, 16, 0, tzinfo=timezone.utc))
    memory = [MemorySeries(BASELINE, (1.0, 1.25), (10 << 20, 11 << 20), (0.1, None)),
              MemorySeries(SPECULATIVE, (1.0,), (12 << 20,))]
    request = SimpleNamespace(prompt="", prompt_token_ids=(5, 6, 7), max_tokens=9, temperature=0)
    recording = recording_of(run, made, request, memory)
    path = write_recording(recording, tmp_path / "r.json")
    back = read_recording(path)
    assert back == recording and back.run == run.model_copy(update={"request": back.run.request})
    assert back.made.device_name == "1× NVIDIA H100 80GB HBM3" and back.made.device == "gpu"
    assert back.made.engine_args[BASELINE]["gpu_memory_utilization"] > 0
    assert back.prompt is None and back.prompt_key == "ids:5,6,7"
    assert back.memory[0].kv_cache_usage == (0.1, None) and back.memory[1].values == (12 << 20,)


def test_a_dummy_weight_preset_is_recorded_as_synthetic_acceptance():
    dummy = get_preset("dummy-llama8b-eagle-k3")
    made = provenance(dummy, Hardware(gpu_count=1, gpu_name="NVIDIA H100", cpu_cores=(0,)), "0.5.0", remote=True)
    assert made.dummy_weights and made.vllm_version is None and made.backend == "remote"
    assert made.device is None and made.engine_args == {} and made.speculative_config["method"] == "eagle"


def _edited(tmp_path, edit) -> str:
    code, path = record(tmp_path)
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))
    return str(path)


@pytest.mark.parametrize("edit, where", [
    (lambda d: d["run"]["baseline"].update(token_ids=[1, "two"]), "run.baseline.token_ids.1"),
    (lambda d: d["run"].update(speedup=float("1e99")), "run.speedup"),
    (lambda d: d["made"].update(dummy_weights="no"), "made.dummy_weights"),
    (lambda d: d["made"].pop("preset"), "made.preset"),
    (lambda d: d.update(format=2), "format"),
    (lambda d: d.update(surprise=1), "surprise"),
    (lambda d: d["made"]["speculative_config"].update(x=10**30), "made.speculative_config"),  # Any: bounded too
    (lambda d: d["made"]["engine_args"]["baseline"].update(x=functools.reduce(lambda x, _: [x], range(100), [])),
     "made.engine_args"),
])
def test_a_hand_edited_recording_is_refused_naming_its_field_and_diff_exits_2(tmp_path, capsys, edit, where):
    path = _edited(tmp_path, edit)
    capsys.readouterr()
    with pytest.raises(RecordingError, match=rf"{where}:"):
        read_recording(path)
    assert main(["diff", path, path]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and where in err, err


def test_a_truncated_an_oversized_or_a_non_regular_file_is_refused_in_one_line(tmp_path, capsys):
    _, path = record(tmp_path)
    text = path.read_text()
    path.write_text(text[: len(text) // 2])
    with pytest.raises(RecordingError, match="not JSON"):
        read_recording(path)
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(RECORDING_MAX_BYTES + 1)  # sparse: the cap is checked before anything is parsed
    with pytest.raises(RecordingError, match="over the 32 MiB limit"):
        read_recording(big)
    with pytest.raises(RecordingError, match="no such file \\(a folder\\)"):
        read_recording(tmp_path)
    if hasattr(os, "mkfifo"):  # a fifo with no writer would block a plain open: refused at once
        fifo = tmp_path / "fifo"
        os.mkfifo(fifo)
        with pytest.raises(RecordingError, match="not a regular file"):
            read_recording(fifo)
    with pytest.raises(RecordingError, match="no such file"):
        read_recording(tmp_path / "missing.json")


def test_record_to_an_unwritable_place_is_one_line_and_exit_2_after_the_report(tmp_path, capsys):
    code = main(["compare", "--preset", PRESET, "--max-tokens", "9", "--prompt", "Say hi.", "--json",
                 "--record", str(tmp_path / "no" / "such" / "dir" / "r.json")], pair=stand_in_pair())
    out = capsys.readouterr()
    assert code == 2 and json.loads(out.out)["identical"] is True and "--record" in out.err
