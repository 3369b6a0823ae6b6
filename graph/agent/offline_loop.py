"""The agent without a model: a documented rule picks the tools and answers.

``offline_route`` (cue words + KB probe) picks the tools, each is called once with the
question (plus the state graph's web fallback on weak KB evidence, ``tools.policy``, as a
second turn), and the answer is extractive exactly as in the state graph. It is labelled
as such, never presented as a model; its calls and results are recorded in ``messages``
as the model path records them.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, AnyMessage
from langchain_core.messages.tool import ToolCall, tool_call

from graph.agent.model_loop import decision_of, evidence_of
from graph.agent.model_prompt import answer_sources
from graph.agent.tool_calls import run_calls
from graph.agent.tool_outcomes import apply_outcomes
from graph.agent.tool_work import GOOGLE_SEARCH, INTERNAL_SEARCH, SourceRegistry
from nodes.generate import build_prompt, quoted_answer, web_note
from prompts.agent import (
    AGENT_OFFLINE_NOTE_EN,
    AGENT_OFFLINE_NOTE_ZH,
    BOUND_NOTE_EN,
    BOUND_NOTE_ZH,
)
from run.localize import localize
from run.models import OFFLINE
from run.run_view import RunView, node
from run.search_setup import kb_probe, locale_setting
from tools.answer.crosslingual import translated_queries
from tools.policy.decisions import (
    decide,
    kept_internal,
    record,
    route_without_plan,
    strategy_label,
    turn_evidence,
)
from tools.policy.offline import no_information, offline_route
from tools.websearch.snippets import search_locale

if TYPE_CHECKING:
    from run.state import AgentState


async def run_turn(
    state: Mapping[str, Any], calls: list[ToolCall], run: RunView
) -> tuple[list[AnyMessage], list[tuple[ToolCall, dict[str, Any]]], SourceRegistry]:
    """One offline tool-calling turn, recorded as the model path records it: the AI
    message asking for ``calls``, then one tool message per call (same ``tool_call_id``)."""
    messages: list[AnyMessage] = [AIMessage(content="", tool_calls=calls)] if calls else []
    replies, done, registry = await run_calls(state, calls, run, budget=len(calls))
    return [*messages, *replies], done, registry


def offline_call(name: str, args: dict[str, Any]) -> ToolCall:
    """A tool call of the offline rule, with a unique id as a model would give it."""
    return tool_call(name=name, args=args, id=f"call_offline_{uuid.uuid4().hex[:16]}")


def offline_plan(route: str, question: str, web_args: dict[str, Any]) -> list[ToolCall]:
    """The offline rule's tool calls for ``route``: the question to each source asked."""
    plan: list[ToolCall] = []
    if route in ("knowledge", "both"):
        plan.append(offline_call(INTERNAL_SEARCH, {"query": question}))
    if route in ("search", "both"):
        plan.append(offline_call(GOOGLE_SEARCH, web_args))
    return plan


async def crosslingual_report(run: RunView, question: str) -> dict[str, Any]:
    """The state graph's rewrite-step report (offline, nothing is translated)."""
    if not run.context.crosslingual:
        return {}
    _, report = await translated_queries(run.kb, question, None)
    return report


@node
async def offline_tools(state: AgentState, run: RunView) -> dict[str, Any]:
    """No model (none configured, or it failed): a fixed rule picks the tools (route by cues
    + KB probe, ``tools.policy.route_without_plan``) and calls them.

    The calls and their results go to ``messages`` exactly as on the model path (an AI
    turn with ``tool_calls``, then the tool messages), so a chat UI shows the same trace.
    """
    question: str = state["question"]
    run.emit("routing", mode=OFFLINE)
    with run.timed("offline_tools"):
        probe, unavailable = await kb_probe(run, question)
        for warning in unavailable:
            run.warn(warning)
        rule = offline_route(question, probe)
        degraded = str(state.get("degraded") or "")
        route = route_without_plan(rule.route, model_failed=bool(degraded))
        reason = f"{degraded} → {route}" if degraded else f"offline rules: {rule.reason}"
        run.emit("routed", route=route, reason=reason)
        hl, gl = search_locale(question, *locale_setting(run.context))
        web_args = {"query": question, "hl": hl, "gl": gl}
        plan = offline_plan(route, question, web_args)
        messages, done, registry = await run_turn(state, plan[: run.context.max_tool_calls], run)
        update = apply_outcomes(state, registry, done)
        # The state graph's corrective fallback (tools.policy): weak KB evidence → also
        # search the web once (a second turn, as a model that read the weak results would).
        verdict = decide(
            turn_evidence({**state, **update, "route": route}),
            run.context.confidence_threshold,
            refusal=run.context.refusal_threshold,
            searches_left=run.context.max_tool_calls - len(done),
        )
        kept = kept_internal(update["internal_docs"], verdict)  # trimmed before the search
        if verdict["search_web_now"]:
            more, fallback, registry = await run_turn(
                {**state, "sources": registry.sources},
                [offline_call(GOOGLE_SEARCH, web_args)],
                run,
            )
            messages.extend(more)
            done.extend(fallback)
            update = apply_outcomes(state, registry, done)
        update["internal_docs"] = kept
    if len(plan) > run.context.max_tool_calls:
        run.warn(f"max_tool_calls ({run.context.max_tool_calls}) left planned searches out")
    report = await crosslingual_report(run, question)
    return {
        **update,
        "messages": messages,
        "crosslingual": report,
        "route": route,
        "route_reason": reason,
        "strategy": strategy_label(route, verdict["web_fallback"]),
        "decision": verdict,
    }


def offline_note(state: Mapping[str, Any], language: str) -> str:
    """Why the rules answer: no model is configured, or the model failed mid-run."""
    degraded = state.get("degraded")
    if degraded:
        reason = localize(str(degraded), language)
        return (BOUND_NOTE_ZH if language == "zh" else BOUND_NOTE_EN).format(reason=reason)
    return AGENT_OFFLINE_NOTE_ZH if language == "zh" else AGENT_OFFLINE_NOTE_EN


@node
async def offline_answer(state: AgentState, run: RunView) -> dict[str, Any]:
    """The state graph's offline answer: extractive, refusing on weak evidence, labelled."""
    language = state.get("language", "en")
    run.emit("answering", mode=OFFLINE)
    with run.timed("offline_answer"):
        # Same budgeted selection as ``generate`` (labels are the registry's, unchanged).
        _, built = build_prompt(run, answer_sources(run))
        if built.omitted:
            run.warn(f"{built.omitted} sources left out to fit context_token_budget")
        verdict = decision_of(run)
        confidence = verdict["confidence"]
        if verdict["refuse"]:
            answer = no_information(language)
        else:
            answer, unmentioned = quoted_answer(state["question"], built.included, language)
            for warning in unmentioned:
                run.warn(warning)
        answer = f"{answer} {offline_note(state, language)}{web_note(state, language)}"
    return {
        "answer": answer,
        "sources": built.included,
        "decision": verdict,
        "evidence": record(evidence_of(state)),
        "confidence": confidence,
    }
