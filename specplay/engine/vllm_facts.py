"""What a vLLM build can do, read from its source with `ast` (nothing imported, nothing run), so the same
reader answers for the installed vLLM (engine.probes, cached on disk) and for a wheel that can't be
installed here (scripts/record_vllm_facts.py writes tests/fixtures/vllm-0.34-facts.json from the real 0.34
wheel). Every answer comes from vLLM's own definitions, never from a version number:

  methods            the values `SpeculativeConfig.method` takes (the `SpeculativeMethod` Literal, flattened)
  fields             SpeculativeConfig's fields
  rejection_sample_methods, draft_sample_methods   their Literals ([] where the field doesn't exist)
  parallel_drafting_methods   the methods vLLM lets set parallel_drafting; None: no such limit (0.31-0.33)
  has_v1_runner      vLLM still has Model Runner V1 (v1/worker/gpu_model_runner.py; 0.34 removed it, and with it
                     VLLM_USE_V2_MODEL_RUNNER and the config's `use_v2_model_runner`)
  has_v2_runner      it has Model Runner V2 (v1/worker/gpu/model_runner.py)
  suffix_needs_arctic   the suffix proposer (or its config check) imports arctic_inference
  draft_graphs_on_v2    V2's draft-model speculator captures CUDA graphs (a SpeculatorCudaGraphManager)
  has_custom_methods    vLLM has `registered_speculative_methods` (plugins may add methods at run time)
  speculators        per built-in method, what vLLM's own SpeculatorConfig says of it (0.34 and later; {} before):
                     draft_checkpoint (a DraftModelSpeculatorConfig: speculative_config names a model),
                     parallel_drafting (all drafts in one pass), uses_target_hidden_states, proposes_draft_tokens
  engine_args        EngineArgs' fields: per field the kinds of value it takes, its Literal choices and its help
                     (engine.vllm_engine_args); a preset's `target` section takes any of them
"""

from __future__ import annotations

import ast
import dataclasses
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from specplay.engine.vllm_engine_args import read_engine_args

Reader = Callable[[str], "str | None"]  # a path inside the vllm package -> its text, or None
SPECULATIVE = "config/speculative.py"
SUFFIX_SOURCES = ("v1/spec_decode/suffix_decoding.py", "v1/worker/gpu/spec_decode/suffix/speculator.py",
                  "v1/worker/gpu/spec_decode/suffix/config.py")
DRAFT_SPECULATOR = "v1/worker/gpu/spec_decode/standalone_ar/speculator.py"
V1_RUNNER, V2_RUNNER = "v1/worker/gpu_model_runner.py", "v1/worker/gpu/model_runner.py"
SPEC_DECODE = "v1/worker/gpu/spec_decode"
SPECULATOR_FLAGS = ("parallel_drafting", "uses_target_hidden_states", "proposes_draft_tokens")


def folder_reader(package: Path) -> Reader:
    """Files of an installed (or unpacked) vllm package folder."""
    def read(relative: str) -> str | None:
        path = package / relative
        return path.read_text() if path.is_file() else None
    return read


def wheel_reader(wheel: Path) -> Reader:
    """Files of a vllm wheel, read from the zip (the wheel is never installed)."""
    archive = zipfile.ZipFile(wheel)
    names = set(archive.namelist())

    def read(relative: str) -> str | None:
        name = f"vllm/{relative}"
        return archive.read(name).decode() if name in names else None
    return read


def _assignments(tree: ast.Module) -> dict[str, ast.expr]:
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            out[node.targets[0].id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            out[node.target.id] = node.value
    return out


def _literal(node: ast.expr | None, names: dict[str, ast.expr]) -> list[str]:
    """The strings of a `Literal[...]` (nested aliases and unions resolved by name)."""
    if node is None:
        return []
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Name):
        return _literal(names.get(node.id), names)
    if isinstance(node, ast.Subscript):
        inner = node.slice
        items = inner.elts if isinstance(inner, ast.Tuple) else [inner]
        return [value for item in items for value in _literal(item, names)]
    if isinstance(node, ast.BinOp):  # A | B
        return _literal(node.left, names) + _literal(node.right, names)
    return []


def _class(tree: ast.Module, name: str) -> ast.ClassDef | None:
    return next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name), None)


def _class_fields(cls: ast.ClassDef | None) -> list[str]:
    if cls is None:
        return []
    return [n.target.id for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
            and "ClassVar" not in ast.unparse(n.annotation)]


def _parallel_drafting_methods(cls: ast.ClassDef | None) -> list[str] | None:
    """The tuple in `if self.parallel_drafting and self.method not in (...)`: raise; None without one."""
    for node in ast.walk(cls) if cls is not None else ():
        if isinstance(node, ast.If) and "parallel_drafting" in ast.unparse(node.test):
            for compare in ast.walk(node.test):
                if (isinstance(compare, ast.Compare) and isinstance(compare.ops[0], ast.NotIn)
                        and ast.unparse(compare.left) == "self.method"
                        and isinstance(compare.comparators[0], (ast.Tuple, ast.List, ast.Set))):
                    return sorted(e.value for e in compare.comparators[0].elts if isinstance(e, ast.Constant))
    return None


