"""The package's layering, read from its source with `ast`: no import cycle among module-level
imports, and no stage (a module under faithrag.methods that calls `register(...)`) importing
another stage; shared prompts and answer helpers live in shared modules; and no module over
600 lines."""

from __future__ import annotations

import ast
from pathlib import Path

import faithrag

PACKAGE = Path(faithrag.__file__).parent
METHODS = "faithrag.methods"


def _modules() -> dict[str, ast.Module]:
    """Every module of the package by dotted name (a package by its own name), parsed."""
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return modules


MODULES = _modules()


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(body: list[ast.stmt], module_level: bool) -> list[ast.Import | ast.ImportFrom]:
    """The import statements run when the code in `body` runs: with `module_level`, those run
    on import (not in function or class bodies); else every one, however deep. Imports under
    `if TYPE_CHECKING:` never run and are left out."""
    found: list[ast.Import | ast.ImportFrom] = []
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif isinstance(node, ast.If) and _is_type_checking(node):
            found.extend(_imports(node.orelse, module_level))
        elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)) or (
                not module_level and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                       ast.ClassDef))):
            for field in ("body", "orelse", "finalbody"):
                found.extend(_imports(getattr(node, field, []), module_level))
            for handler in getattr(node, "handlers", []):
                found.extend(_imports(handler.body, module_level))
    return found


def imported_modules(name: str, module_level: bool) -> set[str]:
    """The package's modules that module `name` imports (`from a import b` names module a.b
    when there is one, else a)."""
    tree = MODULES[name]
    package = name if _is_package(name) else name.rpartition(".")[0]
    targets = set()
    for node in _imports(tree.body, module_level):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
            continue
        base = node.module or ""
        if node.level:
            parts = package.split(".")[:len(package.split(".")) - node.level + 1]
            base = ".".join(parts + ([base] if base else []))
        for alias in node.names:
            child = f"{base}.{alias.name}"
            targets.add(child if child in MODULES else base)
    return {t for t in targets if t in MODULES and t != name}


def _is_package(name: str) -> bool:
    return any(other.startswith(name + ".") for other in MODULES)


def _calls_register(tree: ast.Module) -> bool:
    return any(isinstance(node, ast.Call) and (
        (isinstance(node.func, ast.Name) and node.func.id == "register")
        or (isinstance(node.func, ast.Attribute) and node.func.attr == "register"))
        for node in ast.walk(tree))


def stage_unit(name: str) -> str:
    """The stage a module of faithrag.methods belongs to: its subpackage (faithrag.methods.csrag)
    or, for a top-level module, the module itself."""
    return ".".join(name.split(".")[:3])


STAGES = {name for name, tree in MODULES.items()
          if name.startswith(METHODS + ".") and _calls_register(tree)}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` as a path that starts and ends at the same node, or None."""
    state: dict[str, str] = {}  # "open" while on the current path, then "done"
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        path.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def test_the_stages_are_found():
    assert {"faithrag.methods.vanilla", "faithrag.methods.crossval",
            "faithrag.methods.conflict_detector", "faithrag.methods.csrag.generator",
            "faithrag.methods.cfrag.cfrag"} <= STAGES
    assert "faithrag.methods.common" not in STAGES


def test_no_stage_imports_another_stage():
    found = {(name, target) for name in MODULES if name.startswith(METHODS + ".")
             for target in imported_modules(name, module_level=False)
             if target in STAGES and stage_unit(target) != stage_unit(name)}
    assert found == set(), (
        "modules of faithrag.methods import another stage (move what they share into a "
        "shared module such as faithrag.methods.common)")


def test_module_level_imports_have_no_cycle():
    graph = {name: imported_modules(name, module_level=True) for name in MODULES}
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_find_cycle_finds_one_and_only_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_old_import_paths_still_work():
    from faithrag import __version__
    from faithrag.config import cache_dir
    from faithrag.paths import cache_dir as moved

    assert __version__ and cache_dir is moved


MAX_LINES = 600


def test_no_module_is_over_600_lines():
    """A module that grows past this is split by concern (its public names kept where they
    were)."""
    long = {str(path.relative_to(PACKAGE.parent)): n for path in sorted(PACKAGE.rglob("*.py"))
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}
