"""Postgres checkpoints for the Python API and the CLI, against a real PostgreSQL server.

The server is the distribution's PostgreSQL, started on 127.0.0.1 by the
``postgres_server`` fixture (tests/servers.py) and restarted, stopped and replaced by a
silent socket here. Each test uses its own database, so the tests do not share threads.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from graph import Context
from graph.persistence import checkpoint_location, open_graph, open_sync_graph, run_config
from run import resources
from tests.fakes import hash_model
from tests.servers import HOST, PostgresServer, free_port
from tools.answer.sources_block import without_sources
from tools.errors import CheckpointError, ConfigError
from tools.kb.knowledge_base import KBConfig, KnowledgeBase

pytest.importorskip("langgraph.checkpoint.postgres", reason="the postgres extra is not installed")

REPO = Path(__file__).resolve().parent.parent
Q1 = "How many days of annual leave after 6 years of service?"
Q2 = "And how many unused days can be carried over?"
Q3 = "Who approves a purchase of CNY 80,000?"
FAST_FAIL = "connect_timeout=2"  # the tests' time limit for a server that does not answer

# A second process: the same KB (same fake embeddings), the thread from
# $HYBRID_RAG_CHECKPOINT_URL (no argument), continued synchronously; prints JSON.
CHILD = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from graph import Context
    from graph.persistence import open_sync_graph, run_config
    from run import resources
    from tests.fakes import hash_model
    from tools.kb.knowledge_base import KBConfig, KnowledgeBase

    home, thread, question = sys.argv[1], sys.argv[2], sys.argv[3]
    resources.register_kb(KnowledgeBase(KBConfig(home=Path(home)), embedding_model=hash_model()))
    ctx = Context(data_home=home, search_provider="none")
    with open_sync_graph() as graph:
        config = run_config(thread)
        before = graph.get_state(config).values
        out = graph.invoke({"question": question}, config, context=ctx)
    resources.close_all()
    print(json.dumps({
        "before": [m.content for m in before.get("messages", [])],
        "messages": [[m.type, m.content] for m in out["messages"]],
    }))
    """
)


def ctx(home: Path) -> Context:
    return Context(data_home=str(home), search_provider="none")


def human_turns(values: dict[str, Any]) -> list[str]:
    return [m.content for m in values.get("messages", []) if m.type == "human"]


@pytest.fixture
def db_url(postgres_server: PostgresServer, request: pytest.FixtureRequest) -> str:
    """A fresh database on the module's server (URL with a short connect timeout)."""
    name = "t_" + request.node.name.lower()[:50].replace("[", "_").replace("]", "")
    return postgres_server.create_database(name) + "?" + FAST_FAIL


@pytest.fixture
def running(postgres_server: PostgresServer) -> Iterator[PostgresServer]:
    """The server, running again after a test that stopped it."""
    yield postgres_server
    if not postgres_server.running:
        postgres_server.start()


async def test_thread_continues_across_processes_and_a_postgres_crash(
    sample_home: Path, db_url: str, running: PostgresServer
) -> None:
    # Turn 1 in this process.
    async with open_graph(db_url) as graph:
        first = await graph.ainvoke({"question": Q1}, run_config("pg-1"), context=ctx(sample_home))
    assert "18 days" in first["answer"]

    # Turn 2 in another process, which finds the URL in the environment.
    resources.close_all()  # the child opens the same embedded Chroma directory
    env = {**os.environ, "PYTHONPATH": str(REPO), "HYBRID_RAG_CHECKPOINT_URL": db_url}
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(sample_home), "pg-1", Q2],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    child = json.loads(proc.stdout.strip().splitlines()[-1])
    # it read turn 1 from Postgres (the answer's message adds its sources block)
    assert [child["before"][0], without_sources(child["before"][1])] == [Q1, first["answer"]]
    assert [t for t, _ in child["messages"]] == ["human", "ai", "human", "ai"]

    # The server crashes (immediate shutdown: recovery from the WAL at the next start).
    running.restart(signal.SIGQUIT)

    # Turn 3 in this process again, with a new graph: nothing was lost.
    resources.register_kb(KnowledgeBase(KBConfig(home=sample_home), embedding_model=hash_model()))
    async with open_graph(db_url) as graph:
        state = await graph.aget_state(run_config("pg-1"))
        assert human_turns(state.values) == [Q1, Q2]
        third = await graph.ainvoke({"question": Q3}, run_config("pg-1"), context=ctx(sample_home))
    assert human_turns(third) == [Q1, Q2, Q3]
    assert [m.type for m in third["messages"]] == ["human", "ai"] * 3
    assert third["question"] == Q3


