"""The documentation's snippets, so the docs cannot rot.

* Every ``hybrid-rag`` command line in README.md and docs/*.md parses with the real CLI
  parser (optional ``[...]`` parts both with and without), so a renamed flag or command
  fails here.
* Every Python block compiles (top-level ``await`` allowed: those blocks talk to a running
  server and are exercised by tests/test_server.py); blocks that need no server run here,
  offline, against an empty data home.
"""

from __future__ import annotations

import ast
import asyncio
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_FENCE = re.compile(r"```(\w*)\n(.*?)```", re.S)
_OPTIONAL = re.compile(r"\s\[([^\[\]]*)\]")


def _blocks(lang: str) -> list[tuple[str, str]]:
    out = []
    for doc in DOCS:
        for found, body in _FENCE.findall(doc.read_text(encoding="utf-8")):
            if found == lang:
                out.append((f"{doc.name}:{body.splitlines()[0][:50]}", body))
    return out


def _command_lines() -> list[tuple[str, str]]:
    """``hybrid-rag ...`` lines (fenced or indented), continuations joined, comments cut."""
    lines: list[tuple[str, str]] = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8").replace("\\\n", " ")
        for raw in text.splitlines():
            line = raw.strip()
            match = re.match(r"^(?:[A-Z_]+=\S+\s+)*(?:\.venv/bin/)?hybrid-rag\s+(.*)$", line)
            if match:
                lines.append((doc.name, match.group(1).split("  #")[0].split(" # ")[0]))
    return lines


def _variants(args: str) -> list[str]:
    """With and without the optional ``[...]`` parts; ``a | b`` alternatives take ``a``."""
    with_opt = _OPTIONAL.sub(lambda m: " " + m.group(1).split(" | ")[0], args)
    return [_OPTIONAL.sub("", args), with_opt]


COMMANDS = _command_lines()


def test_the_docs_have_commands_and_python() -> None:
    assert len(COMMANDS) >= 15
    assert len(_blocks("python")) >= 5


@pytest.mark.parametrize(("doc", "args"), COMMANDS, ids=[f"{d}:{a[:40]}" for d, a in COMMANDS])
def test_documented_command_parses(doc: str, args: str) -> None:
    from cli.main import build_parser

    for variant in _variants(args):
        argv = shlex.split(variant)
        try:
            build_parser().parse_args(argv)
        except SystemExit as exc:  # argparse's way of rejecting
            pytest.fail(f"{doc}: 'hybrid-rag {variant}' does not parse (exit {exc.code})")


PYTHON = _blocks("python")


@pytest.mark.parametrize(("where", "code"), PYTHON, ids=[w for w, _ in PYTHON])
def test_python_block_compiles(where: str, code: str) -> None:
    compile(code, where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


def test_readme_python_example_runs_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (code,) = [c for _, c in PYTHON if "build_graph()" in c and "await" not in c]
    monkeypatch.setenv("HYBRID_RAG_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README.md", "exec"), {"asyncio": asyncio})
    printed = capsys.readouterr().out
    assert printed.strip(), "the example prints the answer, citations and warnings"


def test_env_example_documents_every_variable_the_code_reads() -> None:
    # langgraph.json reads .env (git-ignored); .env.example is what a user copies.
    import json

    assert json.loads((ROOT / "langgraph.json").read_text())["env"] == ".env"
    assert ".env" in (ROOT / ".gitignore").read_text().split()
    example = (ROOT / ".env.example").read_text()
    documented = set(re.findall(r"^# ?([A-Z][A-Z0-9_]+)=", example, re.M))
    read: set[str] = set()
    for folder in ("cli", "graph", "nodes", "tools"):
        for path in (ROOT / folder).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            read |= set(re.findall(r"environ(?:\.get)?[(\[]\"([A-Z][A-Z0-9_]+)\"", text))
            read |= set(re.findall(r"_env_number\(\s*\"([A-Z][A-Z0-9_]+)\"", text))
    machine = {"OMP_NUM_THREADS", "XDG_DATA_HOME"}  # the platform's, not the project's
    assert read - machine <= documented, sorted(read - machine - documented)


@pytest.mark.parametrize("marker", ["open_graph() as graph:  # <data", "open_sync_graph(graph="])
def test_persistence_snippets_run_as_scripts(
    marker: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Regression: the snippets used a top-level `async with` (a SyntaxError in a script)
    # and one thread id for both graphs.
    (code,) = [c for _, c in PYTHON if marker in c]
    monkeypatch.setenv("HYBRID_RAG_HOME", str(tmp_path / "home"))
    compile(code, "snippet", "exec")  # no top-level await: runs as a script
    exec(compile(code, "snippet", "exec"), {"__name__": "__main__"})
    assert capsys.readouterr().out.strip()
    assert (tmp_path / "home" / "checkpoints.sqlite").exists()
