"""The documentation's snippets run, so the docs cannot rot.

Convention for fenced blocks in README.md and docs/*.md:

* Every fence names a language. ``bash``, ``sh``, ``shell``, ``console`` (its ``$ `` lines)
  and ``python``/``py`` blocks are runnable and **run here by default**; other languages
  (``text``, ``json``, ...) are not code, and a ``hybrid-rag`` command line outside a shell
  block fails (so a command cannot hide in an indented or ``text`` block).
* A runnable block that cannot run here says why, in an HTML comment on the line right
  above its fence: ``<!-- doc-test: skip needs SERPER_API_KEY -->``. A skip without a
  reason, an unknown ``doc-test:`` directive, or one not directly above a fence fails.
* ``<!-- doc-test: expect TEXT -->`` (repeatable, same place) asserts that TEXT appears in
  the block's output (stdout + stderr).

The runnable blocks of one document run in document order, sharing one sandbox: the cwd is
a scratch directory with a copy of ``examples/`` and links to the repository's other entries
(so ``examples/kb`` and ``.venv/bin/hybrid-rag`` resolve while ``reliability.png`` or
``.langgraph_api/`` land in the scratch directory; nothing is written into the checkout
through ``examples/``), ``HOME`` and ``HYBRID_RAG_HOME`` are empty temp directories, ``PATH``
starts with the venv's ``bin``, and no model, search, tracing or Chroma variable is set.
Shell blocks run with ``bash -euo pipefail``, Python blocks as scripts with the venv's
python; each must exit 0 within the timeout and print no traceback. Selecting one block
(``-k``) runs the document's earlier blocks first.

Skipped blocks are still checked statically: every ``hybrid-rag`` command line parses with
the real CLI parser, Python compiles as a script (no top-level ``await``: a reader runs the
server snippets with ``python``), shell passes ``bash -n``.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL_LANGS = frozenset({"bash", "sh", "shell", "console"})
PYTHON_LANGS = frozenset({"python", "py"})
BLOCK_TIMEOUT_S = 180.0  # per block; the slowest, README's "Using it" (a cold ingest), ~45 s
TRACEBACK = "Traceback (most recent call last)"

_FENCE_OPEN = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_DIRECTIVE = re.compile(r"^\s*<!--\s*doc-test:(?P<body>.*?)-->\s*$")
_COMMAND = re.compile(r"^(?:[A-Z_]+=\S+\s+)*(?:\.venv/bin/)?hybrid-rag\s+(.*)$")
_OPTIONAL = re.compile(r"\s\[([^\[\]]*)\]")
# Anything that would take a run out of offline mode, send traces, or point at a server.
_SCRUBBED = re.compile(
    r"^(OPENAI|ANTHROPIC|LANGSMITH|LANGCHAIN|LANGGRAPH|WEBSEARCH|CHROMA|HYBRID_RAG|SEARXNG|XDG)_"
    r"|(_API_KEY|_TOKEN|_SECRET|_URI)$"
    r"|^(DATABASE_URI|REDIS_URI|PYTHONPATH|VIRTUAL_ENV)$"
)
# The sample data is copied (a snippet may add a file to examples/kb); the rest is linked,
# except VCS, caches, local data and secrets.
_COPIED = frozenset({"examples"})
_NOT_LINKED = frozenset(
    {".git", ".venv", ".env", ".hybrid-rag", ".langgraph_api", ".mypy_cache", ".pytest_cache",
     ".ruff_cache", "__pycache__"}
)  # fmt: skip


@dataclass(frozen=True)
class Block:
    doc: str  # path relative to the repository, e.g. "docs/DEPLOYMENT.md"
    line: int  # 1-based line of the opening fence
    end: int  # 1-based line of the closing fence
    lang: str
    code: str
    skip: str | None = None
    expect: tuple[str, ...] = ()

    @property
    def kind(self) -> Literal["shell", "python"] | None:
        if self.lang in SHELL_LANGS:
            return "shell"
        if self.lang in PYTHON_LANGS:
            return "python"
        return None

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}:{self.lang}"

    def script(self) -> str:
        """What runs: the code, or a ``console`` block's ``$ `` lines (and continuations)."""
        if self.lang != "console":
            return self.code
        lines: list[str] = []
        continued = False
        for line in self.code.splitlines():
            if continued or line.startswith("$ "):
                lines.append(line if continued else line[2:])
                continued = line.rstrip().endswith("\\")
        return "\n".join(lines) + "\n"


