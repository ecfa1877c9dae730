"""Issue 34: no import circles between the workspace's modules (a function-level import counts, a
`TYPE_CHECKING` one does not), checked from the source by `tools/import_graph.py`."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def graph_tool() -> ModuleType:
    # tools/ is no package on the path: load the one file the test needs.
    spec = importlib.util.spec_from_file_location("import_graph", REPO_ROOT / "tools" / "import_graph.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_workspace_has_no_import_circle(graph_tool):
    packages = graph_tool.workspace_packages(REPO_ROOT)
    assert sorted(packages) == sorted(graph_tool.PACKAGE_SOURCES), "a workspace package's folder has moved"
    graph = graph_tool.import_graph(graph_tool.package_modules(packages))
    # The graph is the real one, not an empty reading of it.
    assert "ltx_core.loader.model_files" in graph["ltx_core.loader.builder"]
    circles = graph_tool.import_circles(graph)
    named = "\n".join("  " + " <-> ".join(circle) for circle in circles)
    assert not circles, f"{len(circles)} import circle(s); move what both sides need to a lower module:\n{named}"


def _write_package(root: Path, files: dict[str, str]) -> dict[str, Path]:
    for name, text in files.items():
        path = root / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return {"pkg": root / "pkg"}


def test_a_function_level_import_closes_a_circle_and_a_type_checking_one_does_not(graph_tool, tmp_path):
    packages = _write_package(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "from pkg import b\n",
            "b.py": "def late():\n    from .a import thing\n    return thing\n",
            "c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.d import D\n",
            "d.py": "import pkg.c\n",
            "sub/__init__.py": "from ..c import x\n",
        },
    )
    graph = graph_tool.import_graph(graph_tool.package_modules(packages))
    assert graph["pkg.b"] == {"pkg.a"} and graph["pkg.c"] == set() and graph["pkg.sub"] == {"pkg.c"}
    assert graph_tool.import_circles(graph) == [["pkg.a", "pkg.b"]]
