"""What ``langgraph.json`` serves: both graphs, each behind a check of the run's context.

The LangGraph server drops context keys that its published ``context_schema`` does not
name before the graph sees them (langgraph-api logs them at debug level), so a misspelt
field (``confidnce_threshold``) would run silently on the default. The server calls a
graph factory with the run's context *before* that filter; these factories check it with
``run.api_context.api_context`` so the run fails with the field named. The check is that of
an untrusted caller: deployment fields (data home, Chroma host and port) are refused, and
keys that are no field at all (``user_id`` in ``configurable``, which the server mirrors
into the context) pass unless they look like a misspelt field. Introspection and state
reads get the same compiled graph unchecked.

The graphs served are compiled with ``local=False``: unlike the in-process graphs of
``graph/``, they carry no caller of their own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langgraph.graph.state import CompiledStateGraph
from langgraph_sdk.runtime import ServerRuntime

from graph.agent.agent_graph import build_agent_graph
from graph.rag_graph import build_graph
from run.api_context import api_context
from run.context import Context

Compiled = CompiledStateGraph[Any, Any, Any, Any]

# Compiled without the local operator: a served run reads as the caller the server put in
# its config, and without one reads nothing (run/reader.py).
rag_graph = build_graph(local=False)
agent_graph = build_agent_graph(local=False)


def check_run_context(runtime: ServerRuntime[Context]) -> None:
    """Raise ``ConfigError`` naming misspelt, invalid or deployment-only fields of a run's
    context."""
    execution = runtime.execution_runtime
    if execution is None or execution.context is None:
        return  # schemas, drawings, state reads: no run, nothing to check
    context: Any = execution.context
    if isinstance(context, Mapping):
        api_context(context)


def hybrid_rag(runtime: ServerRuntime[Context]) -> Compiled:
    """The state graph (``graph/rag_graph.py``)."""
    check_run_context(runtime)
    return rag_graph


def tool_agent(runtime: ServerRuntime[Context]) -> Compiled:
    """The tool-calling agent (``graph/agent/agent_graph.py``)."""
    check_run_context(runtime)
    return agent_graph
