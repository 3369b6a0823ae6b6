"""``route``: knowledge | search | both, with a reason — and, with a model, the queries.

One structured call plans both (the route and the rewrites): ``rewrite`` then uses the
planned queries without a second call, so a knowledge-base question costs three model
calls in all (plan, one listwise grade, the answer; see ARCHITECTURE.md, "Model calls").
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from prompts.internal import PLAN_SYSTEM, PLAN_TRANSLATE
from run.models import OFFLINE
from run.node_helpers import render_history, structured_call
from run.run_view import RunView, node
from run.search_setup import kb_probe
from tools.answer.crosslingual import language_names, other_languages
from tools.policy.decisions import Route, route_without_plan
from tools.policy.offline import offline_route

if TYPE_CHECKING:
    from run.state import State


class Plan(BaseModel):
    """Which sources to consult, and the queries to ask them."""

    route: Route = Field(description="the sources to use")
    reason: str = Field(description="one sentence")
    kb_queries: list[str] = Field(default_factory=list, description="knowledge-base queries")
    web_queries: list[str] = Field(default_factory=list, description="2-3 web search queries")
    translations: list[str] = Field(
        default_factory=list, description="the question in each other KB language, when asked"
    )


@node
async def route(state: State, run: RunView) -> dict[str, Any]:
    question: str = state["question"]
    run.emit("routing")
    with run.timed("route"):
        probe, unavailable = await kb_probe(run, question)
        for warning in unavailable:
            run.warn(warning)
        spec = run.fast_model
        result: dict[str, Any]
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
            # The KB's other languages: the plan translates too, so no extra call is spent.
            languages, _ = (
                await other_languages(run.kb, question) if run.context.crosslingual else ([], {})
            )
            translate = (
                PLAN_TRANSLATE.format(languages=language_names(languages)) if languages else ""
            )
            system = PLAN_SYSTEM.format(
                today=datetime.now(UTC).date(),
                kb_probe=probe,
                num_rewrites=run.context.num_rewrites,
                translate=translate,
            )
            out, error = await structured_call(spec, Plan, system, user, run.model_env)
            if out is None:  # a failed planner: the shared rule (the agent's too)
                fallback = route_without_plan(offline_route(question, probe).route, True)
                run.warn(f"planner output unusable ({error}); routed to {fallback}")
                reason = f"planner failure ({error}) → {fallback}"
                result = {"route": fallback, "route_reason": reason}
            else:
                result = {
                    "route": out.route,
                    "route_reason": out.reason,
                    "planned": {
                        "kb": out.kb_queries,
                        "web": out.web_queries,
                        "languages": languages,
                        "translations": out.translations,
                    },
                }
    run.emit("routed", route=result["route"], reason=result["route_reason"])
    return result
