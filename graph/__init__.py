"""The graphs of the product, their state and their configuration."""

from graph.agent_graph import build_agent_graph
from graph.context import Context
from graph.rag_graph import build_graph

__all__ = ["Context", "build_agent_graph", "build_graph"]
