"""The import graph of the workspace's packages, read from their source (nothing is imported), and its circles.

Every `import` / `from ... import` counts, at any depth of a module's code (a function-level import is as
much a dependency as a top-level one); imports under `if TYPE_CHECKING:` are left out, since they never run.
Used by the repository's test that keeps the circles at zero and by `benchmarks/code_structure.py`.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Mapping
from pathlib import Path

PACKAGE_SOURCES = {
    "ltx_core": "packages/ltx-core/src/ltx_core",
    "ltx_pipelines": "packages/ltx-pipelines/src/ltx_pipelines",
    "ltx_trainer": "packages/ltx-trainer/src/ltx_trainer",
    "ltx_serve": "packages/ltx-serve/src/ltx_serve",
}
"""Top-level package -> its source folder, relative to the repository root."""


def workspace_packages(repo_root: Path) -> dict[str, Path]:
    """The workspace's packages that exist under `repo_root`: name -> source folder."""
    found = {name: repo_root / folder for name, folder in PACKAGE_SOURCES.items()}
    return {name: folder for name, folder in found.items() if folder.is_dir()}


def package_modules(packages: Mapping[str, Path]) -> dict[str, Path]:
    """Dotted module name -> file, for every `.py` file of `packages` (a package is its `__init__.py`)."""
    found: dict[str, Path] = {}
    for folder in packages.values():
        for path in sorted(folder.rglob("*.py")):
            parts = list(path.relative_to(folder.parent).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(module: str, path: Path, known: set[str]) -> set[str]:
    """The modules of `known` that `module` (the file `path`) imports, itself left out.

    `from package import name` counts as importing the submodule `package.name` when there is one, else
    `package` (whose `__init__` defines `name`)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    targets: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                targets.add(sub if sub in known else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return {t for t in targets if t in known and t != module}


def import_graph(modules: Mapping[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules it imports (among `modules`)."""
    known = set(modules)
    return {name: imports_of(name, path, known) for name, path in modules.items()}


def import_circles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Every set of modules that import each other, directly or around a loop (the graph's strongly connected
    components of more than one module), each sorted; [] when the graph has no circle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph) + 100))  # one frame per module on the deepest path

    def strong(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    try:
        for v in sorted(graph):
            if v not in index:
                strong(v)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(circles)
