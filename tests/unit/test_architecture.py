"""The code's shape, held by the suite: packages as layers with imports only downward (the contract an
import linter would hold), vLLM imported only by the engine layer and Gradio only by the page, no module
over 400 lines and no function over 60 (the package's, the tests', the scripts' and app.py alike)."""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "specplay"
SIZED = ("app.py", "specplay", "tests", "loadtest", "benchmarks", "scripts")  # where the size limits hold
# Top to bottom; packages in one layer are independent of each other. A module may import its own package
# and any layer below its own.
# The data flows presets -> engines -> a run; the imports run the other way only where a layer builds what
# the one below takes (presets make EngineSettings and ask the engine layer what the installed vLLM accepts).
LAYERS = (
    ("specplay.page", "specplay.cli"),
    ("specplay.bench", "specplay.hosting"),
    ("specplay.lesson",),  # above run: a lesson's steps name recordings, read by run's one reader
    ("specplay.run", "specplay.plan"),
    ("specplay.presets",),
    ("specplay.engine",),
    ("specplay.core",),
)
ONLY_IN = {"vllm": ("specplay.engine",), "gradio": ("specplay.page", "specplay.hosting"), "gradio_client": (),
           "loadtest": ()}
# Gradio's private modules (its queue, session store, server messages): one module hooks into them, checked at
# start against the pinned release (hosting/gradio_internals.py)
GRADIO_PRIVATE = ("gradio.queueing", "gradio.state_holder", "gradio.server_messages", "gradio.route_utils")
GRADIO_INTERNALS = "specplay.hosting.gradio_internals"
MAX_FILE_LINES, MAX_FUNCTION_LINES = 400, 60


@lru_cache(maxsize=None)
def tree(path: Path) -> ast.Module:
    """A file's syntax tree, parsed once for every check here (each walked the whole package again: 24 s of the
    quick tier's 4 workers, 2026-12-07); the checks only read it."""
    return ast.parse(path.read_text())


def modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        name = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        yield name.removesuffix(".__init__"), path


