"""The tool-calling agent's nodes: a model with ``internal_search`` / ``google_search``.

    agent_prepare ─(model)──→ call_model ⇄ run_tools ──→ cite → finalize
                  └(offline)→ offline_tools → offline_answer ──→ cite → finalize

* ``call_model`` asks the model (tools bound) what to do next. It counts model calls
  and stops at ``max_model_calls``; once ``max_tool_calls`` is used up the system
  prompt tells it to answer now; a model that still wants tools, errors, or hits the
  model bound gets a graceful extractive answer from the sources gathered so far.
* ``run_tools`` runs the requested calls in order (sequentially, so labels are
  numbered deterministically), refuses calls beyond ``max_tool_calls`` with a tool
  message, and accumulates sources, costs, warnings and ``tool_calls`` records.
* Without a model (``offline``), a documented rule stands in: ``offline_route`` (cue
  words + KB probe) picks the tools, each is called once with the question (plus the
  state graph's web fallback on weak KB evidence, as a second turn), and the answer is
  extractive exactly as in the state graph. It is labelled as such, never presented as a
  model; its calls and results are recorded in ``messages`` as the model path records them.

With ``approve_web_search``, ``google_search`` asks a person before it searches (the
shared rule of ``nodes.approval``); the pause (``interrupt``) and a malformed answer pass
through ``execute_tool_call`` instead of becoming tool errors.

Every answer leaves through ``nodes.generate.cite``, the state graph's citation check.
Sources are labelled by one ``tools.answer.agent_tools.SourceRegistry`` per run, rebuilt from
``state["sources"]`` at each step, so a label never changes once the model has seen it.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.tool import ToolCall, tool_call
from langchain_core.tools import BaseTool
from langgraph.errors import GraphBubbleUp
from langgraph.runtime import Runtime

from nodes.approval import APPROVAL_ERRORS, tool_approval
from nodes.common import emit, timed
from nodes.crosslingual import translated_queries
from nodes.generate import build_prompt, failure_sentence, web_unavailable
from nodes.models import OFFLINE, load_chat_model
from nodes.prepare import prepare
from nodes.rerank import effective_reranker
from nodes.resources import get_kb, web_settings
from prompts.agent import (
    AGENT_OFFLINE_NOTE_EN,
    AGENT_OFFLINE_NOTE_ZH,
    AGENT_SYSTEM_EN,
    AGENT_SYSTEM_ZH,
    BOUND_NOTE_EN,
    BOUND_NOTE_ZH,
    BOUND_TOOL_MESSAGE,
    NO_TOOLS_LEFT_EN,
    NO_TOOLS_LEFT_ZH,
)
from tools.answer.agent_tools import GOOGLE_SEARCH, INTERNAL_SEARCH, SourceRegistry, make_tools
from tools.errors import HybridRagError, kb_unavailable
from tools.kb.rerank import make_reranker
from tools.policy.decisions import Decision, Evidence, decide, kept_internal, strategy_label
from tools.policy.offline import extractive_answer, no_information, offline_route
from tools.websearch import default_locale

if TYPE_CHECKING:  # types only: at run time nodes never import graph/
    from graph.agent_graph import AgentState
    from graph.context import Context

log = logging.getLogger("hybrid_rag.nodes")

# --- helpers ---------------------------------------------------------------------------


def turn_messages(messages: list[AnyMessage]) -> list[AnyMessage]:
    """This turn's tool-calling exchange: what follows the last human message."""
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], HumanMessage):
            return list(messages[i + 1 :])
    return []


def registry_of(state: Mapping[str, Any]) -> SourceRegistry:
    """The run's source registry, continued from the sources already labelled."""
    return SourceRegistry(state.get("language", "en"), state.get("sources") or [])


def tools_for(
    registry: SourceRegistry, ctx: Context, state: Mapping[str, Any]
) -> dict[str, BaseTool]:
    tools = make_tools(
        registry,
        kb_getter=lambda: get_kb(ctx),
        web_settings_getter=lambda: web_settings(ctx),
        top_k_internal=ctx.top_k_internal,
        top_k_web=ctx.top_k_web,
        snippet_chars=ctx.snippet_chars,
        # The agent reranks inside internal_search; 'llm' ordering is the state graph's only.
        reranker=None
        if effective_reranker(ctx) in ("none", "llm")
        else make_reranker(effective_reranker(ctx)),
        approve=tool_approval(ctx, state),  # approve_web_search: ask before paying
    )
    return {t.name: t for t in tools}