@dataclass
class ParsedDoc:
    blocks: list[Block] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def parse_doc(name: str, text: str) -> ParsedDoc:
    """Fenced blocks with their ``doc-test`` directives, and what breaks the convention."""
    lines = text.splitlines()
    parsed = ParsedDoc()
    pending: list[tuple[int, str]] = []  # directives waiting for their fence
    i = 0
    while i < len(lines):
        number, line = i + 1, lines[i]
        directive, opened = _DIRECTIVE.match(line), _FENCE_OPEN.match(line)
        if directive:
            pending.append((number, directive["body"].strip()))
        elif opened:
            indent, fence = len(opened["indent"]), opened["fence"]
            closing = re.compile(rf"^\s*{re.escape(fence[0])}{{{len(fence)},}}\s*$")
            lang = (opened["info"].split() or [""])[0].lower()
            body: list[str] = []
            while i + 1 < len(lines) and not closing.match(lines[i + 1]):
                i += 1
                body.append(_dedent(lines[i], indent))
            i += 1  # the closing fence (or the end of the file)
            block = Block(name, number, i + 1, lang, "\n".join(body) + "\n")
            parsed.blocks.append(_with_directives(block, pending, parsed.problems))
            pending = []
            if not lang:
                parsed.problems.append(
                    f"{name}:{number}: a fence without a language (bash/python run; text does not)"
                )
            elif block.kind != "shell":
                for offset, code in enumerate(body, number + 1):
                    if _COMMAND.match(code.strip()):
                        parsed.problems.append(f"{name}:{offset}: a command in a {lang!r} block")
        else:
            parsed.problems += [
                f"{name}:{at}: a doc-test directive not above a fence" for at, _ in pending
            ]
            pending = []
            if _COMMAND.match(line.strip()):  # e.g. an indented code block
                parsed.problems.append(
                    f"{name}:{number}: a hybrid-rag command outside a bash block"
                )
        i += 1
    parsed.problems += [f"{name}:{at}: a doc-test directive not above a fence" for at, _ in pending]
    return parsed


def _dedent(line: str, indent: int) -> str:
    """Remove up to ``indent`` leading spaces (the opening fence's indentation)."""
    return line[min(indent, len(line) - len(line.lstrip(" "))) :]


def _with_directives(block: Block, directives: list[tuple[int, str]], problems: list[str]) -> Block:
    skip: str | None = None
    expect: list[str] = []
    for at, text in directives:
        word, _, rest = text.partition(" ")
        where = f"{block.doc}:{at}"
        if word == "skip":
            if not rest.strip():
                problems.append(f"{where}: 'doc-test: skip' needs a reason")
            skip = rest.strip() or "no reason given"
        elif word == "expect" and rest.strip():
            expect.append(rest.strip())
        else:
            problems.append(
                f"{where}: unknown doc-test directive {text!r} (skip REASON | expect TEXT)"
            )
    if block.kind is None and (skip or expect):
        problems.append(f"{block.doc}:{block.line}: doc-test directive on a {block.lang!r} block")
    if skip and expect:
        problems.append(f"{block.doc}:{block.line}: 'expect' on a skipped block is never checked")
    return Block(block.doc, block.line, block.end, block.lang, block.code, skip, tuple(expect))


PARSED = {
    doc.relative_to(ROOT).as_posix(): parse_doc(
        doc.relative_to(ROOT).as_posix(), doc.read_text("utf-8")
    )
    for doc in DOCS
}
BLOCKS = [block for parsed in PARSED.values() for block in parsed.blocks]
CODE_BLOCKS = [b for b in BLOCKS if b.kind]


def test_every_runnable_block_runs_or_says_why_not() -> None:
    problems = [problem for parsed in PARSED.values() for problem in parsed.problems]
    assert not problems, "\n".join(problems)