async def test_an_open_graph_rides_out_a_restart_and_names_the_server_while_down(
    sample_home: Path, db_url: str, running: PostgresServer
) -> None:
    where = f"{HOST}:{running.port}"
    async with open_graph(db_url) as graph:
        config = run_config("pg-2")
        await graph.ainvoke({"question": Q1}, config, context=ctx(sample_home))

        running.restart()  # between two turns: the pool replaces the broken connection
        second = await graph.ainvoke({"question": Q2}, config, context=ctx(sample_home))
        assert human_turns(second) == [Q1, Q2]

        running.stop()  # down during a turn: a clear, time-limited error
        started = time.monotonic()
        with pytest.raises(CheckpointError) as info:
            await graph.ainvoke({"question": Q3}, config, context=ctx(sample_home))
        assert where in str(info.value)
        assert "Postgres" in str(info.value)
        assert time.monotonic() - started < 15

        running.start()  # back: the same graph continues the thread, nothing lost
        third = await graph.ainvoke({"question": Q3}, config, context=ctx(sample_home))
    assert human_turns(third) == [Q1, Q2, Q3]
    assert len(third["messages"]) == 6


def test_sync_graph_on_postgres(sample_home: Path, db_url: str) -> None:
    with open_sync_graph(db_url, graph="tool_agent") as graph:
        config = run_config("pg-agent", graph="tool_agent")
        graph.invoke({"question": Q1}, config, context=ctx(sample_home))
        out = graph.invoke({"question": Q2}, config, context=ctx(sample_home))
        assert human_turns(out) == [Q1, Q2]
        assert human_turns(graph.get_state(config).values) == [Q1, Q2]
        assert len(graph.get_state_history(config)) > 4


