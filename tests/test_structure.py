"""The code's shape: small modules and functions, imports one way (no circle, nodes import
only the graph's leaf types), no private name used outside its module."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 400
MAX_FUNCTION_LINES = 60
PACKAGES = ("cli", "graph", "nodes", "tools", "prompts")
# The run's types: leaves nodes import (tests/test_structure.py and the import contract).
LEAVES = {"context.py", "state.py", "reducers.py"}


def _modules(*folders: str) -> list[Path]:
    return [path for folder in folders for path in sorted((ROOT / folder).rglob("*.py"))]


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def test_no_module_is_over_400_lines() -> None:
    long = {
        str(path.relative_to(ROOT)): n
        for path in _modules("graph", "nodes", "tools")
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, long


def test_no_function_is_over_60_lines() -> None:
    long = {
        f"{path.relative_to(ROOT)}:{node.lineno} {node.name}": length
        for path in _modules("graph", "nodes", "tools")
        for node in ast.walk(_tree(path))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and (length := (node.end_lineno or node.lineno) - node.lineno + 1) > MAX_FUNCTION_LINES
    }
    assert not long, long


def test_graph_imports_nodes_only_to_build_graphs() -> None:
    """The run's types (Context, State, reducers) and the persistence layer stand without
    ``nodes``: only the two graph builders import it, annotations included, and the
    document API, which shares the runs' open knowledge base (``nodes.resources``) so a run
    sees an upload's commit at once."""
    builders = {"rag_graph.py", "agent_graph.py", "documents_api.py"}
    for path in (ROOT / "graph").glob("*.py"):
        modules = [
            node.module
            for node in ast.walk(_tree(path))
            if isinstance(node, ast.ImportFrom) and node.module
        ]
        uses_nodes = any(m == "nodes" or m.startswith("nodes.") for m in modules)
        assert not uses_nodes or path.name in builders, path.name


def test_nodes_import_of_graph_only_its_leaf_types() -> None:
    for path in _modules("nodes"):
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("graph"):
                leaf = (node.module or "").removeprefix("graph.") + ".py"
                assert leaf in LEAVES, f"{path.name} imports {node.module}"


def test_the_import_contracts_hold() -> None:
    """Layers, leaf types and no circle between a package's modules (pyproject.toml)."""
    done = subprocess.run(
        [str(Path(sys.executable).parent / "lint-imports")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-3000:]
    assert "acyclic_siblings" in (ROOT / "pyproject.toml").read_text(encoding="utf-8")


def test_a_node_module_imports_first_without_a_circle() -> None:
    """A node imported before anything else (a test, a worker) finds the leaf types
    without importing the builders (``graph/__init__`` loads them on first use)."""
    code = "import nodes.agent, nodes.prepare, nodes.deadline, graph.state; import graph\n"
    code += "import sys; assert 'graph.rag_graph' not in sys.modules; graph.build_graph()"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]


def _private_uses(path: Path) -> list[str]:
    """``from project.module import _name`` and ``module._name`` of a project module."""
    found: list[str] = []
    modules: set[str] = set()
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in PACKAGES:
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append(f"from {node.module} import {alias.name}")
                modules.add(alias.asname or alias.name)
        if isinstance(node, ast.Import):
            modules.update(
                a.asname or a.name for a in node.names if a.name.split(".")[0] in PACKAGES
            )
    for node in ast.walk(_tree(path)):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            found.append(f"{node.value.id}.{node.attr}")
    return found


def test_no_private_name_crosses_modules() -> None:
    uses = {
        str(path.relative_to(ROOT)): found
        for path in _modules(*PACKAGES)
        if (found := _private_uses(path))
    }
    assert not uses, uses