def _add_ms(state: Mapping[str, Any], key: str, started: float) -> dict[str, float]:
    """Accumulate a node's time over the loop (a plain ``timed`` would keep only the last)."""
    previous = float((state.get("timings") or {}).get(key) or 0.0)
    return {key: round(previous + (time.perf_counter() - started) * 1000, 2)}


async def execute_tool_call(
    tools: dict[str, BaseTool], call: ToolCall, runtime: Runtime[Context]
) -> tuple[ToolMessage, dict[str, Any]]:
    """Run one tool call; returns its message and outcome. Never raises."""
    name = call["name"]
    call_id = call.get("id") or f"call_{name}"
    emit(runtime, "tool", name=name, args=call.get("args"))
    tool = tools.get(name)
    if tool is None:
        text = f"Error: unknown tool {name!r}; the tools are {', '.join(sorted(tools))}."
        outcome: dict[str, Any] = {"ok": False, "status": "bad_arguments", "error": text}
        return ToolMessage(text, tool_call_id=call_id, name=name, status="error"), outcome
    try:
        message = await tool.ainvoke({**call, "id": call_id, "type": "tool_call"})
    except GraphBubbleUp:
        raise  # a pause for web search approval (interrupt), not a failure
    except Exception as exc:  # a tool bug must not end the run; the model can go on
        if isinstance(exc, APPROVAL_ERRORS):
            raise  # a bad approval answer: the run fails and the question stays open
        log.warning("tool %s failed unexpectedly", name, exc_info=True)
        text = f"Error: {name} failed unexpectedly ({type(exc).__name__})."
        message = ToolMessage(text, tool_call_id=call_id, name=name, status="error")
    if not isinstance(message, ToolMessage):
        message = ToolMessage(str(message), tool_call_id=call_id, name=name)
    artifact = message.artifact if isinstance(message.artifact, dict) else None
    if artifact is None:  # argument validation failed before the tool ran
        artifact = {"ok": False, "status": "bad_arguments", "error": str(message.content)}
    emit(
        runtime,
        "tool_done",
        name=name,
        ok=artifact.get("ok"),
        found=len(artifact.get("sources") or []),
    )
    return message, artifact


def apply_outcomes(
    state: Mapping[str, Any],
    registry: SourceRegistry,
    done: list[tuple[ToolCall, dict[str, Any]]],
) -> dict[str, Any]:
    """Fold tool outcomes into the state: sources, costs, web status, records, warnings."""
    records = list(state.get("tool_calls") or [])
    warnings: list[str] = []
    cost = float(state.get("search_cost") or 0.0)
    calls = int(state.get("search_calls") or 0)
    update: dict[str, Any] = {}
    for call, outcome in done:
        name = call["name"]
        records.append(
            {
                "name": name,
                "args": dict(call.get("args") or {}),
                "ok": bool(outcome.get("ok")),
                "results": len(outcome.get("sources") or []),
            }
        )
        cost += float(outcome.get("search_cost") or 0.0)
        calls += int(outcome.get("search_calls") or 0)
        warnings.extend(f"{name}: {w}" for w in outcome.get("warnings") or [])
        if not outcome.get("ok"):
            warnings.append(f"{name}: {outcome.get('error')}")
        if name == GOOGLE_SEARCH and outcome.get("status") != "bad_arguments":
            update["web_searched"] = True
            if outcome.get("ok"):
                update["web_fetched_at"] = outcome.get("web_fetched_at") or ""
                update["web_error"] = ""  # a later success supersedes an earlier failure
            elif outcome.get("status") == "unavailable":
                update["web_error"] = str(outcome.get("error") or "web search failed")
    return {
        **update,
        "sources": registry.sources,
        "internal_docs": registry.of_kind("internal"),
        "web_docs": registry.of_kind("web"),
        "search_cost": round(cost, 6),
        "search_calls": calls,
        "tool_calls": records,
        "warnings": warnings,
    }


def route_of(tool_calls: list[dict[str, Any]]) -> dict[str, Any]:
    """The state graph's ``route`` reconstructed from which tools the agent actually used."""
    used = {c["name"] for c in tool_calls}
    if used >= {INTERNAL_SEARCH, GOOGLE_SEARCH}:
        return {"route": "both"}
    if INTERNAL_SEARCH in used:
        return {"route": "knowledge"}
    if GOOGLE_SEARCH in used:
        return {"route": "search"}
    return {}


def web_failure_note(state: Mapping[str, Any], language: str) -> str:
    """The state graph's 'live web results were unavailable' sentence, when it applies."""
    reason = web_unavailable(state)
    return f"\n\n{failure_sentence(language, reason)}" if reason else ""


