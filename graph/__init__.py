"""The graphs of the product: the state graph (``graph.rag_graph``), the tool-calling agent
(``graph.agent``) and their persistence (``graph.persistence``).

The run's types live one layer down, in ``run`` (``run.context.Context``, ``run.state``),
so the nodes import them without importing the builders: imports run one way,
``graph → nodes → run``, with nothing loaded lazily. ``Context`` is re-exported here for
the callers that build a graph and configure its run in one place.
"""

from __future__ import annotations

from graph.agent.agent_graph import build_agent_graph
from graph.rag_graph import build_graph
from run.context import Context

__all__ = ["Context", "build_agent_graph", "build_graph"]
