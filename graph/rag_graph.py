"""The hybrid RAG state graph — the workflow's table of contents.

    prepare → route → rewrite → retrieve_internal ∥ search_web → rerank → grade
        grade ──(weak KB evidence, web not yet searched)──→ search_web → rerank → grade
        grade → reflect ──(next query, ≤ max_iterations)──→ retrieve_internal | search_web
        reflect → generate → cite → finalize

Every node is ``(state, runtime) -> partial update``; see ``nodes/``.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Awaitable
from typing import Any, Literal, Protocol, TypeVar

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import Checkpointer

from graph.context import Context
from graph.state import InputState, OutputState, State
from nodes.deadline import late_search_web, within_deadline
from nodes.finalize import finalize
from nodes.generate import cite, generate
from nodes.grade import after_grade, grade
from nodes.prepare import prepare
from nodes.reflect import after_reflect, reflect
from nodes.rerank import rerank
from nodes.retrieve import retrieve_internal, search_web
from nodes.rewrite import rewrite
from nodes.route import route
from nodes.tracing import annotate_run, run_summary

# Steps a run may take. The loops are bounded by ``max_iterations`` in the nodes;
# this is a second, explicit backstop far below LangGraph's default (~10,000).
RECURSION_LIMIT = 60

S = TypeVar("S", bound=State)  # State, or the agent graph's AgentState
S_contra = TypeVar("S_contra", bound=State, contravariant=True)


class Node(Protocol[S_contra]):
    """A node: (its graph's state, the run's Context) -> a partial update."""

    def __call__(self, state: S_contra, runtime: Runtime[Context]) -> Awaitable[dict[str, Any]]: ...


def with_default_context(
    node: Node[S], late: Node[S] | None = None, *, starts_run: bool = False
) -> Node[S]:
    """Give the node a default ``Context`` when the caller passed none, and run it within
    the run's deadline (``run_timeout_s``; past it, ``late`` or the node's offline form:
    see ``nodes.deadline``). The node that ``starts_run`` sets the deadline: the one in
    its state is the previous turn's.

    When LangSmith tracing is on, the node's run also gets a summary of its update
    (route, strategy, confidence, counts…) as metadata; see ``nodes.tracing``.
    """

    name = getattr(node, "__name__", type(node).__name__)

    @functools.wraps(node)
    async def run(state: S, runtime: Runtime[Context]) -> dict[str, Any]:
        if runtime.context is None:
            runtime = dataclasses.replace(runtime, context=Context())
        if starts_run:
            update = await node(state, runtime)
        else:
            update = await within_deadline(node, state, runtime, late)
        annotate_run(**run_summary(update, name))
        return update

    return run


def select_sources(state: State) -> list[Literal["retrieve_internal", "search_web"]]:
    """Fan out by route; ``both`` runs the two branches in the same step, in parallel."""
    chosen = state.get("route", "both")
    if chosen == "knowledge":
        return ["retrieve_internal"]
    if chosen == "search":
        return ["search_web"]
    return ["retrieve_internal", "search_web"]


def build_graph(*, checkpointer: Checkpointer = None) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Compile the state graph (without a checkpointer for the LangGraph server)."""
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
    builder.add_conditional_edges("rewrite", select_sources, ["retrieve_internal", "search_web"])
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
    return builder.compile(checkpointer=checkpointer, name="hybrid_rag").with_config(
        recursion_limit=RECURSION_LIMIT
    )


# Exported for langgraph.json; the server supplies the checkpointer.
graph = build_graph()
