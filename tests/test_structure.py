"""The code's shape: small modules and functions, imports one way (down the layers, no
circle, nothing lazy), one file name per module, no private name used outside its module."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 400
MAX_FUNCTION_LINES = 60
PACKAGES = ("cli", "server", "graph", "nodes", "run", "tools", "prompts")


def _modules(*folders: str) -> list[Path]:
    return [path for folder in folders for path in sorted((ROOT / folder).rglob("*.py"))]


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def test_no_module_is_over_400_lines() -> None:
    long = {
        str(path.relative_to(ROOT)): n
        for path in _modules("cli", "server", "graph", "nodes", "run", "tools", "bench")
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, long


def test_no_function_is_over_60_lines() -> None:
    long = {
        f"{path.relative_to(ROOT)}:{node.lineno} {node.name}": length
        for path in _modules("cli", "server", "graph", "nodes", "run", "tools", "bench")
        for node in ast.walk(_tree(path))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and (length := (node.end_lineno or node.lineno) - node.lineno + 1) > MAX_FUNCTION_LINES
    }
    assert not long, long


# Each package imports only the packages below it: cli → server → graph → nodes → run →
# tools | prompts (the import contracts in pyproject.toml check the same, transitively).
BELOW = {
    "server": {"graph", "nodes", "run", "tools", "prompts"},
    "graph": {"nodes", "run", "tools", "prompts"},
    "nodes": {"run", "tools", "prompts"},
    "run": {"tools", "prompts"},
}


def test_no_import_runs_up_a_layer() -> None:
    """No exception list: the run's types live in ``run``, below the nodes that use them."""
    up = []
    for package, allowed in BELOW.items():
        for path in _modules(package):
            for node in ast.walk(_tree(path)):
                names = (
                    [node.module or ""]
                    if isinstance(node, ast.ImportFrom) and not node.level
                    else [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else []
                )
                for name in names:
                    top = name.split(".")[0]
                    if top in PACKAGES and top != package and top not in allowed:
                        up.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not up, up


def test_no_package_loads_lazily() -> None:
    """No ``__getattr__`` in a package's ``__init__`` (PEP 562) hides an import."""
    lazy = [
        str(path.relative_to(ROOT))
        for path in _modules(*PACKAGES)
        if path.name == "__init__.py"
        and any(
            isinstance(node, ast.FunctionDef) and node.name == "__getattr__"
            for node in _tree(path).body
        )
    ]
    assert not lazy, lazy


def test_no_project_module_is_imported_by_name() -> None:
    """``importlib.import_module`` hides an import from the contracts: none loads a module
    of the project (issue 54 item 5: the CLI's commands were a list of names)."""
    hidden = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in _modules(*PACKAGES)
        for node in ast.walk(_tree(path))
        if isinstance(node, ast.Call)
        and ast.unparse(node.func).endswith("import_module")
        and (
            path.parts[len(ROOT.parts)] == "cli"
            or any(
                isinstance(a, ast.Constant) and str(a.value).split(".")[0] in PACKAGES
                for a in node.args
            )
        )
    ]
    assert not hidden, hidden


def test_no_two_modules_share_a_file_name() -> None:
    """One name, one module: ``settings.py`` or ``common.py`` in two packages would be
    mistaken for each other (``__init__.py`` aside)."""
    seen: dict[str, list[str]] = {}
    for path in _modules(*PACKAGES):
        if path.name != "__init__.py":
            seen.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    assert not {name: paths for name, paths in seen.items() if len(paths) > 1}


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
    """A node imported before anything else (a test, a worker) imports, and the graphs
    build after it: no circle, at run time either."""
    code = "import graph.agent.model_loop, nodes.prepare, run.deadline, run.state\n"
    code += "import graph; graph.build_graph(); graph.build_agent_graph()"
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


def _node_bodies() -> list[tuple[str, ast.AsyncFunctionDef | ast.FunctionDef, str]]:
    """Every function of ``nodes/`` and ``graph/agent/`` that is a node: decorated with
    ``run.run_view.node`` or taking a ``state`` and LangGraph's ``runtime``."""
    found = []
    for path in _modules("nodes", "graph/agent"):
        text = path.read_text(encoding="utf-8")
        for func in ast.walk(ast.parse(text)):
            if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            params = [a.arg for a in func.args.args]
            decorated = any(ast.unparse(d) == "node" for d in func.decorator_list)
            if decorated or {"state", "runtime"} <= set(params):
                where = f"{path.relative_to(ROOT)}:{func.lineno} {func.name}"
                found.append((where, func, ast.get_source_segment(text, func) or ""))
    return found


def test_a_node_body_names_only_run_and_state() -> None:
    """Issue 54 item 1: a node is ``@node async def name(state, run)``: it reaches its run
    through the one view (``run.run_view.RunView``), which reports its events, timings and
    warnings; nothing in it reads LangGraph's runtime or a separate context."""
    bodies = _node_bodies()
    assert len(bodies) >= 16, [where for where, _, _ in bodies]
    wrong = [
        where
        for where, func, source in bodies
        if [a.arg for a in func.args.args] != ["state", "run"]
        or not any(ast.unparse(d) == "node" for d in func.decorator_list)
        or "runtime." in source
        or ".ctx" in source
    ]
    assert not wrong, wrong
    ctx = [
        str(path.relative_to(ROOT))
        for path in _modules("nodes", "graph/agent")
        if ".ctx" in path.read_text(encoding="utf-8")
    ]
    assert not ctx, ctx