def test_the_convention_catches_blocks_that_would_rot_silently() -> None:
    doc = "\n".join(
        [
            "<!-- doc-test: skip -->",  # 1: no reason
            "```bash",
            "hybrid-rag kb stats",
            "```",
            "<!-- doc-test: skipp typo -->",  # 5: unknown directive
            "```python",
            "print(1)",
            "```",
            "<!-- doc-test: expect orphan -->",  # 9: not above a fence
            "",
            "```",  # 11: no language
            "hybrid-rag ask x",  # 12: a command outside a shell block
            "```",
            "    hybrid-rag search y",  # 14: in an indented block
            "<!-- doc-test: skip needs a key -->",
            "<!-- doc-test: expect never checked -->",
            "```console",  # 17
            "$ hybrid-rag websearch q \\",
            "  --json",
            "{}",
            "```",
        ]
    )
    parsed = parse_doc("x.md", doc)
    assert parsed.problems == [
        "x.md:1: 'doc-test: skip' needs a reason",
        "x.md:5: unknown doc-test directive 'skipp typo' (skip REASON | expect TEXT)",
        "x.md:9: a doc-test directive not above a fence",
        "x.md:11: a fence without a language (bash/python run; text does not)",
        "x.md:14: a hybrid-rag command outside a bash block",
        "x.md:17: 'expect' on a skipped block is never checked",
    ]
    bash, python, untagged, console = parsed.blocks
    assert (bash.kind, bash.skip, python.kind, untagged.kind) == (
        "shell",
        "no reason given",
        "python",
        None,
    )
    assert console.skip == "needs a key" and console.expect == ("never checked",)
    assert console.script() == "hybrid-rag websearch q \\\n  --json\n"


def test_the_docs_have_commands_and_python() -> None:
    assert len(COMMANDS) >= 15
    assert len([b for b in CODE_BLOCKS if b.kind == "python"]) >= 5
    assert len([b for b in CODE_BLOCKS if not b.skip]) >= 5


# --- static checks, skipped blocks included --------------------------------------------


def _command_lines() -> list[tuple[str, str]]:
    """``hybrid-rag ...`` lines of the shell blocks, continuations joined, comments cut."""
    lines: list[tuple[str, str]] = []
    for block in CODE_BLOCKS:
        if block.kind != "shell":
            continue
        for raw in block.script().replace("\\\n", " ").splitlines():
            match = _COMMAND.match(raw.strip())
            if match:
                lines.append((block.id, match.group(1).split("  #")[0].split(" # ")[0]))
    return lines


def _variants(args: str) -> list[str]:
    """With and without the optional ``[...]`` parts; ``a | b`` alternatives take ``a``."""
    with_opt = _OPTIONAL.sub(lambda m: " " + m.group(1).split(" | ")[0], args)
    return [_OPTIONAL.sub("", args), with_opt]


COMMANDS = _command_lines()


@pytest.mark.parametrize(("where", "args"), COMMANDS, ids=[f"{w}:{a[:40]}" for w, a in COMMANDS])
def test_documented_command_parses(where: str, args: str) -> None:
    from cli.main import build_parser

    for variant in _variants(args):
        argv = shlex.split(variant)
        try:
            build_parser().parse_args(argv)
        except SystemExit as exc:  # argparse's way of rejecting
            pytest.fail(f"{where}: 'hybrid-rag {variant}' does not parse (exit {exc.code})")


@pytest.mark.parametrize("block", CODE_BLOCKS, ids=[b.id for b in CODE_BLOCKS])
def test_code_block_is_well_formed(block: Block) -> None:
    if block.kind == "python":
        compile(block.code, block.id, "exec")  # as `python snippet.py` would: no top-level await
        return
    checked = subprocess.run(
        ["bash", "-n"], input=block.script(), capture_output=True, text=True, timeout=30
    )
    assert checked.returncode == 0, f"{block.id}: bash -n: {checked.stderr}"


# --- running them -------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    returncode: int | None  # None: timed out
    stdout: str
    stderr: str
    seconds: float

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def sandbox_env(home: Path, data_home: Path) -> dict[str, str]:
    """The caller's environment minus keys, tracing and servers; private HOME and data home."""
    env = {k: v for k, v in os.environ.items() if not _SCRUBBED.search(k)}
    venv_bin = str(Path(sys.executable).parent)
    env.update(
        HOME=str(home),
        HYBRID_RAG_HOME=str(data_home),
        PATH=os.pathsep.join([venv_bin, env.get("PATH", os.defpath)]),
        LANGSMITH_TRACING="false",
        PYTHONUNBUFFERED="1",
        PYTHONDONTWRITEBYTECODE="1",
    )
    return env