async def test_server_down_at_start_is_a_clear_error_naming_the_host() -> None:
    port = free_port()  # nothing listens here
    url = f"postgresql://app:s3cret-pw@{HOST}:{port}/threads?{FAST_FAIL}"
    started = time.monotonic()
    with pytest.raises(CheckpointError) as info:
        async with open_graph(url):
            pass
    message = str(info.value)
    assert f"app@{HOST}:{port}/threads" in message
    assert "s3cret-pw" not in message
    assert "\n" not in message
    assert time.monotonic() - started < 10
    with pytest.raises(CheckpointError, match=f"{HOST}:{port}"), open_sync_graph(url):
        pass


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A TCP port that accepts connections and never says a word."""
    with socket.socket() as listener:
        listener.bind((HOST, 0))
        listener.listen(8)
        stop = threading.Event()
        held: list[socket.socket] = []

        def accept() -> None:
            listener.settimeout(0.2)
            while not stop.is_set():
                try:
                    held.append(listener.accept()[0])
                except OSError:
                    continue

        worker = threading.Thread(target=accept, daemon=True)
        worker.start()
        yield int(listener.getsockname()[1])
        stop.set()
        worker.join(timeout=5)
        for conn in held:
            conn.close()


async def test_a_server_that_never_answers_times_out_with_its_name(silent_server: int) -> None:
    url = f"postgresql://postgres@{HOST}:{silent_server}/postgres?{FAST_FAIL}"
    started = time.monotonic()
    with pytest.raises(CheckpointError, match=f"{HOST}:{silent_server}.*within 2 s"):
        async with open_graph(url):
            pass
    assert time.monotonic() - started < 10


def test_bad_urls_are_config_errors(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from graph.postgres_checkpoints import parse_postgres_url

    with pytest.raises(ConfigError, match=r"'abc'.*db\.example") as info:
        parse_postgres_url("postgresql://u:topsecret@db.example:abc/threads")
    assert "topsecret" not in str(info.value)
    with pytest.raises(ConfigError, match="bogus"):
        parse_postgres_url("postgresql://u@db.example/threads?bogus=1")
    with pytest.raises(ConfigError, match="connect_timeout"):
        parse_postgres_url("postgresql://u@db.example/threads?connect_timeout=soon")
    target = parse_postgres_url("postgres://u:pw@db.example:6543/threads")
    assert (target.where, target.connect_timeout) == ("u@db.example:6543/threads", 10)

    with pytest.raises(ConfigError, match="unsupported scheme 'mysql'"):
        checkpoint_location("mysql://u@db.example/threads")
    monkeypatch.setenv("HYBRID_RAG_CHECKPOINT_URL", "redis://cache:6379/0")
    with pytest.raises(ConfigError, match=r"\$HYBRID_RAG_CHECKPOINT_URL.*'redis'"):
        checkpoint_location()
    monkeypatch.setenv("HYBRID_RAG_CHECKPOINT_URL", "postgresql://u@db.example/threads")
    assert checkpoint_location() == "postgresql://u@db.example/threads"
    monkeypatch.setenv("HYBRID_RAG_CHECKPOINT_URL", str(tmp_path / "threads.sqlite"))
    assert checkpoint_location() == tmp_path / "threads.sqlite"  # a file: SQLite
    monkeypatch.setenv("HYBRID_RAG_CHECKPOINT_URL", "")
    assert checkpoint_location() == Path(os.environ["HYBRID_RAG_HOME"]) / "checkpoints.sqlite"


def test_cli_continues_a_thread_on_postgres(
    tmp_path: Path,
    kb_dir: Path,
    db_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from cli.main import main

    monkeypatch.setattr(
        "tools.kb.knowledge_base.make_embedding_model", lambda *a, **k: hash_model()
    )
    monkeypatch.setenv("HYBRID_RAG_CHECKPOINT_URL", db_url)
    home = ["--home", str(tmp_path / "cli-home")]
    try:
        assert main([*home, "ingest", str(kb_dir)]) == 0
        question = "How many days of annual leave after five years?"
        assert main([*home, "ask", question, "--thread", "cli-1", "--quiet"]) == 0
        first = capsys.readouterr().out
        assert "15 days" in first
        assert "thread=cli-1 messages=2" in first
        assert main([*home, "ask", "And the carry-over?", "--thread", "cli-1", "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
    finally:
        resources.close_all()
    humans = [m["content"] for m in out["messages"] if m["type"] == "human"]
    assert humans == [question, "And the carry-over?"]
    assert not (tmp_path / "cli-home" / "checkpoints.sqlite").exists()  # it went to Postgres


def test_cli_says_in_one_line_that_postgres_is_down(tmp_path: Path) -> None:
    port = free_port()  # nothing listens here
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "HYBRID_RAG_CHECKPOINT_URL": f"postgresql://u:pw-xyz@{HOST}:{port}/x?{FAST_FAIL}",
    }
    code = "import sys; from cli.main import main; sys.exit(main(sys.argv[1:]))"
    started = time.monotonic()
    down = subprocess.run(
        [sys.executable, "-c", code, "--home", str(tmp_path), "ask", "hi", "--thread", "t"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert down.returncode == 2, down.stderr[-3000:]
    assert "Traceback" not in down.stderr
    lines = down.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("hybrid-rag: error: cannot connect to the checkpoint database")
    assert f"u@{HOST}:{port}/x" in lines[0]
    assert "pw-xyz" not in down.stderr
    assert time.monotonic() - started < 60
