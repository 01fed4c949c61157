"""The preset schema (pydantic v2, unknown fields refused) and the rules that span fields. Every error is a
PresetError naming the file, the field and what was expected. `python -m specplay.presets.schema` writes
specplay/presets/schema.json (JSON Schema, for editors that validate YAML); a test keeps it current.
"""

from __future__ import annotations

import json
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from specplay.core.events import BASELINE
from specplay.presets.methods import MethodFacts
from specplay.presets.speculation import Speculation

SCHEMA_FILE = Path(__file__).resolve().parent / "schema.json"
Dtype = Literal["auto", "float32", "float16", "bfloat16"]
ModelRunner = Literal["auto", "v1", "v2"]


class PresetError(ValueError):
    """A preset is missing, malformed or unknown; the message names the file, field and expectation."""


class _Section(BaseModel):
    """A typed part of a preset, read by attribute (`preset.target.model`)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Target(_Section):
    """The target and its engine arguments: the typed keys below, which the playground reads, and any other
    engine argument of the installed vLLM (its EngineArgs field names), given verbatim to both engines and
    the serve lines; checked against the installed vLLM when the preset loads (presets.engine_args)."""

    model_config = ConfigDict(extra="allow", strict=True, frozen=True)
    model: str = Field(description="a hub id 'org/name', 'offline:NAME', 'bundled:NAME' or 'repo:PATH'")
    dtype: Dtype
    max_model_len: int = Field(ge=64, le=131072, description="an integer from 64 to 131072")
    tensor_parallel_size: int = Field(1, ge=1, description="1 or more")
    load_format: Literal["auto", "safetensors", "dummy"] = "auto"
    quantization: str | None = None
    enforce_eager: bool = False
    gpu_dtype: Dtype | None = Field(None, description="the dtype on a GPU, where it differs from dtype")


_UTIL = "a fraction of the GPU from 0.05 to 0.9"


class Memory(_Section):
    baseline_gpu_memory_utilization: float = Field(ge=0.05, le=0.9, description=_UTIL)
    speculative_gpu_memory_utilization: float = Field(ge=0.05, le=0.9, description=_UTIL)
    cpu_kvcache_space_gib: int = Field(ge=1, le=64, description="1 to 64 GiB")

    def gpu_share(self, role: str) -> float:
        """The GPU fraction of this engine (core.events' BASELINE or SPECULATIVE)."""
        return self.baseline_gpu_memory_utilization if role == BASELINE else self.speculative_gpu_memory_utilization


class PaysOff(_Section):
    cpu: str | None = Field(None, description="a sentence for the CPU (required when device is 'any')")
    gpu: str = Field(description="one sentence: where this preset is expected to pay on a GPU")

    def on(self, device: str) -> str | None:
        """The sentence for this kind of device ("cpu" or "gpu")."""
        return self.gpu if device == "gpu" else self.cpu


class Published(_Section):
    """A checkpoint's acceptance as published (paper, model card), shown beside the bench's measured one."""

    mean_acceptance_length: float = Field(ge=1, le=17, description="tokens per verification step (vLLM's mean "
                                          "acceptance length, 1 + accepted / drafts), from 1 to 17")
    source: str = Field(pattern=r"^https://\S+$", description="the https URL of the paper or model card that states it")
    conditions: str = Field(min_length=1, description="where it was measured: dataset, temperature, k, chain or tree")


class PresetFile(BaseModel):
    """One preset YAML file."""

    model_config = ConfigDict(extra="forbid", strict=True, title="Speculative Decoding Playground preset")
    name: str = Field(description="the file name without .yaml")
    description: str
    guide_section: str
    notes: str | None = None
    device: Literal["any", "gpu"] = Field(description="'any' (CPU or GPU) or 'gpu'")
    gpus: int | None = Field(None, ge=1, description="GPUs the pair needs (default: tensor_parallel_size)")
    target: Target
    speculative_config: Speculation  # the one model of it: typed keys, the rest kept for vLLM verbatim
    memory: Memory
    model_runner: ModelRunner = Field("auto", description="the speculative engine's vLLM model runner: "
                                      "VLLM_USE_V2_MODEL_RUNNER=0 (v1, vLLM 0.33 and older), =1 (v2), or vLLM's "
                                      "choice (auto; V2 is the only runner from vLLM 0.34)")
    prompt_input: Literal["text", "token_ids"] = "text"
    default_max_tokens: int = Field(128, ge=1, description="1 to half of max_model_len")
    ignore_eos: bool = False
    pays_off: PaysOff
    published: Published | None = Field(None, description="a published acceptance for this pairing, cited "
                                         "(mean_acceptance_length, source, conditions); leave out rather than guess")


@dataclass(frozen=True)
class Preset:
    name: str
    description: str
    guide_section: str
    notes: str
    device: str  # "any" (CPU or GPU) | "gpu"
    gpus: int
    target: Target
    speculative_config: Speculation  # typed (kind, facts, verifier, limits); `.vllm`: vLLM's keys verbatim
    memory: Memory
    prompt_input: str  # "text" | "token_ids"
    default_max_tokens: int
    ignore_eos: bool
    source: Path
    pays_off: PaysOff  # where this preset is expected to pay, per device, in one sentence
    model_runner: str = "auto"  # the speculative engine's: "v1" | "v2" | "auto"
    vllm_problem: str | None = None  # a key or method the installed vLLM lacks: the preset can't run here
    published: Published | None = None  # the checkpoint's published acceptance, where the preset cites one

    @property
    def method(self) -> str:
        """vLLM's method name, to show; facts are looked up by `kind`."""
        return self.speculative_config.method

    @property
    def kind(self) -> str:
        return self.speculative_config.kind

    @property
    def num_speculative_tokens(self) -> int:
        return self.speculative_config.k

    @property
    def draft_model(self) -> str | None:
        return self.speculative_config.draft_model

    @property
    def facts(self) -> MethodFacts:
        """The method table's row for this preset's kind (PARD is draft_model with parallel_drafting)."""
        return self.speculative_config.facts

    def model_refs(self) -> list[str]:
        return [self.target.model] + ([self.draft_model] if self.draft_model else [])


# -- pydantic's errors in the playground's words ------------------------------------------------------
_TYPE_WORDS = {"int_type": "an int", "int_parsing": "an int", "int_from_float": "an int", "string_type": "a str",
               "bool_type": "a bool", "bool_parsing": "a bool", "float_type": "a float", "float_parsing": "a float",
               "dict_type": "a mapping", "model_type": "a mapping", "model_attributes_type": "a mapping",
               "list_type": "a list"}


def _model_of(annotation):
    """The section model a field holds, an optional one's too (`Published | None`)."""
    return next((a for a in typing.get_args(annotation) if isinstance(a, type) and issubclass(a, BaseModel)),
                annotation)


def _field_info(loc: tuple):
    """The pydantic FieldInfo at an error's location, walking the nested sections; None off the schema."""
    model, info = PresetFile, None
    for part in loc:
        if not (isinstance(model, type) and issubclass(model, BaseModel)) or part not in model.model_fields:
            return None
        info = model.model_fields[part]
        model = _model_of(info.annotation)
    return info


def _message(source: Path, error: dict) -> str:
    loc = tuple(p for p in error["loc"] if isinstance(p, str))
    field, kind, got = ".".join(loc), error["type"], error.get("input")
    info = _field_info(loc)
    described = info.description if info is not None and info.description else None
    if kind == "missing":
        expected, got_text = f"{described or 'a value'} (required)", "nothing"
    elif kind == "extra_forbidden":
        parent = _field_info(loc[:-1]) if loc[:-1] else None
        fields = (_model_of(parent.annotation) if parent is not None else PresetFile).model_fields
        expected, got_text = f"one of the known fields ({', '.join(fields)})", "unknown field"
    elif kind == "literal_error":
        expected, got_text = f"one of {error['ctx']['expected']}", repr(got)
    elif kind in _TYPE_WORDS:
        expected, got_text = _TYPE_WORDS[kind], repr(got)
    else:  # a range: the field's description says it in words
        expected, got_text = described or error["msg"].lower(), repr(got)
    return f"{source.name}: field '{field}': expected {expected}, got {got_text}"


def parse(data, source: Path) -> PresetFile:
    """The file's fields, typed; PresetError naming the first problem."""
    if not isinstance(data, dict):
        raise PresetError(f"{source.name}: expected a YAML mapping of preset fields, got {type(data).__name__}")
    try:
        return PresetFile.model_validate(data)
    except ValidationError as exc:
        raise PresetError(_message(source, exc.errors()[0])) from None


def json_schema() -> dict:
    return PresetFile.model_json_schema()


def schema_text() -> str:
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    SCHEMA_FILE.write_text(schema_text())
    print(f"wrote {SCHEMA_FILE}")