def answer_sources(state: Mapping[str, Any], ctx: Context) -> list[dict[str, Any]]:
    """The best sources per kind, labels unchanged (registry order is label order); on a
    web fallback the KB passages ``tools.policy.kept_internal`` keeps, as in the state graph."""
    internal = [s for s in state.get("sources") or [] if s.get("kind") != "web"]
    web = [s for s in state.get("sources") or [] if s.get("kind") == "web"]
    fallback = bool((state.get("decision") or {}).get("web_fallback"))
    internal = kept_internal(internal[: ctx.top_k_internal], fallback)
    return [*internal, *web[: ctx.top_k_web]]


def bounded_answer(state: Mapping[str, Any], ctx: Context, reason: str) -> dict[str, Any]:
    """Stop gracefully: quote the gathered sources and say why the run ended."""
    language = state.get("language", "en")
    sources = answer_sources(state, ctx)
    text = extractive_answer(state["question"], sources, language)
    note = (BOUND_NOTE_ZH if language == "zh" else BOUND_NOTE_EN).format(reason=reason)
    return {
        "answer": f"{text} {note}{web_failure_note(state, language)}",
        "warnings": [f"agent stopped: {reason}; answered extractively from the sources gathered"],
        **route_of(state.get("tool_calls") or []),
        **_confidence(state, ctx),
    }


def agent_messages(state: Mapping[str, Any], tools_left: int) -> list[BaseMessage]:
    language = state.get("language", "en")
    zh = language == "zh"
    budget_note = "" if tools_left > 0 else (NO_TOOLS_LEFT_ZH if zh else NO_TOOLS_LEFT_EN)
    system = (AGENT_SYSTEM_ZH if zh else AGENT_SYSTEM_EN).format(
        tools_left=max(0, tools_left), budget_note=budget_note, today=datetime.now(UTC).date()
    )
    messages: list[BaseMessage] = [SystemMessage(system)]
    for turn in state.get("history") or []:
        messages.append(
            HumanMessage(turn["content"]) if turn["role"] == "user" else AIMessage(turn["content"])
        )
    messages.append(HumanMessage(state["question"]))
    messages.extend(turn_messages(state.get("messages") or []))
    return messages


# --- nodes -----------------------------------------------------------------------------


async def agent_prepare(state: AgentState, runtime: Runtime[Context]) -> dict[str, Any]:
    """The state graph's ``prepare`` (validation, fresh turn), plus the agent's counters."""
    update = await prepare(state, runtime)
    offline = update["mode"] == OFFLINE
    return {**update, "model_calls": 0, "strategy": "" if offline else "agent"}


async def call_model(state: AgentState, runtime: Runtime[Context]) -> dict[str, Any]:
    """One model turn: tool calls to run next, or the answer (bounded, never raises)."""
    ctx = runtime.context
    started = time.perf_counter()
    calls = int(state.get("model_calls") or 0)
    if calls >= ctx.max_model_calls:
        return bounded_answer(
            state, ctx, f"the max_model_calls bound ({ctx.max_model_calls}) was reached"
        )
    tools_left = ctx.max_tool_calls - len(state.get("tool_calls") or [])
    messages = agent_messages(state, tools_left)
    emit(runtime, "thinking", call=calls + 1, tools_left=max(0, tools_left))
    update: dict[str, Any] = {"model_calls": calls + 1}
    try:
        model = load_chat_model(state["mode"])
        # Tools stay bound even when the budget is spent: some providers reject a history
        # with tool calls but no tool definitions. The system prompt then says "answer now",
        # and a model that still asks for tools gets the graceful bounded answer below.
        tools = list(tools_for(registry_of(state), ctx, state).values())
        reply = await model.bind_tools(tools).ainvoke(messages)
    except HybridRagError as exc:
        bounded = bounded_answer(state, ctx, "the model call failed")
        bounded["warnings"].append(f"model call failed: {exc}")
        return {**update, **bounded, "timings": _add_ms(state, "call_model", started)}
    except Exception as exc:  # provider/network failure: answer from what we have
        log.warning("agent model call failed", exc_info=True)
        bounded = bounded_answer(state, ctx, "the model call failed")
        bounded["warnings"].append(f"model call failed: {type(exc).__name__}")
        return {**update, **bounded, "timings": _add_ms(state, "call_model", started)}
    update["timings"] = _add_ms(state, "call_model", started)
    if isinstance(reply, AIMessage) and reply.tool_calls:
        if tools_left <= 0:
            return {
                **update,
                **bounded_answer(
                    state, ctx, f"the max_tool_calls bound ({ctx.max_tool_calls}) was reached"
                ),
            }
        return {**update, "messages": [reply]}
    answer = reply.text.strip() if isinstance(reply, AIMessage) else str(reply).strip()
    if not answer:
        bounded = bounded_answer(state, ctx, "the model replied with nothing")
        return {**update, **bounded}
    language = state.get("language", "en")
    emit(runtime, "answering", mode=state["mode"])
    # The reply is not appended to ``messages`` here: ``cite`` appends the checked answer,
    # under the streamed reply's id when it is the draft unchanged (see generate.cite).
    return {
        **update,
        "answer": f"{answer}{web_failure_note(state, language)}",
        "answer_message_id": reply.id,
        "answer_draft": answer,
        **route_of(state.get("tool_calls") or []),
        **_confidence(state, ctx),
    }