def imports_of(path: Path, name: str) -> set[str]:
    found = set()
    for node in ast.walk(tree(path)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = name.split(".")[: -node.level]
                found.add(".".join(base + ([node.module] if node.module else [])))
            elif node.module:
                found.add(node.module)
                if node.module == "specplay":
                    found.update(f"specplay.{alias.name}" for alias in node.names)
    return found


def package_of(module: str) -> str | None:
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "specplay" and len(parts) > 1 else None


def layer_of(package: str | None) -> int | None:
    return next((i for i, layer in enumerate(LAYERS) if package in layer), None)


def test_every_package_is_in_a_layer():
    packages = {package_of(name) for name, _ in modules()} - {None, "specplay.__main__"}
    assert packages <= {p for layer in LAYERS for p in layer}, packages


def test_imports_go_only_down_the_layers():
    wrong = []
    for name, path in modules():
        mine = package_of(name)
        if layer_of(mine) is None:  # specplay/__init__, __main__: the entry points
            continue
        for target in imports_of(path, name):
            theirs = package_of(target)
            if theirs is None or theirs == mine:
                continue
            if layer_of(theirs) is None or layer_of(theirs) <= layer_of(mine):
                wrong.append(f"{name} imports {target}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("library,home", ONLY_IN.items())
def test_library_imported_only_in_its_layer(library, home):
    wrong = [f"{name} imports {target}" for name, path in modules() for target in imports_of(path, name)
             if target.split(".")[0] == library and not name.startswith(home)] if home else [
             f"{name} imports {target}" for name, path in modules() for target in imports_of(path, name)
             if target.split(".")[0] == library]
    assert not wrong, "\n".join(wrong)


def test_gradio_internals_touched_in_one_module():
    wrong = [f"{name} imports {target}" for name, path in modules() for target in imports_of(path, name)
             if target.startswith(GRADIO_PRIVATE) and name != GRADIO_INTERNALS]
    assert not wrong, "\n".join(wrong)


def python_files():
    for top in SIZED:
        yield from [ROOT / top] if top.endswith(".py") else sorted((ROOT / top).rglob("*.py"))


def test_no_module_over_400_lines_and_no_function_over_60():
    """Every Python file of the project, not only the package: a test file past 400 lines (the hostile inputs',
    411) and a 74-line test helper were seen when the check read the package alone."""
    long_files, long_functions = [], []
    for path in python_files():
        text = path.read_text()
        if (n := len(text.splitlines())) > MAX_FILE_LINES:
            long_files.append(f"{path.relative_to(ROOT)}: {n}")
        for node in ast.walk(tree(path)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long_functions.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {length}")
    assert not long_files and not long_functions, "\n".join(long_files + long_functions)


def module_level_imports(path: Path, name: str) -> set[str]:
    """What a module imports when it is imported: its top-level import statements (not TYPE_CHECKING
    blocks, not the lazy imports inside functions)."""
    found = set()
    for node in tree(path).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found |= imports_of_node(node, name)
    return found


def imports_of_node(node, name: str) -> set[str]:
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names}
    if node.module == "specplay":
        return {f"specplay.{alias.name}" for alias in node.names}
    return {node.module} if node.module else set()


def test_no_import_cycles_between_modules():
    graph = {name: {t for t in module_level_imports(path, name) if t.startswith("specplay.")}
             for name, path in modules()}
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for target in sorted(graph.get(node, ())):
            if target not in graph:
                continue
            if state.get(target) == 1:
                return path[path.index(target):] + [target] if target in path else [node, target]
            if state.get(target) is None and (cycle := visit(target, path + [target])):
                return cycle
        state[node] = 2
        return None

    for start in sorted(graph):
        if state.get(start) is None and (cycle := visit(start, [start])):
            pytest.fail("import cycle: " + " -> ".join(cycle))


# The engine layer's backends (engine.base.Backend): each one module, registered in engine.backends.
BACKEND_MODULES = ("specplay.engine.vllm_engine", "specplay.engine.remote")
# What a backend may import from its own layer: the contract and the helpers that aren't backends.
BACKEND_MAY_IMPORT = ("specplay.engine.base", "specplay.engine.processes", "specplay.engine.probes",
                      "specplay.engine.vllm_facts", "specplay.engine.kv_cache", "specplay.engine.prometheus")


def all_imports(path: Path, name: str, known: set[str]) -> set[str]:
    """Every specplay module `path` imports, at its top or lazily inside a function: `from a.b import c`
    counts a.b.c where that is a module."""
    found = set()
    for node in ast.walk(tree(path)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                module = ".".join(name.split(".")[: -node.level] + ([module] if module else []))
            submodules = {f"{module}.{alias.name}" for alias in node.names} & known
            found |= submodules or {module}  # `from a import b` of a module b: a.b, not a's __init__
    return {t for t in found if t in known}


def import_graph() -> dict[str, set[str]]:
    paths = dict(modules())
    return {name: all_imports(path, name, set(paths)) - {name} for name, path in paths.items()}


def test_backends_import_only_the_contract_and_helpers_of_their_layer():
    graph = import_graph()
    wrong = [f"{backend} imports {target}" for backend in BACKEND_MODULES for target in sorted(graph[backend])
             if target.startswith("specplay.engine") and target not in BACKEND_MAY_IMPORT]
    assert not wrong, "\n".join(wrong)


def test_no_module_outside_the_engine_layer_imports_a_backend():
    """The layers above take errors and types from engine.base and settings from engine.backends."""
    wrong = [f"{name} imports {target}" for name, targets in import_graph().items() for target in sorted(targets)
             if target in BACKEND_MODULES and package_of(name) != "specplay.engine"]
    assert not wrong, "\n".join(wrong)


def test_no_import_cycle_even_through_lazy_imports():
    """A lazy import inside a function hides a cycle from the interpreter, not from the design: none."""
    graph = import_graph()
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                return path[path.index(target):] + [target]
            if state.get(target) is None and (cycle := visit(target, path + [target])):
                return cycle
        state[node] = 2
        return None

    for start in sorted(graph):  # the first cycle found (the search stops there: its path is left marked)
        if state.get(start) is None and (cycle := visit(start, [start])):
            pytest.fail("import cycle: " + " -> ".join(cycle))
