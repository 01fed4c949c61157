"""A recording (issue 42, 1): one finished run that can leave the server that made it. The run itself
(RunResult, dumped exactly: every digit, both token streams with their per-step times, the verification
steps, the counters), the prompt and request that made it, memory samples where the run has them, and its
provenance: where, with what vLLM and which engine arguments, when, and whether its acceptance is real.

One pydantic model; its exact dump is the file (`write_recording`), and `read_recording` is its one reader:
a regular file of at most RECORDING_MAX_BYTES read through core.reading (a FIFO or device named as such),
parsed by `Recording.model_validate_json`, a bad field named by its place in the file (RecordingError, one
line); the loosely typed parts (vLLM's engine arguments) are held to core.reading's depth and number bounds.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError, field_validator

from specplay.core.events import BASELINE, SPECULATIVE
from specplay.core.reading import RECORDING_MAX_BYTES, UnreadableInput, first_error, read_bytes, value_problem
from specplay.run.fields import EXACT, MAX_TOKENS, Flag, Short, Text, TokenId
from specplay.run.result import RequestInfo, RunResult

if TYPE_CHECKING:
    from specplay.presets.catalog import Preset

FORMAT = 1  # the file's format version: a reader refuses another one by name
MAX_SAMPLES = 1 << 16  # the page's sampler keeps 900 s at 4 Hz: 3600 per engine
Bytes = Annotated[int, Field(strict=True, ge=0, le=1 << 50)]
Share = Annotated[float, Field(strict=True, ge=0, le=1, allow_inf_nan=False)]
Time = Annotated[float, Field(strict=True, ge=0, le=1e12, allow_inf_nan=False)]  # time.monotonic()


class RecordingError(UnreadableInput):
    """Not a recording this version reads: the message is one line naming the file and the bad field."""


class _Model(BaseModel):
    # forbid: a hand-edited key that means nothing here is named, not silently dropped
    model_config = ConfigDict(frozen=True, extra="forbid")


class MemoryTrack(_Model):
    """One engine's memory samples (engine.telemetry's MemorySeries): its clock's stamps and bytes."""

    role: Literal["baseline", "speculative"]
    times: Annotated[tuple[Time, ...], Field(max_length=MAX_SAMPLES)]
    values: Annotated[tuple[Bytes, ...], Field(max_length=MAX_SAMPLES)]
    kv_cache_usage: Annotated[tuple[Share | None, ...], Field(max_length=MAX_SAMPLES)] = ()

    @classmethod
    def of(cls, series) -> "MemoryTrack":
        return cls.model_validate(series, from_attributes=True)


JsonArgs = dict[Short, Any]  # vLLM's engine arguments as JSON holds them (the file's edge: bounded by its size)


class Provenance(_Model):
    """Where and how the run was made, so a reader elsewhere knows what its numbers are of."""

    # remote servers: their device, vLLM and engine arguments are theirs, not this machine's: None, "remote
    # servers", None and {} (the run's `engines` carry what the servers report)
    device: Literal["cpu", "gpu"] | None
    device_name: Short  # "1× NVIDIA H100 80GB HBM3", "CPU, 2 core(s)"
    vllm_version: Short | None
    backend: Literal["in-process", "remote"]
    preset: Short
    engine_args: dict[Literal["baseline", "speculative"], JsonArgs]  # per role, as the preset gives them here
    speculative_config: JsonArgs
    made_at: AwareDatetime  # UTC
    dummy_weights: Flag  # load_format dummy: random weights, so the acceptance is synthetic
    product_version: Short

    def vllm(self, unknown: str) -> str:
        """"vLLM <version>" as every reader says it, or `unknown` where none was recorded (a remote run's)."""
        return f"vLLM {self.vllm_version}" if self.vllm_version else unknown

    @field_validator("engine_args", "speculative_config")
    @classmethod
    def _bounded(cls, value):
        problem = value_problem(value)  # Any inside: no inf, nan, 10^5000 or 10,000 levels reach a reader of the file
        if problem:
            raise ValueError(problem)
        return value


