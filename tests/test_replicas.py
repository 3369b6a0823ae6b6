"""Two graph servers (replicas) behind one Chroma server, all real, all on 127.0.0.1.

``chroma run`` (tests/servers.py) holds the knowledge base; two ``langgraph dev`` processes
(tests/langgraph_server.py), each with its own empty data home, find it through
``CHROMA_HOST`` / ``CHROMA_PORT``, as replicas do in docs/DEPLOYMENT.md. The knowledge base
changes only through the ``hybrid-rag`` CLI in its own process; both replicas see every
change on their next run, without a restart (their BM25 snapshot follows the registry
generation in Chroma). Offline: local embeddings, no model, no web search.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.langgraph_server import (
    LocalServer,
    sdk,
    server_env,
    start_server,
    stop_server,
    wait_until_ready,
)
from tests.servers import ChromaServer

CLI = Path(sys.executable).parent / "hybrid-rag"
CONTEXT = {"search_provider": "none"}
LEAVE_Q = "How many days of annual leave after five years of service?"
ROBOT_Q = "How many kilograms can the R2 warehouse robot carry?"
DOCS = {
    "leave.md": "# Annual leave\n\nEmployees receive 15 days of annual leave after five years "
    "of service.\n\n## Carry-over\n\nUp to 5 unused days carry over to the next year.\n",
    "it.txt": "IT incident process. Call extension 4455 for severity one outages.\n",
    "expenses.md": "# Expense rules\n\nTaxi receipts above 200 CNY need manager approval.\n",
}
ROBOT = "# Robot R2 manual\n\nThe R2 warehouse robot carries 300 kg and runs 8 hours per charge.\n"


@dataclass
class Cluster:
    chroma: ChromaServer
    replicas: tuple[LocalServer, LocalServer]
    kb: Path  # the folder the CLI ingests
    cli_home: Path  # the CLI's own data home (its embedding cache); the KB is in Chroma

    def cli(self, *args: str) -> str:
        """``hybrid-rag --home CLI_HOME ARGS`` against the Chroma server; its stdout."""
        env = server_env(
            self.cli_home,
            {"CHROMA_HOST": self.chroma.host, "CHROMA_PORT": str(self.chroma.port)},
        )
        done = subprocess.run(
            [str(CLI), "--home", str(self.cli_home), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout


@pytest.fixture(scope="module")
def cluster(
    chroma_server: ChromaServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    if not CLI.exists():
        pytest.skip(f"{CLI} is not installed (make install-dev)")
    base = tmp_path_factory.mktemp("replicas")
    kb = base / "kb"
    kb.mkdir()
    for name, text in DOCS.items():
        (kb / name).write_text(text, encoding="utf-8")
    env = {"CHROMA_HOST": chroma_server.host, "CHROMA_PORT": str(chroma_server.port)}
    started: list[LocalServer] = []
    try:
        for name in ("a", "b"):
            home = base / f"home-{name}"
            home.mkdir()
            started.append(start_server(home, base / f"replica-{name}.log", env=env))
        a, b = started
        found = Cluster(chroma_server, (a, b), kb, base / "cli-home")
        found.cli("ingest", str(kb))  # while the replicas boot
        for server in started:
            wait_until_ready(server)
        yield found
    finally:
        for server in started:
            stop_server(server)


async def ask(server: LocalServer, question: str) -> dict[str, Any]:
    out = await sdk(server.url).runs.wait(
        None, "hybrid_rag", input={"question": question}, context=CONTEXT
    )
    assert isinstance(out, dict) and "answer" in out, (out, server.log_tail())
    return out


async def ask_both(cluster: Cluster, question: str) -> list[dict[str, Any]]:
    return list(await asyncio.gather(*(ask(r, question) for r in cluster.replicas)))


def cited(out: dict[str, Any]) -> set[str]:
    return {c["doc_id"] for c in out["citations"] if c.get("type") == "internal"}


async def test_replicas_share_the_chroma_server_and_follow_cli_changes(cluster: Cluster) -> None:
    # Both replicas answer from the server's KB; neither keeps Chroma data of its own.
    for out in await ask_both(cluster, LEAVE_Q):
        assert "15 days" in out["answer"], out
        assert cited(out) == {"leave.md"}
    for replica in cluster.replicas:
        assert not (replica.home / "chroma").exists()

    # An ingest through the CLI (another process) is visible to both, without a restart.
    (cluster.kb / "robot.md").write_text(ROBOT, encoding="utf-8")
    assert "1 added" in cluster.cli("ingest", str(cluster.kb))
    for out in await ask_both(cluster, ROBOT_Q):
        assert "robot.md" in cited(out), out
        assert "300 kg" in out["answer"]

    # A delete through the CLI is gone on both.
    cluster.cli("kb", "delete", "robot.md")
    for out in await ask_both(cluster, ROBOT_Q):
        assert "robot.md" not in cited(out), out
        assert "300 kg" not in out["answer"]
    for replica in cluster.replicas:
        assert replica.process.poll() is None  # nothing was restarted


async def test_chroma_restart_during_a_query_is_named_and_the_next_query_works(
    cluster: Cluster,
) -> None:
    chroma = cluster.chroma
    store = f"Chroma server at {chroma.host}:{chroma.port}"
    a = cluster.replicas[0]
    await ask(a, LEAVE_Q)  # warm: the KB is open on replica a

    chroma.send(signal.SIGSTOP)  # frozen: the next request hangs in the middle of the query
    try:
        run = asyncio.create_task(ask(a, LEAVE_Q))
        await asyncio.sleep(1.5)
        assert not run.done()
    finally:
        chroma.stop(signal.SIGKILL)  # the in-flight request is cut by the crash
    during = await asyncio.wait_for(run, timeout=120)
    assert any(store in w for w in during["warnings"]), during["warnings"]
    assert not cited(during)  # nothing from the lost store is cited
    assert "15 days" not in during["answer"]

    chroma.start()  # same port, same data
    for out in await ask_both(cluster, LEAVE_Q):
        assert cited(out) == {"leave.md"}, out
        assert "15 days" in out["answer"]
        assert not any("Chroma" in w for w in out["warnings"]), out["warnings"]