async def run_tools(state: AgentState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Run the last model turn's tool calls in order, within ``max_tool_calls``."""
    ctx = runtime.context
    started = time.perf_counter()
    messages = state.get("messages") or []
    last = messages[-1] if messages else None
    requested = list(last.tool_calls) if isinstance(last, AIMessage) else []
    registry = registry_of(state)
    tools = tools_for(registry, ctx, state)
    used = len(state.get("tool_calls") or [])
    replies: list[ToolMessage] = []
    done: list[tuple[ToolCall, dict[str, Any]]] = []
    refused = 0
    for call in requested:
        if used + len(done) >= ctx.max_tool_calls:
            # Every tool call needs an answer (OpenAI rejects a dangling one): say why not.
            refused += 1
            replies.append(
                ToolMessage(
                    BOUND_TOOL_MESSAGE.format(bound=ctx.max_tool_calls),
                    tool_call_id=call.get("id") or f"call_{call['name']}",
                    name=call["name"],
                    status="error",
                )
            )
            continue
        message, outcome = await execute_tool_call(tools, call, runtime)
        replies.append(message)
        done.append((call, outcome))
    update = apply_outcomes(state, registry, done)
    if refused:
        update["warnings"].append(
            f"{refused} tool call(s) not run: max_tool_calls ({ctx.max_tool_calls}) reached"
        )
    return {**update, "messages": replies, "timings": _add_ms(state, "run_tools", started)}


async def run_turn(
    tools: dict[str, BaseTool], calls: list[ToolCall], runtime: Runtime[Context]
) -> tuple[list[AnyMessage], list[tuple[ToolCall, dict[str, Any]]]]:
    """One offline tool-calling turn, recorded as the model path records it: the AI
    message asking for ``calls``, then one tool message per call (same ``tool_call_id``)."""
    messages: list[AnyMessage] = [AIMessage(content="", tool_calls=calls)] if calls else []
    done: list[tuple[ToolCall, dict[str, Any]]] = []
    for call in calls:
        message, outcome = await execute_tool_call(tools, call, runtime)
        messages.append(message)
        done.append((call, outcome))
    return messages, done


def offline_call(name: str, args: dict[str, Any]) -> ToolCall:
    """A tool call of the offline rule, with a unique id as a model would give it."""
    return tool_call(name=name, args=args, id=f"call_offline_{uuid.uuid4().hex[:16]}")


async def offline_tools(state: AgentState, runtime: Runtime[Context]) -> dict[str, Any]:
    """No model: a fixed rule picks the tools (route by cues + KB probe) and calls them.

    The calls and their results go to ``messages`` exactly as on the model path (an AI
    turn with ``tool_calls``, then the tool messages), so a chat UI shows the same trace.
    """
    ctx = runtime.context
    question: str = state["question"]
    timings: dict[str, float] = {}
    warnings: list[str] = []
    emit(runtime, "routing", mode=OFFLINE)
    with timed("offline_tools", timings):
        try:
            probe = await asyncio.to_thread(lambda: get_kb(ctx).probe(question))
        except HybridRagError as exc:
            probe = 0.0
            warnings.append(kb_unavailable(exc))
        decision = offline_route(question, probe)
        emit(runtime, "routed", route=decision.route, reason=decision.reason)
        hl, gl = default_locale(question)
        hl = hl if ctx.hl == "auto" else ctx.hl
        gl = gl if ctx.gl == "auto" else ctx.gl
        web_args = {"query": question, "hl": hl, "gl": gl}
        plan: list[ToolCall] = []
        if decision.route in ("knowledge", "both"):
            plan.append(offline_call(INTERNAL_SEARCH, {"query": question}))
        if decision.route in ("search", "both"):
            plan.append(offline_call(GOOGLE_SEARCH, web_args))
        registry = registry_of(state)
        tools = tools_for(registry, ctx, state)
        messages, done = await run_turn(tools, plan[: ctx.max_tool_calls], runtime)
        # The state graph's corrective fallback (tools.policy): weak KB evidence → also
        # search the web once (a second turn, as a model that read the weak results would).
        verdict = decide(
            Evidence.of(
                question,
                registry.of_kind("internal"),
                registry.of_kind("web"),
                route=decision.route,
                web_searched=any(call["name"] == GOOGLE_SEARCH for call, _ in done),
            ),
            ctx.confidence_threshold,
        )
        fell_back = verdict["search_web_now"] and len(done) < ctx.max_tool_calls
        if fell_back:
            more, fallback = await run_turn(tools, [offline_call(GOOGLE_SEARCH, web_args)], runtime)
            messages.extend(more)
            done.extend(fallback)
        update = apply_outcomes(state, registry, done)
    if len(plan) > ctx.max_tool_calls:
        warnings.append(f"max_tool_calls ({ctx.max_tool_calls}) left planned searches out")
    report: dict[str, Any] = {}
    if ctx.crosslingual:
        # Same report as the state graph's rewrite step: offline, nothing is translated.
        _, report = await translated_queries(ctx, question, OFFLINE)
        if report.get("note"):
            warnings.append(f"cross-lingual: {report['note']}")
    return {
        **update,
        "messages": messages,
        "crosslingual": report,
        "route": decision.route,
        "route_reason": f"offline rules: {decision.reason}",
        "strategy": strategy_label(decision.route, fell_back),
        "decision": {**verdict, "web_fallback": fell_back, "search_web_now": False},
        "warnings": [*warnings, *update["warnings"]],
        "timings": timings,
    }


async def offline_answer(state: AgentState, runtime: Runtime[Context]) -> dict[str, Any]:
    """The state graph's offline answer: extractive, refusing on weak evidence, labelled."""
    ctx = runtime.context
    language = state.get("language", "en")
    timings: dict[str, float] = {}
    warnings: list[str] = []
    emit(runtime, "answering", mode=OFFLINE)
    with timed("offline_answer", timings):
        # Same budgeted selection as ``generate`` (labels are the registry's, unchanged).
        _, built = build_prompt(state, ctx, answer_sources(state, ctx))
        if built.omitted:
            warnings.append(f"{built.omitted} sources left out to fit context_token_budget")
        verdict = decision_of(state, ctx)
        confidence = verdict["confidence"]
        if verdict["refuse"]:
            answer = no_information(language)
        else:
            answer = extractive_answer(state["question"], built.included, language)
        note = AGENT_OFFLINE_NOTE_ZH if language == "zh" else AGENT_OFFLINE_NOTE_EN
        answer = f"{answer} {note}{web_failure_note(state, language)}"
    return {
        "answer": answer,
        "sources": built.included,
        "decision": verdict,
        "confidence": confidence,
        "warnings": warnings,
        "timings": timings,
    }


def decision_of(state: Mapping[str, Any], ctx: Context) -> Decision:
    """``tools.policy.decide`` over the agent's evidence: the sources its tools found, for
    the route its tool calls took (the state graph's ``grade`` asks the same function)."""
    route = route_of(state.get("tool_calls") or []).get("route") or state.get("route")
    previous = state.get("decision") or {}
    evidence = Evidence.of(
        state["question"],
        list(state.get("internal_docs") or []),
        list(state.get("web_docs") or []),
        route=route,
        web_searched=bool(state.get("web_searched")),
        fell_back=bool(previous.get("web_fallback")),
    )
    # The agent falls back only where offline_tools says so (a model picks its own tools).
    return {**decide(evidence, ctx.confidence_threshold), "web_fallback": evidence.fell_back,
            "search_web_now": False}  # fmt: skip


def _confidence(state: Mapping[str, Any], ctx: Context) -> dict[str, Any]:
    verdict = decision_of(state, ctx)
    return {"confidence": verdict["confidence"], "decision": verdict}


# --- routing ---------------------------------------------------------------------------


def after_prepare(state: Mapping[str, Any]) -> Literal["call_model", "offline_tools"]:
    """Offline (no model configured) takes the deterministic branch."""
    return "offline_tools" if state.get("mode") == OFFLINE else "call_model"


def after_model(state: Mapping[str, Any]) -> Literal["run_tools", "cite"]:
    """Run tools while the model's last message asks for them; otherwise check citations."""
    last = (state.get("messages") or [None])[-1]
    if not state.get("answer") and isinstance(last, AIMessage) and last.tool_calls:
        return "run_tools"
    return "cite"