def _imports(text: str | None) -> set[str]:
    """Every module and name a file imports (anywhere in it, lazy imports included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(text)) if text else ():
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.update([node.module or ""] + [alias.name for alias in node.names])
    return found


def _class_flags(read: Reader, relative: str, name: str, depth: int = 0) -> dict | None:
    """A SpeculatorConfig class's flags, its bases' first (followed through the spec_decode imports)."""
    text = read(relative) if depth < 8 else None
    tree = ast.parse(text) if text else None
    cls = _class(tree, name) if tree is not None else None
    if cls is None:
        return None
    flags: dict = {}
    for base in (b.id for b in cls.bases if isinstance(b, ast.Name)):
        origin = next((n.module for n in tree.body if isinstance(n, ast.ImportFrom) and n.module
                       and any(a.name == base for a in n.names)), None)
        where = f"{origin.replace('vllm.', '', 1).replace('.', '/')}.py" if origin else relative
        flags.update(_class_flags(read, where, base, depth + 1) or {})
    flags["draft_checkpoint"] = flags.get("draft_checkpoint", False) or name == "DraftModelSpeculatorConfig"
    for node in cls.body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        value = getattr(node, "value", None)
        if isinstance(target, ast.Name) and target.id in SPECULATOR_FLAGS and isinstance(value, ast.Constant):
            flags[target.id] = bool(value.value)
    return flags


def _speculators(read: Reader) -> dict:
    """vLLM's per-method SpeculatorConfig facts (`_CONFIG_BY_METHOD` in speculator_config.py)."""
    text = read(f"{SPEC_DECODE}/speculator_config.py")
    table = _assignments(ast.parse(text)).get("_CONFIG_BY_METHOD") if text else None
    out = {}
    for key, value in zip(getattr(table, "keys", []), getattr(table, "values", [])):
        args = [a.value for a in getattr(value, "args", []) if isinstance(a, ast.Constant)]
        if isinstance(key, ast.Constant) and len(args) == 2:
            flags = _class_flags(read, f"{SPEC_DECODE}/{args[0].replace('.', '/')}.py", args[1])
            if flags is not None:
                out[key.value] = {flag: flags.get(flag, flag == "proposes_draft_tokens")
                                  for flag in ("draft_checkpoint", *SPECULATOR_FLAGS)}
    return out


def read_facts(read: Reader) -> dict | None:
    """The facts of the vLLM whose files `read` returns (module doc); None without its speculative config."""
    text = read(SPECULATIVE)
    if text is None:
        return None
    tree = ast.parse(text)
    names = _assignments(tree)
    config = _class(tree, "SpeculativeConfig")
    suffix = set().union(*(_imports(read(path)) for path in SUFFIX_SOURCES)) | _imports(text)
    mtp = _literal(names.get("MTPModelTypes"), names)
    return {
        "methods": sorted(set(_literal(names.get("SpeculativeMethod"), names))),
        "mtp_aliases": sorted(set(mtp) - {"mtp"}),
        "fields": sorted(_class_fields(config)),
        "rejection_sample_methods": _literal(names.get("RejectionSampleMethod"), names),
        "draft_sample_methods": _literal(names.get("DraftSampleMethod"), names),
        "parallel_drafting_methods": _parallel_drafting_methods(config),
        "has_v1_runner": read(V1_RUNNER) is not None,
        "has_v2_runner": read(V2_RUNNER) is not None,
        "suffix_needs_arctic": bool({"arctic_inference", "has_arctic_inference"} & suffix
                                    or any(name.startswith("arctic_inference") for name in suffix)),
        "draft_graphs_on_v2": "SpeculatorCudaGraphManager" in _imports(read(DRAFT_SPECULATOR)),
        "has_custom_methods": "registered_speculative_methods" in _imports(text),
        "speculators": _speculators(read),
        "engine_args": read_engine_args(read),
    }


@dataclass(frozen=True)
class VllmFacts:
    """read_facts()'s answer, typed; `custom_methods`: methods registered by plugins (asked at run time)."""

    version: str
    methods: frozenset[str]
    fields: frozenset[str]
    mtp_aliases: frozenset[str] = frozenset()
    rejection_sample_methods: tuple[str, ...] = ()
    draft_sample_methods: tuple[str, ...] = ()
    parallel_drafting_methods: frozenset[str] | None = None
    has_v1_runner: bool = True
    has_v2_runner: bool = False
    suffix_needs_arctic: bool = True
    draft_graphs_on_v2: bool = False
    has_custom_methods: bool = False
    custom_methods: frozenset[str] = frozenset()
    speculators: dict = dataclasses.field(default_factory=dict, hash=False)
    engine_args: dict | None = dataclasses.field(default=None, hash=False)  # None: not recorded (don't judge)

    @property
    def all_methods(self) -> frozenset[str]:
        return self.methods | self.custom_methods

    @classmethod
    def from_dict(cls, data: dict) -> "VllmFacts":
        sets = {"methods", "fields", "mtp_aliases", "custom_methods"}
        kwargs = {}
        for f in dataclasses.fields(cls):
            if f.name not in data:
                continue
            value = data[f.name]
            if f.name in sets or (f.name == "parallel_drafting_methods" and value is not None):
                value = frozenset(value)
            elif f.name.endswith("_sample_methods"):
                value = tuple(value)
            kwargs[f.name] = value
        return cls(**kwargs)

    def to_dict(self) -> dict:
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = sorted(value) if isinstance(value, frozenset) else list(value) if isinstance(value, tuple) else value
        return out
