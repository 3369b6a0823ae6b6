"""``route``: knowledge | search | both, with a reason."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

from nodes.common import emit, render_history, structured_call, timed
from nodes.models import OFFLINE, fast_model
from nodes.resources import get_kb
from prompts.internal import ROUTE_SYSTEM
from tools.errors import HybridRagError
from tools.policy.offline import offline_route

if TYPE_CHECKING:  # types only: at run time nodes never import graph/
    from graph.context import Context
    from graph.state import State


class RouteDecisionModel(BaseModel):
    """Which sources to consult."""

    route: Literal["knowledge", "search", "both"] = Field(description="the sources to use")
    reason: str = Field(description="one sentence")


async def route(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = runtime.context
    question: str = state["question"]
    timings: dict[str, float] = {}
    warnings: list[str] = []
    emit(runtime, "routing")
    with timed("route", timings):
        try:
            probe = await asyncio.to_thread(lambda: get_kb(ctx).probe(question))
        except HybridRagError as exc:
            probe = 0.0
            warnings.append(f"knowledge base unavailable while routing: {exc}")
        spec = fast_model(state, ctx)
        if spec == OFFLINE:
            decision = offline_route(question, probe)
            result = {"route": decision.route, "route_reason": f"offline rules: {decision.reason}"}
        else:
            user = (
                question
                if not state.get("history")
                else (
                    f"Conversation so far:\n{render_history(state['history'])}\n\nQuestion: {question}"
                )
            )
            system = ROUTE_SYSTEM.format(today=datetime.now(UTC).date(), kb_probe=probe)
            out, error = await structured_call(spec, RouteDecisionModel, system, user)
            if out is None:
                warnings.append(f"router output unusable ({error}); routed to both sources")
                result = {"route": "both", "route_reason": f"router failure ({error}) → both"}
            else:
                result = {"route": out.route, "route_reason": out.reason}
    emit(runtime, "routed", route=result["route"], reason=result["route_reason"])
    return {**result, "warnings": warnings, "timings": timings}
