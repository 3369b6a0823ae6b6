"""``route``: knowledge | search | both, with a reason — and, with a model, the queries.

One structured call plans both (the route and the rewrites): ``rewrite`` then uses the
planned queries without a second call, so a knowledge-base question costs three model
calls in all (plan, one listwise grade, the answer; see ARCHITECTURE.md, "Model calls").
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, field_validator

from prompts.internal import (
    PLAN_ROUTES_OFF,
    PLAN_ROUTES_ON,
    PLAN_SYSTEM,
    PLAN_TRANSLATE,
    PLAN_WEB_OFF,
    PLAN_WEB_ON,
    PLAN_WEB_QUERIES_ON,
)
from run.models import OFFLINE
from run.node_helpers import render_history, structured_call
from run.run_view import RunView, node
from run.search_setup import kb_probe, web_available
from tools.answer.crosslingual import language_names, other_languages
from tools.policy.decisions import Route, route_without_plan
from tools.policy.offline import offline_rewrites, offline_route

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

    # A small model rambles inside the JSON (issue 56: plans cut off at max_tokens): what
    # it gives is kept within bounds instead of refused, so a long plan still routes.
    @field_validator("kb_queries", "web_queries", "translations", mode="after")
    @classmethod
    def _bounded_list(cls, value: list[str]) -> list[str]:
        return [q.strip()[:MAX_QUERY_CHARS] for q in value if q and q.strip()][:MAX_QUERIES]

    @field_validator("reason", mode="after")
    @classmethod
    def _short_reason(cls, value: str) -> str:
        return value.strip()[:MAX_REASON_CHARS]


MAX_QUERIES = 6
MAX_QUERY_CHARS = 200
MAX_REASON_CHARS = 300


def available_route(route: Route, web: bool) -> Route:
    """A route to a source that is off falls back to the knowledge base: with web search
    disabled or unconfigured, 'search' reads the KB (it would read nothing; the planner is
    also told the web is off). 'both' reads the KB already and keeps saying the web was
    unavailable, as the agent's rule does."""
    return "knowledge" if route == "search" and not web else route


def skip_plan(run: RunView, probe: float) -> bool:
    """A small local model (``Context.small_model``) spends no planning call when the
    probe says the knowledge base answers (>= ``confidence_threshold``): the offline rule
    routes and the offline rewrites are the queries (one call saved, ~20-60 s on a CPU)."""
    return run.context.small_model and probe >= run.context.confidence_threshold


def plan_system(probe: float, num_rewrites: int, languages: list[str], web: bool) -> str:
    """The planner's instructions: the sources that exist (``web``), the routes it may
    take, the queries to write and the KB's other ``languages`` to translate into."""
    translate = PLAN_TRANSLATE.format(languages=language_names(languages)) if languages else ""
    return PLAN_SYSTEM.format(
        today=datetime.now(UTC).date(),
        kb_probe=probe,
        num_rewrites=num_rewrites,
        translate=translate,
        web_source=PLAN_WEB_ON if web else PLAN_WEB_OFF,
        routes=PLAN_ROUTES_ON if web else PLAN_ROUTES_OFF,
        web_queries=PLAN_WEB_QUERIES_ON if web else "",
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
        web = web_available(run)
        result: dict[str, Any]
        if spec == OFFLINE:
            decision = offline_route(question, probe)
            result = {"route": decision.route, "route_reason": f"offline rules: {decision.reason}"}
        elif skip_plan(run, probe):
            decision = offline_route(question, probe)
            kb, _ = offline_rewrites(question, run.context.num_rewrites)
            result = {
                "route": available_route(decision.route, web),
                "route_reason": f"small model, confident probe ({probe:.2f}): {decision.reason}",
                "planned": {"kb": kb, "web": [], "languages": [], "translations": []},
            }
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
            system = plan_system(probe, run.context.num_rewrites, languages, web)
            out, error = await structured_call(spec, Plan, system, user, run.model_env)
            if out is None:  # a failed planner: the shared rule (the agent's too)
                fallback = route_without_plan(offline_route(question, probe).route, True)
                run.warn(f"planner output unusable ({error}); routed to {fallback}")
                reason = f"planner failure ({error}) → {fallback}"
                result = {"route": fallback, "route_reason": reason}
            else:
                chosen = available_route(out.route, web)
                off = "" if chosen == out.route else f" ({out.route} asked; web search is off)"
                result = {
                    "route": chosen,
                    "route_reason": f"{out.reason}{off}",
                    "planned": {
                        "kb": out.kb_queries,
                        "web": out.web_queries,
                        "languages": languages,
                        "translations": out.translations,
                    },
                }
    run.emit("routed", route=result["route"], reason=result["route_reason"])
    return result