def test_the_sandbox_has_no_keys_and_its_own_homes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "SERPER_API_KEY", "SEARXNG_BASE_URL",
                 "LANGSMITH_API_KEY", "LANGSMITH_TRACING", "CHROMA_HOST", "HYBRID_RAG_EMBEDDING",
                 "WEBSEARCH_PROVIDER", "DATABASE_URI", "XDG_DATA_HOME"):  # fmt: skip
        monkeypatch.setenv(name, "set-by-the-developer")
    env = sandbox_env(tmp_path / "home", tmp_path / "data")
    assert not {k for k, v in env.items() if v == "set-by-the-developer"}
    assert env["HOME"] == str(tmp_path / "home")
    assert env["HYBRID_RAG_HOME"] == str(tmp_path / "data")
    assert env["LANGSMITH_TRACING"] == "false"
    assert env["PATH"].split(os.pathsep)[0] == str(Path(sys.executable).parent)


class DocSandbox:
    """One document's runnable blocks, run lazily in document order in one environment."""

    def __init__(self, doc: str, base: Path) -> None:
        self.cwd, self.home, self.data_home = base / "work", base / "home", base / "data"
        self.scripts = base / "scripts"
        for folder in (self.cwd, self.home, self.data_home, self.scripts):
            folder.mkdir(parents=True)
        for entry in ROOT.iterdir():
            if entry.name in _COPIED:
                shutil.copytree(entry, self.cwd / entry.name)
            elif entry.name not in _NOT_LINKED:
                (self.cwd / entry.name).symlink_to(entry)
        (self.cwd / ".venv").symlink_to(sys.prefix)  # the venv running the tests
        self.env = sandbox_env(self.home, self.data_home)
        self.blocks = [b for b in PARSED[doc].blocks if b.kind and not b.skip]
        self.outcomes: dict[Block, Outcome] = {}

    def outcome(self, block: Block) -> Outcome:
        for earlier in self.blocks:
            if earlier not in self.outcomes:
                self.outcomes[earlier] = self._run(earlier)
            if earlier == block:
                return self.outcomes[block]
        raise KeyError(block.id)

    def failed_before(self, block: Block) -> list[str]:
        index = self.blocks.index(block)
        return [b.id for b in self.blocks[:index] if self.outcomes[b].returncode != 0]

    def _run(self, block: Block) -> Outcome:
        stem = f"{block.doc.replace('/', '_')}-L{block.line}"  # README.md-L60.py
        if block.kind == "python":
            script = self.scripts / f"{stem}.py"
            argv = [sys.executable, str(script)]
        else:
            script = self.scripts / f"{stem}.sh"
            argv = ["bash", "-e", "-u", "-o", "pipefail", str(script)]
        script.write_text(block.script(), encoding="utf-8")
        started = time.monotonic()
        process = subprocess.Popen(
            argv,
            cwd=self.cwd,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # so a timeout ends the block's children too
        )
        try:
            stdout, stderr = process.communicate(timeout=BLOCK_TIMEOUT_S)
            code: int | None = process.returncode
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            stdout, stderr = process.communicate()
            code = None
        return Outcome(code, stdout, stderr, time.monotonic() - started)


class Sandboxes:
    def __init__(self, factory: pytest.TempPathFactory) -> None:
        self._factory = factory
        self._by_doc: dict[str, DocSandbox] = {}

    def __getitem__(self, doc: str) -> DocSandbox:
        if doc not in self._by_doc:
            base = self._factory.mktemp(f"doc-{Path(doc).stem}")
            self._by_doc[doc] = DocSandbox(doc, base)
        return self._by_doc[doc]


@pytest.fixture(scope="session")
def sandboxes(tmp_path_factory: pytest.TempPathFactory) -> Sandboxes:
    return Sandboxes(tmp_path_factory)


def _tail(text: str, chars: int = 3000) -> str:
    return text if len(text) <= chars else "…" + text[-chars:]


RUNS = [
    pytest.param(b, id=b.id, marks=[pytest.mark.skip(reason=f"{b.id}: {b.skip}")] if b.skip else [])
    for b in CODE_BLOCKS
]


