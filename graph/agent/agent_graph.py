"""The tool-calling agent variant of the hybrid RAG — exported as ``tool_agent``.

    agent_prepare ─(model)───→ call_model ─(tool calls)→ run_tools → call_model
                  │                       └(answer)───→ cite → finalize
                  └(offline)─→ offline_tools → offline_answer → cite → finalize

The model chooses between ``internal_search`` and ``google_search``
(``graph/agent/tools.py``) until it answers, bounded by ``Context.max_model_calls``
and ``Context.max_tool_calls`` in the nodes and by :data:`RECURSION_LIMIT` here.
Without a model, a deterministic rule stands in (see ``graph/agent/offline_loop.py``). Answers
pass the same citation check (``cite``) and run record (``finalize``) as the state
graph, and the output has the state graph's fields plus ``model_calls``.
"""

from __future__ import annotations

from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer

from graph.agent.model_loop import (
    after_model,
    after_prepare,
    agent_prepare,
    call_model,
    late_call_model,
    late_run_tools,
    run_tools,
)
from graph.agent.offline_loop import offline_answer, offline_tools
from nodes.finalize import finalize
from nodes.generate import cite
from run.context import Context, field_bound
from run.deadline import Node, with_default_context
from run.reader import local_operator_config
from run.state import AgentOutputState, AgentState, InputState

# Each model turn that calls tools costs two steps (call_model, run_tools). The nodes
# stop at max_model_calls; this backstop allows the largest loop Context accepts plus
# prepare/cite/finalize, and ends a run that somehow loops past it.
RECURSION_LIMIT = 2 * int(field_bound("max_model_calls", "le")) + 10


def build_agent_graph(
    *, checkpointer: Checkpointer = None, local: bool = True
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Compile the agent graph (without a checkpointer for the LangGraph server; ``local``:
    runs in this process are the local operator's, ``False`` for a server)."""
    builder = StateGraph(
        AgentState,
        context_schema=Context,
        input_schema=InputState,
        output_schema=AgentOutputState,
    )
    nodes: tuple[tuple[str, Node[AgentState]], ...] = (
        ("agent_prepare", agent_prepare),
        ("call_model", call_model),
        ("run_tools", run_tools),
        ("offline_tools", offline_tools),
        ("offline_answer", offline_answer),
        ("cite", cite),
        ("finalize", finalize),
    )
    # Past the run's deadline (run_timeout_s) these answer without the model and the web.
    late: dict[str, Node[AgentState]] = {"call_model": late_call_model, "run_tools": late_run_tools}
    for name, node in nodes:
        builder.add_node(
            name, with_default_context(node, late.get(name), starts_run=name == "agent_prepare")
        )
    builder.add_edge(START, "agent_prepare")
    builder.add_conditional_edges("agent_prepare", after_prepare, ["call_model", "offline_tools"])
    builder.add_conditional_edges(
        "call_model", after_model, ["run_tools", "cite", "offline_tools", "offline_answer"]
    )
    builder.add_edge("run_tools", "call_model")
    builder.add_edge("offline_tools", "offline_answer")
    builder.add_edge("offline_answer", "cite")
    builder.add_edge("cite", "finalize")
    builder.add_edge("finalize", END)
    compiled = builder.compile(checkpointer=checkpointer, name="tool_agent")
    # In-process runs are the local operator's; a server's runs carry the caller the server
    # verified, and without one read nothing (run/reader.py).
    caller = local_operator_config() if local else {}
    return compiled.with_config(recursion_limit=RECURSION_LIMIT, **caller)


# The agent for in-process use (the CLI, Python); servers serve build_agent_graph(local=False).
graph = build_agent_graph()
