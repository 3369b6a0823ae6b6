"""The graphs of the product, their state and their configuration.

The builders load on first use (PEP 562), so importing a leaf of this package
(``run.context``, ``run.state``, ``run.reducers``), as the nodes do, never imports
the builders and through them the nodes: no import circle, also at run time.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from run.context import Context

if TYPE_CHECKING:
    from graph.agent.agent_graph import build_agent_graph
    from graph.rag_graph import build_graph

__all__ = ["Context", "build_agent_graph", "build_graph"]
_BUILDERS = {"build_graph": "graph.rag_graph", "build_agent_graph": "graph.agent.agent_graph"}


def __getattr__(name: str) -> Any:
    module = _BUILDERS.get(name)
    if module is None:
        raise AttributeError(f"module 'graph' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