@pytest.mark.parametrize("block", RUNS)
def test_documented_block_runs(block: Block, sandboxes: Sandboxes) -> None:
    sandbox = sandboxes[block.doc]
    out = sandbox.outcome(block)
    earlier = sandbox.failed_before(block)
    report = (
        f"{block.id} ({out.seconds:.1f} s, cwd {sandbox.cwd}, HYBRID_RAG_HOME {sandbox.data_home})"
        + (f"\nearlier blocks of {block.doc} failed: {earlier}" if earlier else "")
        + f"\n--- block\n{block.script()}--- stdout\n{_tail(out.stdout)}\n--- stderr\n{_tail(out.stderr)}"
    )
    if out.returncode is None:
        pytest.fail(f"timed out after {BLOCK_TIMEOUT_S:.0f} s: {report}", pytrace=False)
    if out.returncode != 0:
        pytest.fail(f"exit status {out.returncode}: {report}", pytrace=False)
    if TRACEBACK in out.output:
        pytest.fail(f"a traceback: {report}", pytrace=False)
    missing = [text for text in block.expect if text not in out.output]
    if missing:
        pytest.fail(f"expected in the output: {missing}: {report}", pytrace=False)


@pytest.mark.parametrize("doc", ["docs/USING.md", "docs/DEPLOYMENT.md"])
def test_persistence_snippets_keep_threads_in_the_data_home(doc: str, sandboxes: Sandboxes) -> None:
    # Regression: the snippets used a top-level `async with` (a SyntaxError in a script)
    # and one thread id for both graphs; now they run above, and the threads are on disk.
    sandbox = sandboxes[doc]
    persistent = [b for b in sandbox.blocks if "open_graph()" in b.code and not b.skip]
    assert persistent and all(sandbox.outcome(b).returncode == 0 for b in persistent)
    assert (sandbox.data_home / "checkpoints.sqlite").exists()


_ENV_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")


def _constants(tree: ast.Module) -> dict[str, str]:
    """The module's ``NAME = "VALUE"`` string constants (``ENV_HOME = "HYBRID_RAG_HOME"``)."""
    out: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            for target in node.targets:
                if isinstance(target, ast.Name) and isinstance(node.value.value, str):
                    out[target.id] = node.value.value
    return out


def _is_environ(node: ast.expr) -> bool:
    """``os.environ``, ``environ``, or a mapping named ``env``/``environ`` standing for it."""
    if isinstance(node, ast.Attribute):
        return node.attr == "environ"
    return isinstance(node, ast.Name) and node.id in ("environ", "env")


def variables_read(source: str) -> set[str]:
    """Every environment variable a module reads by name, however it reads it:
    ``os.environ.get(X)`` / ``.pop`` / ``[X]`` / ``X in os.environ``, ``os.getenv(X)``,
    a helper whose name says env (``seconds_env(X)``, ``_env_number(X)``), or a
    ``(field, os.environ.get(X))`` table; ``X`` a literal or a module constant."""
    tree = ast.parse(source)
    constants = _constants(tree)

    def name_of(node: ast.expr) -> str | None:
        value = node.value if isinstance(node, ast.Constant) else None
        if isinstance(node, ast.Name):
            value = constants.get(node.id)
        return value if isinstance(value, str) and _ENV_NAME.match(value) else None

    found: set[str] = set()
    for node in ast.walk(tree):
        candidates: list[ast.expr] = []
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            method = func.attr if isinstance(func, ast.Attribute) else ""
            called = func.id if isinstance(func, ast.Name) else method
            if (
                (method in ("get", "pop") and _is_environ(func.value))
                or called == "getenv"
                or ("env" in called.lower() and called != "setenv")
            ):  # type: ignore[union-attr]
                candidates.append(node.args[0])
        elif isinstance(node, ast.Subscript) and _is_environ(node.value):
            if not isinstance(getattr(node, "ctx", None), ast.Store):
                candidates.append(node.slice)
        elif isinstance(node, ast.Compare) and any(_is_environ(c) for c in node.comparators):
            candidates.append(node.left)
        found |= {n for n in map(name_of, candidates) if n}
    return found


