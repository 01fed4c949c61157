"""vLLM's engine arguments (the `EngineArgs` dataclass: what `LLM(...)` and `vllm serve --flag` take), read
from a vLLM build's source with `ast` as engine.vllm_facts reads its speculative config: nothing imported,
so the same reader answers for the installed vLLM and for a wheel (the 0.34 fixture). Per field: the kinds
of value it takes (from its annotation, aliases such as `CacheDType` followed to their Literal), the
strings it allows where the annotation is a Literal, and its help text (the docstring vLLM's own `--help`
shows: the config class attribute the field's default comes from, else the same-named attribute of a
config class). A type this reader can't follow (an enum, a nested config) is "any": vLLM checks it.
"""

from __future__ import annotations

import ast
from typing import Callable

Reader = Callable[[str], "str | None"]
ARG_UTILS = "engine/arg_utils.py"
ANY = "any"
_SIMPLE = {"int": "int", "float": "float", "bool": "bool", "str": "str", "None": "none", "list": "list",
           "set": "list", "tuple": "list", "List": "list", "Set": "list", "Tuple": "list", "Sequence": "list",
           "dict": "dict", "Dict": "dict", "Mapping": "dict", "Any": ANY}
HELP_CHARS = 240  # a field's help, cut to one error line's worth


def _config_modules(tree: ast.Module, read: Reader) -> list[str]:
    """The vllm.config modules arg_utils imports from, directly or through vllm/config/__init__.py."""
    found = []
    init = read("config/__init__.py")
    trees = [tree] + ([ast.parse(init)] if init else [])
    for node in (n for t in trees for n in ast.walk(t)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("vllm.config."):
            found.append(node.module.replace("vllm.", "", 1).replace(".", "/") + ".py")
    return list(dict.fromkeys(found))


def _docs_and_aliases(read: Reader, modules: list[str]) -> tuple[dict, dict]:
    """({class: {attribute: docstring}}, {module-level name: value}) over the config modules."""
    docs: dict[str, dict[str, str]] = {}
    aliases: dict[str, ast.expr] = {}
    for relative in modules:
        text = read(relative)
        if not text:
            continue
        tree = ast.parse(text)
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                aliases.setdefault(node.targets[0].id, node.value)
            elif isinstance(node, ast.ClassDef):
                docs.setdefault(node.name, _attribute_docs(node))
    return docs, aliases


def _attribute_docs(cls: ast.ClassDef) -> dict[str, str]:
    out = {}
    for first, second in zip(cls.body, cls.body[1:]):
        if (isinstance(first, ast.AnnAssign) and isinstance(first.target, ast.Name) and isinstance(second, ast.Expr)
                and isinstance(second.value, ast.Constant) and isinstance(second.value.value, str)):
            out[first.target.id] = " ".join(second.value.value.split())
    return out


def _kinds(node: ast.expr | None, aliases: dict, depth: int = 0) -> tuple[set[str], list]:
    """(kinds of value, Literal choices) an annotation allows."""
    if node is None or depth > 8:
        return {ANY}, []
    if isinstance(node, ast.Constant):
        if node.value is None:
            return {"none"}, []
        if isinstance(node.value, str):  # a forward reference: its text is the annotation
            try:
                return _kinds(ast.parse(node.value, mode="eval").body, aliases, depth + 1)
            except SyntaxError:
                return {ANY}, []
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        (a, ca), (b, cb) = _kinds(node.left, aliases, depth + 1), _kinds(node.right, aliases, depth + 1)
        return a | b, ca + cb
    name = node.value if isinstance(node, ast.Subscript) else node
    name = name.attr if isinstance(name, ast.Attribute) else getattr(name, "id", None)
    if isinstance(node, ast.Subscript) and name == "Literal":
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        values = [i.value for i in items if isinstance(i, ast.Constant)]
        # a Literal's strings are "choice": only those strings (a plain `str` beside it allows any)
        return {"choice" if isinstance(v, str) else _SIMPLE.get(type(v).__name__, ANY) for v in values}, values
    if isinstance(node, ast.Subscript) and name in ("Optional", "Union", "Annotated"):
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        items = items[:1] if name == "Annotated" else items
        kinds, choices = set(), []
        for item in items:
            k, c = _kinds(item, aliases, depth + 1)
            kinds, choices = kinds | k, choices + c
        return kinds | ({"none"} if name == "Optional" else set()), choices
    if name in _SIMPLE:
        return {_SIMPLE[name]}, []
    if name in aliases:
        return _kinds(aliases[name], aliases, depth + 1)
    return {ANY}, []


def _default_source(value: ast.expr | None) -> tuple[str | None, str | None]:
    """(config class, attribute) a field's default names: `CacheConfig.cache_dtype`, `get_field(C, "a")`."""
    if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name):
        return value.value.id, value.attr
    if (isinstance(value, ast.Call) and getattr(value.func, "id", None) == "get_field" and len(value.args) == 2
            and isinstance(value.args[0], ast.Name) and isinstance(value.args[1], ast.Constant)):
        return value.args[0].id, value.args[1].value
    return None, None


def _help(name: str, value: ast.expr | None, docs: dict) -> str:
    cls, attr = _default_source(value)
    text = docs.get(cls, {}).get(attr) if cls else None
    if not text:
        text = next((d[name] for d in docs.values() if name in d), "")
    return text if len(text) <= HELP_CHARS else text[:HELP_CHARS - 1].rstrip() + "…"


def read_engine_args(read: Reader) -> dict | None:
    """{field: {"kinds": [...], "choices": [...], "help": str}} of EngineArgs; None without arg_utils.py."""
    text = read(ARG_UTILS)
    if text is None:
        return None
    tree = ast.parse(text)
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "EngineArgs"), None)
    if cls is None:
        return None
    docs, aliases = _docs_and_aliases(read, _config_modules(tree, read))
    aliases.update({n.targets[0].id: n.value for n in tree.body if isinstance(n, ast.Assign)
                    and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)})
    out = {}
    for node in cls.body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        name = node.target.id
        if name.startswith("_") or "ClassVar" in ast.unparse(node.annotation):
            continue  # private: not an engine argument a user gives
        kinds, choices = _kinds(node.annotation, aliases)
        strings = [c for c in choices if isinstance(c, str)] if "choice" in kinds else []
        out[name] = {"kinds": sorted(kinds), "choices": strings, "help": _help(name, node.value, docs)}
    return out
