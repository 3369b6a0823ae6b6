"""Persistent SQLite checkpoints: a thread's history survives a process restart."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from langgraph.errors import GraphRecursionError

from graph import Context
from graph.persistence import checkpoint_path, open_graph, open_sync_graph, run_config
from graph.rag_graph import RECURSION_LIMIT
from run import resources
from tools.answer.sources_block import without_sources

REPO = Path(__file__).resolve().parent.parent
Q1 = "How many days of annual leave after 6 years of service?"
Q2 = "And how many unused days can be carried over?"

# The second process: reopen the same KB (same fake embeddings) and the same SQLite file,
# continue the thread synchronously, and print what it saw as JSON.
CHILD = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from graph import Context
    from graph.persistence import open_sync_graph, run_config
    from run import resources
    from tests.fakes import hash_model
    from tools.kb.knowledge_base import KBConfig, KnowledgeBase

    home, db, question = sys.argv[1], sys.argv[2], sys.argv[3]
    kb = KnowledgeBase(KBConfig(home=Path(home)), embedding_model=hash_model())
    resources.register_kb(kb)
    ctx = Context(data_home=home, search_provider="none")
    with open_sync_graph(db) as graph:
        config = run_config("thread-1")
        before = graph.get_state(config).values
        out = graph.invoke({"question": question}, config, context=ctx)
    resources.close_all()
    print(json.dumps({
        "before": [m.content for m in before.get("messages", [])],
        "messages": [[m.type, m.content] for m in out["messages"]],
        "question": out["question"],
        "answer": out["answer"],
    }))
    """
)


def ctx(home: Path) -> Context:
    return Context(data_home=str(home), search_provider="none")


def test_run_config_sets_thread_and_explicit_recursion_limit() -> None:
    config = run_config("t1", user="u")
    assert config == {
        "configurable": {"user": "u", "thread_id": "t1"},
        "recursion_limit": RECURSION_LIMIT,
    }
    assert run_config("t1", graph="tool_agent")["recursion_limit"] > RECURSION_LIMIT
    assert run_config("t1", recursion_limit=7)["recursion_limit"] == 7
    with pytest.raises(ValueError):
        run_config("")


def test_default_checkpoint_file_is_under_the_data_home(tmp_path: Path) -> None:
    assert checkpoint_path() == Path(os.environ["HYBRID_RAG_HOME"]) / "checkpoints.sqlite"
    assert checkpoint_path(tmp_path / "x" / "c.db") == tmp_path / "x" / "c.db"


async def test_thread_history_survives_a_new_process(sample_home: Path, tmp_path: Path) -> None:
    db = tmp_path / "checkpoints.sqlite"
    async with open_graph(db) as graph:
        first = await graph.ainvoke(
            {"question": Q1}, run_config("thread-1"), context=ctx(sample_home)
        )
    assert "18 days" in first["answer"]
    assert [m.type for m in first["messages"]] == ["human", "ai"]

    resources.close_all()  # the child process opens the same Chroma directory
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(sample_home), str(db), Q2],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    child: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    # The new process read turn 1 from the file before running turn 2 ...
    assert child["before"][0] == Q1
    assert without_sources(child["before"][1]) == first["answer"]  # the message adds its sources
    # ... and appended turn 2 to the same thread.
    assert [t for t, _ in child["messages"]] == ["human", "ai", "human", "ai"]
    assert child["messages"][0][1] == Q1
    assert child["messages"][2][1] == Q2
    assert child["question"] == Q2

    # And back in this process, the file holds all four messages.
    async with open_graph(db) as graph:
        state = await graph.aget_state(run_config("thread-1"))
    assert [m.content for m in state.values["messages"]][::2] == [Q1, Q2]


def test_sync_graph_invokes_and_streams_with_thread_id(sample_home: Path, tmp_path: Path) -> None:
    db = tmp_path / "sync.sqlite"
    with open_sync_graph(db) as graph:
        config = run_config("s-1")
        out = graph.invoke({"question": Q1}, config, context=ctx(sample_home))
        assert "18 days" in out["answer"]
        chunks = list(
            graph.stream(
                {"question": Q2},
                config,
                context=ctx(sample_home),
                stream_mode=["updates", "custom"],
            )
        )
        nodes = {next(iter(c)) for mode, c in chunks if mode == "updates"}
        assert {"prepare", "route", "retrieve_internal", "generate", "cite"} <= nodes
        assert any(mode == "custom" and c.get("step") == "routing" for mode, c in chunks)
        state = graph.get_state(config)
        assert len(state.values["messages"]) == 4
        assert len(graph.get_state_history(config)) > 10


async def test_explicit_recursion_limit_is_enforced(sample_home: Path, tmp_path: Path) -> None:
    async with open_graph(tmp_path / "r.sqlite") as graph:
        with pytest.raises(GraphRecursionError):
            await graph.ainvoke(
                {"question": Q1}, run_config("r-1", recursion_limit=3), context=ctx(sample_home)
            )


async def test_tool_agent_graph_persists_too(sample_home: Path, tmp_path: Path) -> None:
    async with open_graph(tmp_path / "a.sqlite", graph="tool_agent") as graph:
        config = run_config("a-1", graph="tool_agent")
        await graph.ainvoke({"question": Q1}, config, context=ctx(sample_home))
        out = await graph.ainvoke({"question": Q2}, config, context=ctx(sample_home))
    assert [m.content for m in out["messages"] if m.type == "human"] == [Q1, Q2]