def test_the_variable_scanner_sees_every_way_of_reading_one() -> None:
    source = (
        'import os\nfrom os import environ, getenv\nHOME_VAR = "A_HOME"\n'
        'a = os.environ.get("A_GET")\nb = os.getenv("A_GETENV")\nc = environ["A_ITEM"]\n'
        'd = os.environ.get(HOME_VAR)\ne = seconds_env("A_HELPER", 1.0)\n'
        'f = "A_IN" in os.environ\ndef g(env):\n    return env.get("A_MAPPING")\n'
        'os.environ["NOT_READ"] = "1"\n'
    )
    assert variables_read(source) == {
        "A_GET", "A_GETENV", "A_ITEM", "A_HOME", "A_HELPER", "A_IN", "A_MAPPING"
    }  # fmt: skip


def test_every_documented_langgraph_dev_runs_jobs_concurrently() -> None:
    # Regression: the README's `langgraph dev` ran one job at a time (10 model runs: 17.9 s
    # against 2.6 s with --n-jobs-per-worker 10) without saying so.
    lines = [
        (b.id, line)
        for b in CODE_BLOCKS
        if b.kind != "python"
        for line in b.code.splitlines()
        if re.search(r"\blanggraph dev\b", line) and not line.lstrip().startswith("#")
    ]
    assert lines
    for where, line in lines:
        assert "--n-jobs-per-worker" in line, (where, line)


def test_make_demo_fills_the_data_home_the_examples_read() -> None:
    # Regression: `make demo` ingested into ./.hybrid-rag while the README's Python example,
    # the CLI and langgraph dev read the default data home: "No relevant information".
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = re.search(r"^demo:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert recipe and "hybrid-rag demo" in recipe.group(1)
    assert "HYBRID_RAG_HOME" not in recipe.group(1)


def test_env_example_documents_every_variable_the_code_reads() -> None:
    # langgraph.json reads .env (git-ignored); .env.example is what a user copies.
    import json

    from tools.websearch.web_settings import environment_variables

    assert json.loads((ROOT / "langgraph.json").read_text())["env"] == ".env"
    assert ".env" in (ROOT / ".gitignore").read_text().split()
    example = (ROOT / ".env.example").read_text()
    documented = set(re.findall(r"^# ?([A-Z][A-Z0-9_]+)=", example, re.M))
    # Names built at run time come from the table that builds them: the web-search
    # providers' keys, base URLs and prices.
    read: set[str] = set(environment_variables())
    for folder in ("cli", "server", "graph", "nodes", "run", "tools"):
        for path in (ROOT / folder).rglob("*.py"):
            read |= variables_read(path.read_text(encoding="utf-8"))
    machine = {"OMP_NUM_THREADS", "XDG_DATA_HOME"}  # the platform's, not the project's
    assert read - machine <= documented, sorted(read - machine - documented)


def test_the_configuration_tables_name_every_providers_variable() -> None:
    """README's and DEPLOYMENT's tables list what each registered web-search provider
    needs (its key, or its URL for a keyless self-hosted one)."""
    from tools.websearch import PROVIDERS

    needed = {info.key_env or info.base_url_env for info in PROVIDERS.values()} - {None}
    for doc in (ROOT / "README.md", ROOT / "docs" / "DEPLOYMENT.md"):
        text = doc.read_text(encoding="utf-8")
        assert {n for n in needed if f"`{n}`" not in text} == set(), doc.name


def test_shell_snippets_run_the_venvs_commands_as_a_fresh_clone_has_them() -> None:
    """After `make install-dev` a fresh clone has `.venv/bin/hybrid-rag`, not `hybrid-rag`
    on PATH (the sandbox above puts the venv first, which would hide a bare name)."""
    bare = re.compile(r"(?:^|[;&|(]\s*|^\s*(?:[A-Z_]+=\S+\s+)+)(hybrid-rag|langgraph|uvicorn)\s")
    found = [
        f"{b.doc}:{b.line + i + 1}: {line.strip()}"
        for b in BLOCKS
        if b.lang in SHELL_LANGS
        for i, line in enumerate(b.code.splitlines())
        if bare.search(line.split("#", 1)[0]) and "docker" not in line
    ]
    assert not found, "use .venv/bin/...:\n" + "\n".join(found)
