"""The code's shape: small modules, and no ``graph -> nodes`` import outside the builders."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 400


def test_no_module_is_over_400_lines() -> None:
    long = {
        str(path.relative_to(ROOT)): n
        for folder in ("graph", "nodes", "tools")
        for path in (ROOT / folder).rglob("*.py")
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, long


def test_graph_imports_nodes_only_to_build_graphs() -> None:
    """The run configuration and the persistence layer stand without ``nodes``: only the
    two graph builders (and the state's reducers) import it at run time, and the document
    API, which shares the runs' open knowledge base (``nodes.resources``) so a run sees
    an upload's commit at once."""
    builders = {"rag_graph.py", "agent_graph.py", "state.py", "documents_api.py"}
    for path in (ROOT / "graph").glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        modules = [  # module level only: an `if TYPE_CHECKING:` block is an ast.If
            node.module for node in tree.body if isinstance(node, ast.ImportFrom) and node.module
        ]
        uses_nodes = any(m == "nodes" or m.startswith("nodes.") for m in modules)
        assert not uses_nodes or path.name in builders, path.name
