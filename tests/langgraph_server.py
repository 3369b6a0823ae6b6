"""Start, wait for and stop a real ``langgraph dev`` on 127.0.0.1, offline.

Shared by the server tests (tests/test_server.py, tests/test_bad_input.py) and the load
benchmark (bench/bench_server_load.py): ``langgraph dev --no-browser --no-reload --port
<free>`` with ``HYBRID_RAG_HOME`` in a temp dir and no model or search keys.

The server runs in a temp working directory with a copy of ``langgraph.json`` whose paths
point into the repo: ``langgraph dev`` keeps its threads, runs and assistants in
``./.langgraph_api`` of its working directory, and a test run must not leave them in the
repo (where a developer's own ``langgraph dev`` would show them), nor read the repo's
``.env``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from langgraph_sdk import get_client

from tests.ports import free_port, owns_listening_port
from tools.websearch.web_settings import environment_variables

REPO = Path(__file__).resolve().parent.parent
SAMPLE_KB = REPO / "examples" / "kb"
LANGGRAPH = Path(sys.executable).parent / "langgraph"
START_DEADLINE_S = 90.0
# Variables that would take the server out of offline mode or send traces.
SCRUBBED_ENV = (
    *environment_variables(),  # every web-search provider's key, URL and price
    "OPENAI_API_KEY", "OPENAI_BASE_URL", "CHROMA_HOST", "CHROMA_PORT",
    "LANGSMITH_API_KEY", "LANGCHAIN_API_KEY", "LANGCHAIN_TRACING_V2",
)  # fmt: skip


@dataclass
class LocalServer:
    url: str
    process: subprocess.Popen[bytes]
    log_path: Path
    home: Path
    cwd: Path  # langgraph dev's working directory (its .langgraph_api is there)

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


def server_env(home: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV}
    env.update(HYBRID_RAG_HOME=str(home), LANGSMITH_TRACING="false", PYTHONUNBUFFERED="1")
    env.update(extra or {})
    return env


def server_config(cwd: Path) -> Path:
    """``langgraph.json`` for a server running in ``cwd``: graph paths into the repo, the
    repo importable, no ``.env``."""
    config = json.loads((REPO / "langgraph.json").read_text(encoding="utf-8"))
    config.pop("env", None)
    config["dependencies"] = [str(REPO)]
    for spec in [*config["graphs"].values(), *([config["auth"]] if "auth" in config else [])]:
        path, _, name = spec["path"].partition(":")
        spec["path"] = f"{(REPO / path).resolve()}:{name}"
    if "app" in config.get("http", {}):  # the custom routes (server/webapp.py)
        path, _, name = config["http"]["app"].partition(":")
        config["http"]["app"] = f"{(REPO / path).resolve()}:{name}"
    target = cwd / "langgraph.json"
    target.write_text(json.dumps(config, indent=2), encoding="utf-8")
    return target


def start_server(
    home: Path,
    log_path: Path,
    *,
    jobs: int | None = None,
    env: Mapping[str, str] | None = None,
) -> LocalServer:
    """Start ``langgraph dev`` in a temp working directory beside ``log_path`` (config: the
    repo's langgraph.json, paths made absolute); no wait.

    ``env`` adds variables to the scrubbed environment (e.g. a local search provider)."""
    cwd = log_path.parent / f"{log_path.stem}-cwd"
    cwd.mkdir(parents=True, exist_ok=True)
    port = free_port()
    cmd = [str(LANGGRAPH), "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1"]
    cmd += ["--port", str(port)]
    cmd += ["--config", str(server_config(cwd))]
    if jobs:
        cmd += ["--n-jobs-per-worker", str(jobs)]
    log = log_path.open("wb")
    process = subprocess.Popen(
        cmd, cwd=cwd, env=server_env(home, env), stdout=log, stderr=subprocess.STDOUT
    )
    log.close()  # the child holds its own descriptor
    return LocalServer(f"http://127.0.0.1:{port}", process, log_path, home, cwd)


def wait_until_ready(server: LocalServer, deadline_s: float = START_DEADLINE_S) -> float:
    """Poll ``GET /ok``; returns the seconds it took. Raises with the log on failure."""
    started = time.monotonic()
    while time.monotonic() - started < deadline_s:
        if server.process.poll() is not None:
            raise RuntimeError(f"langgraph dev exited early:\n{server.log_tail()}")
        try:
            port = int(server.url.rsplit(":", 1)[1])
            ok = httpx.get(f"{server.url}/ok", timeout=2).status_code == 200
            if ok and owns_listening_port(server.process.pid, port) is not False:
                return time.monotonic() - started
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    raise RuntimeError(f"langgraph dev not ready after {deadline_s} s:\n{server.log_tail()}")


def stop_server(server: LocalServer) -> None:
    """terminate → wait → kill."""
    if server.process.poll() is None:
        server.process.terminate()
        try:
            server.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait(timeout=15)


def ingest_sample_kb(home: Path) -> str:
    """Ingest examples/kb into ``home`` with the project's code (the server's embeddings)."""
    from tools.kb.knowledge_base import KBConfig, KnowledgeBase

    with KnowledgeBase(KBConfig(home=home)) as kb:
        return kb.ingest([SAMPLE_KB]).summary()


@contextmanager
def serving(
    home: Path, log_path: Path, env: Mapping[str, str] | None = None
) -> Iterator[LocalServer]:
    """``langgraph dev`` on ``home``, ready; stopped on exit."""
    srv = start_server(home, log_path, env=env)
    try:
        wait_until_ready(srv)
        yield srv
    finally:
        stop_server(srv)


@contextmanager
def serving_sample_kb(base: Path) -> Iterator[LocalServer]:
    """``langgraph dev`` over the sample KB, ingested into a fresh data home under ``base``
    while the server boots; stopped on exit."""
    home = base / "home"
    home.mkdir()
    srv = start_server(home, base / "langgraph-dev.log")
    try:
        ingest_sample_kb(home)  # it opens the KB on its first run
        wait_until_ready(srv)
        yield srv
    finally:
        stop_server(srv)


def sdk(url: str) -> Any:
    """A langgraph-sdk client (typed ``Any``: the SDK's TypedDicts are stricter than JSON)."""
    return get_client(url=url)


def agent_graph_available() -> bool:
    try:
        import graph.agent.agent_graph  # noqa: F401
    except Exception:
        return False
    return True
