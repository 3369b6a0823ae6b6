"""deploy/compose.yaml runs only commands the tests run for real.

Docker is not available to the tests, so the compose file is checked statically: every
service's command is a program the test helpers start on loopback (``chroma run`` and
``postgres`` in tests/servers.py, ``redis-server`` in tests/redis_server.py, ``langgraph
dev`` in tests/langgraph_server.py, the ``hybrid-rag`` CLI), with options those helpers
pass too (values differ: the containers listen on every interface, the tests on 127.0.0.1).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = ROOT / "deploy" / "compose.yaml"
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
# program (and sub-command) -> the helper that starts it in the tests
HELPERS = {
    ("chroma", "run"): ROOT / "tests" / "servers.py",
    ("postgres",): ROOT / "tests" / "servers.py",
    ("redis-server",): ROOT / "tests" / "redis_server.py",
    ("langgraph", "dev"): ROOT / "tests" / "langgraph_server.py",
}


def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    return data


def argv(service: dict[str, Any]) -> list[str]:
    entry = service.get("entrypoint") or []
    command = service.get("command") or []
    parts = [*entry, *command]
    return shlex.split(parts) if isinstance(parts, str) else [str(p) for p in parts]


def options(args: list[str]) -> list[str]:
    """``--flag`` tokens and the setting names of ``-c name=value``."""
    found: list[str] = []
    for i, token in enumerate(args):
        if token == "-c" and i + 1 < len(args):
            found.append(args[i + 1].split("=", 1)[0] + "=")
        elif token.startswith("--"):
            found.append(token.split("=", 1)[0])
    return found


def test_every_service_runs_a_command_the_tests_run() -> None:
    services = compose()["services"]
    assert {"chroma", "postgres", "redis", "replica-1", "replica-2", "cli"} <= set(services)
    for name, service in services.items():
        args = argv(service)
        assert args, f"service {name} names no command"
        if args[0] == "hybrid-rag":
            from cli.main import build_parser

            build_parser().parse_args(args[1:])  # a real CLI command line
            continue
        key = next((k for k in HELPERS if tuple(args[: len(k)]) == k), None)
        assert key is not None, f"service {name}: {args[0]} is not started by any test"
        helper = HELPERS[key].read_text(encoding="utf-8")
        for option in options(args[len(key) :]):
            quoted = f'"{option}' if option.endswith("=") else f'"{option}"'
            assert quoted in helper, f"service {name}: {option} is not used by {HELPERS[key].name}"


def test_the_replicas_share_one_chroma_redis_and_postgres() -> None:
    services = compose()["services"]
    replicas = [s for n, s in services.items() if n.startswith("replica-")]
    assert len(replicas) >= 2
    for replica in replicas:
        env = replica["environment"]
        assert env["CHROMA_HOST"] == "chroma"
        assert env["HYBRID_RAG_REDIS_URL"].startswith("redis://redis:")
        assert env["HYBRID_RAG_CHECKPOINT_URL"].startswith("postgresql://")
        assert "@postgres:" in env["HYBRID_RAG_CHECKPOINT_URL"]
    assert len({r["ports"][0].split(":")[0] for r in replicas}) == len(replicas)
    dockerfile = DOCKERFILE.read_text(encoding="utf-8")
    for package in ("cli", "graph", "nodes", "prompts", "tools"):
        assert f"COPY {package} ./{package}" in dockerfile
    assert "[postgres,redis]" in dockerfile


# --- the image's build context (.dockerignore) -----------------------------------------


def docker_excluded(path: str, patterns: list[str]) -> bool:
    """Docker's .dockerignore rule for one context-relative path: the last pattern that
    matches it or one of its parent folders decides; ``!`` re-includes; ``*`` stays within
    a path segment, ``**`` spans segments."""

    def regex(pattern: str) -> re.Pattern[str]:
        out = ""
        for part in re.split(r"(\*\*/?|\*|\?)", pattern.strip("/")):
            if part in ("**", "**/"):
                out += "(?:.*/)?" if part == "**/" else ".*"
            elif part == "*":
                out += "[^/]*"
            elif part == "?":
                out += "[^/]"
            else:
                out += re.escape(part)
        return re.compile(out)

    prefixes = ["/".join(path.split("/")[: i + 1]) for i in range(path.count("/") + 1)]
    excluded = False
    for raw in patterns:
        negate = raw.startswith("!")
        rx = regex(raw[1:] if negate else raw)
        if any(rx.fullmatch(p) for p in prefixes):
            excluded = not negate
    return excluded


def dockerignore() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


@pytest.mark.parametrize(
    "path",
    [
        ".env", ".env.production", ".venv/bin/python", ".venv/lib/python3.11/site-packages/x.py",
        ".langgraph_api/.langgraph_ops.pckl", ".hybrid-rag/chroma/chroma.sqlite3",
        "tools/__pycache__/errors.cpython-311.pyc", ".mypy_cache/3.11/x.json",
        ".pytest_cache/v/cache", ".ruff_cache/0.1/x", ".git/config", "checkpoints.sqlite",
        "hybrid_rag.egg-info/PKG-INFO", "tests/test_deploy.py",
    ],
)  # fmt: skip
def test_the_build_context_leaves_out_secrets_state_and_caches(path: str) -> None:
    assert docker_excluded(path, dockerignore()), path


def test_the_build_context_keeps_what_the_image_runs() -> None:
    patterns = dockerignore()
    for path in ("pyproject.toml", "README.md", "langgraph.json", "graph/server.py",
                 "nodes/prepare.py", "tools/kb/answerability_params", "prompts/answer.py",
                 "cli/main.py", "deploy/Dockerfile", ".env.example"):  # fmt: skip
        assert not docker_excluded(path, patterns), path
    assert (ROOT / "tools" / "kb" / "answerability_params").is_dir()


def test_langgraph_dockerfile_adds_the_whole_folder(tmp_path: Path) -> None:
    # Why .dockerignore matters: the generated Dockerfile adds the project folder whole.
    import subprocess
    import sys

    langgraph = Path(sys.executable).parent / "langgraph"
    target = tmp_path / "Dockerfile"
    done = subprocess.run(
        [str(langgraph), "dockerfile", str(target), "--config", str(ROOT / "langgraph.json")],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert re.search(r"^ADD \. /deps/", target.read_text(encoding="utf-8"), re.MULTILINE)
