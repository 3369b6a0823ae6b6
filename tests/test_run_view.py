"""One way to reach the run (issue 42 item 2): ``run.run_view.run_of(state, runtime)``.

Before it, 45 calls in run/, nodes/ and graph/ passed a run's context and its state
together, in both orders (``search_service(ctx, state)``, ``fast_model(state, ctx)``), to
15 functions taking both. This keeps it at none: a helper that needs both takes the
node's ``RunView``. (LangGraph's own ``ToolRuntime(state=..., context=...)``, which the
agent builds as ``ToolNode`` does, is not ours to change.)
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("run", "nodes", "graph")
CONTEXT_NAMES = {"ctx", "context"}
ALLOWED_CALLS = {"ToolRuntime"}


def _kind(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        if node.id in CONTEXT_NAMES:
            return "context"
        return "state" if node.id == "state" else None
    if (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "runtime"
        and node.attr in ("context", "state")
    ):
        return node.attr
    return None


def _places() -> list[str]:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            where = path.relative_to(ROOT)
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Call):
                    if ast.unparse(node.func) in ALLOWED_CALLS:
                        continue
                    kinds = {_kind(a) for a in [*node.args, *(k.value for k in node.keywords)]}
                    if {"context", "state"} <= kinds:
                        found.append(f"{where}:{node.lineno} {ast.unparse(node.func)}(...)")
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names = {a.arg for a in [*node.args.args, *node.args.kwonlyargs]}
                    if names & CONTEXT_NAMES and "state" in names:
                        found.append(f"{where}:{node.lineno} def {node.name}")
    return found


def test_no_helper_takes_a_context_and_a_state() -> None:
    assert _places() == [], "take the node's RunView (run.run_view.run_of) instead"
