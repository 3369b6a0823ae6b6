"""Issue 27, point 5: two runs on one conversation thread at once never drop a turn.

Two graphs on one checkpoint store stand for two processes (each has its own saver and
connections). Run A waits inside its answer model while run B completes a turn on the
same thread; A then finds the thread moved on and fails with ``ConcurrentTurnError``
before saving, so B's turn stays. Before the guard, A saved over B silently.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from graph import Context
from graph.persistence import open_graph, run_config
from run.models import register_chat_model, unregister_chat_model
from tests.fakes import ScriptedChatModel
from tests.servers import PostgresServer
from tools.errors import ConcurrentTurnError

Q1 = "How many days of annual leave after 6 years of service?"
Q2 = "And how many unused days can be carried over?"
Q3 = "Who approves a purchase of CNY 80,000?"
WAIT_S = 120.0  # bounds every wait: a regression fails instead of hanging


@pytest.fixture
def gate() -> Iterator[tuple[threading.Event, threading.Event]]:
    """A model ``custom:gate`` whose answer waits until released: (entered, release)."""
    entered, release = threading.Event(), threading.Event()

    def answer(messages: Any) -> str:
        entered.set()
        release.wait(WAIT_S)
        return "Up to 5 days [internal-1]."

    register_chat_model("gate", ScriptedChatModel(answer=answer))
    yield entered, release
    release.set()
    unregister_chat_model("gate")


async def overlapping_turns(
    where: str, home: Path, gate: tuple[threading.Event, threading.Event]
) -> None:
    entered, release = gate
    offline = Context(data_home=str(home), search_provider="none", model="offline")
    gated = Context(
        data_home=str(home), search_provider="none", model="custom:gate", fast_model="offline"
    )
    config = run_config("shared")
    async with open_graph(where) as one, open_graph(where) as two:
        await one.ainvoke({"question": Q1}, config, context=offline)
        # durability="sync": A's checkpoints are saved before its next step starts, so B
        # reads A's turn so far (with the default "async" a save may still be in flight,
        # B then reads a stale thread and is the one refused).
        slow = asyncio.create_task(
            one.ainvoke({"question": Q2}, config, context=gated, durability="sync")
        )
        assert await asyncio.to_thread(entered.wait, WAIT_S)  # A is inside its model call
        fast = await two.ainvoke({"question": Q3}, config, context=offline)
        assert fast["question"] == Q3
        release.set()
        with pytest.raises(ConcurrentTurnError, match="'shared' changed while this run"):
            await asyncio.wait_for(slow, WAIT_S)
        values = (await two.aget_state(config)).values
    humans = [m.content for m in values["messages"] if m.type == "human"]
    assert humans[0] == Q1 and humans[-1] == Q3  # B's turn was kept
    assert values["messages"][-1].type == "ai" and values["answer"] == fast["answer"]


async def test_sqlite_thread_keeps_both_turns_or_says_why(
    sample_home: Path, tmp_path: Path, gate: tuple[threading.Event, threading.Event]
) -> None:
    await overlapping_turns(str(tmp_path / "threads.sqlite"), sample_home, gate)


async def test_postgres_thread_keeps_both_turns_or_says_why(
    sample_home: Path,
    postgres_server: PostgresServer,
    gate: tuple[threading.Event, threading.Event],
) -> None:
    pytest.importorskip("langgraph.checkpoint.postgres")
    url = postgres_server.create_database("t_thread_guard") + "?connect_timeout=5"
    await overlapping_turns(url, sample_home, gate)
