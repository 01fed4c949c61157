"""One model per shape, dicts only at the edges (issue 40, 1): no product class is a mapping (no `Mapping`,
`MutableMapping`, `dict` or `UserDict` base), the typed models have no dict face (`__getitem__`, `.get`), and
no product module indexes a preset's typed sections like a dict."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from specplay.bench.advice import Advice
from specplay.bench.report import BenchReport, BenchRow, Environment, RateAdvice, RunFigures
from specplay.bench.schedule import DynamicKReport, ScheduleFragment
from specplay.engine.base import EngineInfo
from specplay.presets.schema import Memory, PaysOff, Published, Target
from specplay.presets.speculation import Speculation

ROOT = Path(__file__).resolve().parents[2]
MAPPING_BASES = {"Mapping", "MutableMapping", "dict", "UserDict", "OrderedDict", "defaultdict"}


def _base_name(node: ast.expr) -> str:
    while isinstance(node, ast.Subscript):  # Mapping[str, int]
        node = node.value
    if isinstance(node, ast.Attribute):  # collections.abc.Mapping, typing.Mapping
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def mapping_classes(root: Path = ROOT / "specplay") -> set[tuple[str, str]]:
    found = set()
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ClassDef) and any(_base_name(b) in MAPPING_BASES for b in node.bases):
                found.add((str(path.relative_to(root.parent)), node.name))
    return found


def test_no_product_class_is_a_mapping():
    assert mapping_classes() == set()


def test_the_check_sees_every_spelling_of_a_mapping_base(tmp_path):
    (tmp_path / "m.py").write_text("import collections.abc\nfrom typing import Mapping\n"
                                   "class A(collections.abc.Mapping): pass\nclass B(Mapping[str, int]): pass\n"
                                   "class C(dict): pass\nclass D: pass\n")
    assert {name for _, name in mapping_classes(tmp_path)} == {"A", "B", "C"}


@pytest.mark.parametrize("model", [Speculation, Target, Memory, PaysOff, Published, DynamicKReport,
                                   ScheduleFragment, BenchReport, BenchRow, Environment, RateAdvice, Advice,
                                   EngineInfo, RunFigures])
def test_the_typed_models_have_no_dict_face(model):
    """Each is one pydantic model: its dump is its JSON, `model_validate` its reader, no second face."""
    assert issubclass(model, BaseModel) and model.model_config.get("frozen"), model.__name__
    assert not hasattr(model, "__getitem__") and not hasattr(model, "get"), model.__name__
    assert not {"to_json", "from_json", "as_dict", "from_dict"} & set(dir(model)), model.__name__


def test_no_product_module_indexes_a_presets_typed_sections():
    """`preset.target["model"]`, `speculative_config.get(...)`: the typed objects are read by attribute."""
    pattern = re.compile(r"(\.speculative_config|preset\.(target|memory|pays_off|published)|\.dynamic_k)(\[|\.get\()")
    offenders = [f"{p.relative_to(ROOT)}:{i}" for p in sorted((ROOT / "specplay").rglob("*.py"))
                 for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert offenders == []


# The one reader of a command line: a user's own `vllm serve` line, for `specplay import` (vLLM's parser reads it)
USER_LINE_READER, USER_LINE_READ_BY = "specplay/engine/vllm_serve_args.py", ("specplay/cli/import_cmd.py",)


def test_no_product_module_parses_a_command_line_back():
    """Serve lines are built from parts (presets.engines.ServeLine); none is split back into them. A user's
    own line is read in one module, and only `specplay import` asks it to."""
    files = {str(p.relative_to(ROOT)): p.read_text() for p in sorted((ROOT / "specplay").rglob("*.py"))}
    assert [name for name, text in files.items() if "shlex.split(" in text] == [USER_LINE_READER]
    readers = [name for name, text in files.items() if "read_serve_line" in text and name != USER_LINE_READER]
    assert readers == list(USER_LINE_READ_BY)