class Recording(_Model):
    format: Literal[1] = FORMAT
    made: Provenance
    prompt: Text | None = None  # the prompt text; None where the run was given token ids
    prompt_token_ids: Annotated[tuple[TokenId, ...], Field(max_length=MAX_TOKENS)] | None = None
    memory: Annotated[tuple[MemoryTrack, ...], Field(max_length=2)] = ()
    run: RunResult

    @property
    def prompt_key(self) -> str:
        """What pairs this recording with another of the same prompt (`specplay diff` over folders)."""
        if self.prompt is not None:
            return self.prompt
        return "ids:" + ",".join(map(str, self.prompt_token_ids or ()))

    def dump_json(self) -> str:
        return json.dumps(self.model_dump(mode="json", context=EXACT), allow_nan=False)


def provenance(preset, hardware, product_version: str, *, remote: bool = False,
               made_at: datetime | None = None) -> Provenance:
    """The provenance of a run of `preset` made now on `hardware` (or, `remote`, on two servers) by this
    version of the product (the CLI's `--version`: the entry point knows it, this layer doesn't import it)."""
    from specplay.engine.probes import vllm_version
    from specplay.presets.engines import engine_settings

    settings = {} if remote else dict(zip((BASELINE, SPECULATIVE), engine_settings(preset, hardware)))
    args = {role: s.engine_args for role, s in settings.items()}
    return Provenance(
        device=None if remote else hardware.device, device_name="remote servers" if remote else hardware.describe(),
        vllm_version=None if remote else vllm_version(), backend="remote" if remote else "in-process",
        preset=preset.name, engine_args=json.loads(json.dumps(args, default=str)),  # tuples as lists, as read back
        speculative_config=json.loads(json.dumps(preset.speculative_config.vllm, default=str)),
        made_at=made_at or datetime.now(timezone.utc), dummy_weights=preset.target.load_format == "dummy",
        product_version=product_version)


def recording_of(run: RunResult, made: Provenance, request=None, memory=()) -> Recording:
    """`run` recorded with its provenance, the `request` (a GenerationRequest) that made it and the memory
    samples (engine.telemetry MemorySeries) taken while it ran."""
    if request is not None and run.request is None:
        run = run.model_copy(update={"request": RequestInfo(max_tokens=request.max_tokens,
                                                            temperature=float(request.temperature))})
    ids = tuple(request.prompt_token_ids) if request is not None and request.prompt_token_ids is not None else None
    return Recording(made=made, run=run, prompt=request.prompt if request is not None and ids is None else None,
                     prompt_token_ids=ids, memory=tuple(MemoryTrack.of(s) for s in memory))


def write_recording(recording: Recording, path) -> Path:
    """The recording at `path`, written whole or not at all (a temporary file renamed over it)."""
    path = Path(path)
    part = path.with_name(path.name + ".part")
    try:
        part.write_text(recording.dump_json() + "\n")
        os.replace(part, path)
    except OSError:
        part.unlink(missing_ok=True)  # a full disk leaves no half file behind
        raise
    return path


def read_recording(path) -> Recording:
    """A recording back from its file; RecordingError (one line, the bad field named) when it isn't one."""
    try:
        return Recording.model_validate_json(read_bytes(path, RECORDING_MAX_BYTES, str(path)))
    except UnreadableInput as exc:
        raise RecordingError(str(exc)) from None
    except ValidationError as exc:
        raise RecordingError(first_error(str(path), exc)) from None


def read_playable(path, presets: dict) -> tuple[Recording, "Preset"]:
    """(recording, its Preset) of a file this version can play back: `read_recording`'s checks, and its preset
    in `presets` (its panes and figures need the preset's shape). The one rule for the page's picker and a
    lesson's steps alike; RecordingError (one line naming the file) otherwise."""
    recording = read_recording(path)
    preset = presets.get(recording.made.preset)
    if preset is None:
        raise RecordingError(f"{path}: preset {recording.made.preset!r} is not in this version's catalog")
    return recording, preset


def recording_paths(path) -> list[Path]:
    """A recording file, or the recordings (*.json) of a folder, sorted by name."""
    path = Path(path)
    return sorted(p for p in path.glob("*.json") if p.is_file()) if path.is_dir() else [path]
