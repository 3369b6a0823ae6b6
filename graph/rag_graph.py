"""The hybrid RAG state graph — the workflow's table of contents.

    prepare → route → rewrite → retrieve_internal ∥ search_web → rerank → grade
        grade ──(weak KB evidence, web not yet searched)──→ search_web → rerank → grade
        grade → reflect ──(next query, ≤ max_iterations)──→ retrieve_internal | search_web
        reflect → generate → cite → finalize

Every node is ``(state, runtime) -> partial update``; see ``nodes/``.
"""

from __future__ import annotations

from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer

from nodes.finalize import finalize
from nodes.generate import cite, generate
from nodes.grade import after_grade, grade
from nodes.prepare import prepare
from nodes.reflect import after_reflect, reflect
from nodes.rerank import rerank
from nodes.retrieve import late_search_web, retrieve_internal, search_web
from nodes.rewrite import after_rewrite, rewrite
from nodes.route import route
from run.context import Context
from run.deadline import Node, with_default_context
from run.reader import local_operator_config
from run.state import InputState, OutputState, State

# Steps a run may take. The loops are bounded by ``max_iterations`` in the nodes;
# this is a second, explicit backstop far below LangGraph's default (~10,000).
RECURSION_LIMIT = 60


def build_graph(
    *, checkpointer: Checkpointer = None, local: bool = True
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Compile the state graph (without a checkpointer for the LangGraph server; ``local``:
    runs in this process are the local operator's, ``False`` for a server)."""
    builder = StateGraph(
        State, context_schema=Context, input_schema=InputState, output_schema=OutputState
    )
    nodes: tuple[tuple[str, Node[State], str], ...] = (
        ("prepare", prepare, "validate the question, reset the turn"),
        ("route", route, "knowledge | search | both"),
        ("rewrite", rewrite, "knowledge-base and web queries"),
        ("retrieve_internal", retrieve_internal, "hybrid knowledge-base retrieval"),
        ("search_web", search_web, "live web search"),
        ("rerank", rerank, "second-stage ranking (optional)"),
        ("grade", grade, "confidence and web fallback"),
        ("reflect", reflect, "bounded re-retrieval"),
        ("generate", generate, "answer with labelled sources"),
        ("cite", cite, "citation check"),
        ("finalize", finalize, "run statistics"),
    )
    late: dict[str, Node[State]] = {"search_web": late_search_web}
    for name, node, step in nodes:
        # Node metadata shows in Studio and on the node's LangSmith run.
        wrapped = with_default_context(node, late.get(name), starts_run=name == "prepare")
        builder.add_node(name, wrapped, metadata={"hybrid_rag.step": step})
    builder.add_edge(START, "prepare")
    builder.add_edge("prepare", "route")
    builder.add_edge("route", "rewrite")
    builder.add_conditional_edges("rewrite", after_rewrite, ["retrieve_internal", "search_web"])
    builder.add_edge("retrieve_internal", "rerank")
    builder.add_edge("search_web", "rerank")
    builder.add_edge("rerank", "grade")
    builder.add_conditional_edges("grade", after_grade, ["search_web", "reflect"])
    builder.add_conditional_edges(
        "reflect", after_reflect, ["retrieve_internal", "search_web", "generate"]
    )
    builder.add_edge("generate", "cite")
    builder.add_edge("cite", "finalize")
    builder.add_edge("finalize", END)
    compiled = builder.compile(checkpointer=checkpointer, name="hybrid_rag")
    # In-process runs are the local operator's; a server's runs carry the caller the server
    # verified, and without one read nothing (run/reader.py).
    caller = local_operator_config() if local else {}
    return compiled.with_config(recursion_limit=RECURSION_LIMIT, **caller)


# The graph for in-process use (the CLI, Python); servers serve build_graph(local=False).
graph = build_graph()
