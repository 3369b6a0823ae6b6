"""Why the agent runs its tool calls itself rather than through LangGraph's ``ToolNode``
(issue 42 item 3: "``ToolNode`` unless a measured reason says otherwise").

One model turn asks three calls: two ``internal_search`` with different queries, then a
``google_search``, under ``max_tool_calls=2``. ``ToolNode`` runs a turn's calls
concurrently (``asyncio.gather``), each with the state the step started from, and has no
per-run budget: both searches number their passages from ``[internal-1]``, so one label
names two passages in what the model reads, and the third call runs past the bound. The
agent's ``run_calls`` numbers in call order and refuses the call over the bound. The
figures are those written in ``graph/agent/tool_calls.py``'s docstring; should a later
``ToolNode`` stop giving them, this test fails and says the migration is due.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.messages.tool import tool_call
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.runtime import Runtime

from graph import Context
from graph.agent.tool_calls import run_calls
from graph.agent.tools import AGENT_TOOLS
from run import resources
from run.run_settings import resolve_run_settings
from run.state import AgentState
from tests.fakes import hash_model
from tools.kb.knowledge_base import KBConfig, KnowledgeBase
from tools.text import LABEL_RE
from tools.websearch import SearchCache, set_default_cache

CALLS = [
    tool_call(name="internal_search", args={"query": "annual leave years of service"}, id="c1"),
    tool_call(name="internal_search", args={"query": "expense reimbursement receipts"}, id="c2"),
    tool_call(name="google_search", args={"query": "python release"}, id="c3"),
]
BUDGET = 2  # max_tool_calls


@pytest.fixture(scope="module")
def kb_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    from tests.conftest import SAMPLE_KB

    home = tmp_path_factory.mktemp("tool-node") / "home"
    kb = KnowledgeBase(KBConfig(home=home), embedding_model=hash_model())
    kb.ingest([SAMPLE_KB])
    resources.register_kb(kb)
    set_default_cache(SearchCache())
    yield home
    set_default_cache(None)
    resources.close_all()


def _state(context: Context) -> dict[str, Any]:
    return {
        "question": "q",
        "language": "en",
        "sources": [],
        "messages": [HumanMessage("q"), AIMessage("", tool_calls=CALLS)],
        "run_settings": resolve_run_settings(context),  # as prepare
    }


def _labels(messages: list[Any]) -> list[list[str]]:
    """Each tool message's passage labels (the first of each line), in call order."""
    out = []
    for message in messages:
        assert isinstance(message, ToolMessage)
        lines = [LABEL_RE.match(line) for line in message.text.splitlines()]
        out.append([m.group(0) for m in lines if m])
    return out


def _collisions(messages: list[ToolMessage]) -> int:
    """Labels that name a different passage in different calls' results."""
    named: dict[str, set[str]] = {}
    for message in messages:
        for source in (message.artifact or {}).get("sources") or []:
            named.setdefault(str(source["label"]), set()).add(str(source["id"]))
    return sum(1 for ids in named.values() if len(ids) > 1)


@pytest.mark.usefixtures("local_operator")
def test_toolnode_would_label_two_passages_alike_and_ignore_the_budget(kb_home: Path) -> None:
    context = Context(data_home=str(kb_home), search_provider="none", max_tool_calls=BUDGET)
    # LangGraph's ToolNode, as a graph node, with the agent's own tools.
    builder = StateGraph(AgentState, context_schema=Context)
    builder.add_node("tools", ToolNode(list(AGENT_TOOLS.values()), handle_tool_errors=True))
    builder.add_edge(START, "tools")
    builder.add_edge("tools", END)
    out = asyncio.run(builder.compile().ainvoke(_state(context), context=context))
    prebuilt = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    prebuilt_labels = _labels(prebuilt[:2])
    # The agent's run_calls on the same turn.
    replies, done, registry = asyncio.run(
        run_calls(_state(context), CALLS, Runtime(context=context), BUDGET)
    )
    own_labels = _labels(replies[:2])

    assert all(prebuilt_labels) and all(own_labels)
    assert prebuilt_labels[0][0] == prebuilt_labels[1][0] == "[internal-1]"  # both restart
    assert _collisions(prebuilt[:2]) == 5  # of 10 passages: the figure in tool_calls.py's doc
    assert len(prebuilt) == 3  # every call ran: no max_tool_calls
    assert _collisions(replies[:2]) == 0
    assert own_labels[1][0] == f"[internal-{len(own_labels[0]) + 1}]"  # numbered in order
    assert len(done) == BUDGET and replies[2].status == "error"  # the third refused
    assert len({s["label"] for s in registry.sources}) == len(registry.sources)
