"""What the agent's model is shown and offered on each turn: the system prompt naming the
tools it has, the history and this turn's exchange, the sources an answer is shown, and,
for a small model (``Context.small_model``), the turn's first search made by the rule and
the answer step's prompt instead of a tool exchange. The loop that asks it is
``graph.agent.model_loop``."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.messages.tool import tool_call

from graph.agent.tool_outcomes import this_turn
from graph.agent.tool_work import GOOGLE_SEARCH, INTERNAL_SEARCH
from graph.agent.tools import AGENT_TOOLS
from nodes.generate import build_prompt, key_lines
from prompts.agent import (
    AGENT_SYSTEM_EN,
    AGENT_SYSTEM_KB_EN,
    AGENT_SYSTEM_KB_ZH,
    AGENT_SYSTEM_ZH,
    NO_TOOLS_LEFT_EN,
    NO_TOOLS_LEFT_ZH,
)
from run.run_view import RunView


def turn_messages(messages: list[AnyMessage]) -> list[AnyMessage]:
    """This turn's tool-calling exchange: what follows the last human message."""
    return this_turn(messages)


def answer_sources(run: RunView) -> list[dict[str, Any]]:
    """The best sources per kind, labels unchanged (registry order is label order): the KB
    passages kept (on a web fallback, those ``tools.policy.kept_internal`` kept when it was
    decided, as in the state graph) and the web results."""
    state, ctx = run.state, run.context
    internal = list(state.get("internal_docs") or [])[: ctx.top_k_internal]
    return [*internal, *list(state.get("web_docs") or [])[: ctx.top_k_web]]


def agent_messages(
    state: Mapping[str, Any], tools_left: int, *, web: bool = True
) -> list[BaseMessage]:
    """The model's messages: the system prompt naming the tools it has (``web``: whether
    google_search is offered), the history, the question and this turn's exchange."""
    language = state.get("language", "en")
    zh = language == "zh"
    budget_note = "" if tools_left > 0 else (NO_TOOLS_LEFT_ZH if zh else NO_TOOLS_LEFT_EN)
    if web:
        template = AGENT_SYSTEM_ZH if zh else AGENT_SYSTEM_EN
    else:
        template = AGENT_SYSTEM_KB_ZH if zh else AGENT_SYSTEM_KB_EN
    system = template.format(
        tools_left=max(0, tools_left), budget_note=budget_note, today=datetime.now(UTC).date()
    )
    found = [*(state.get("internal_docs") or [])]
    if found:  # after a search: the lines the offline answer would quote, as a pointer
        system += key_lines(state["question"], found[:5], language)
    messages: list[BaseMessage] = [SystemMessage(system)]
    for turn in state.get("history") or []:
        messages.append(
            HumanMessage(turn["content"]) if turn["role"] == "user" else AIMessage(turn["content"])
        )
    messages.append(HumanMessage(state["question"]))
    messages.extend(turn_messages(state.get("messages") or []))
    return messages


def first_search_by_rule(run: RunView, tools_left: int) -> bool:
    """A small local model (``Context.small_model``) does not choose the turn's first
    search: the knowledge base is searched for the question without a model call (a 1.5B
    model answered "No relevant information found" without searching in 6 of 6 runs), and
    the model's one call answers from the results."""
    state = run.state
    return (
        run.context.small_model
        and tools_left > 0
        and not state.get("tool_calls")
        and not this_turn(state.get("messages") or [])
    )


async def ask_model(
    run: RunView, model: Any, messages: list[BaseMessage], web: bool, calls: int
) -> Any:
    """One model turn: with the tools it may call, or (a small model after the rule's
    first search) the answer step's prompt, without tools."""
    if answers_from_first_search(run, calls):
        # Fenced sources, the best-matching lines, the question last: shown the same
        # results as a tool exchange, the 1.5B model replied "not found" in 3 of 3 runs.
        prompt, _ = build_prompt(run, answer_sources(run))
        return await model.ainvoke(prompt)
    # Tools stay bound even when the budget is spent: some providers reject a history
    # with tool calls but no tool definitions. The system prompt then says "answer now",
    # and a model that still asks for tools gets the graceful bounded answer.
    return await model.bind_tools(offered_tools(web)).ainvoke(messages)


def answers_from_first_search(run: RunView, calls: int) -> bool:
    """The model's first call after the rule's first search (``first_search_by_rule``)."""
    return run.context.small_model and calls == 0 and bool(run.state.get("tool_calls"))


def first_search(question: str) -> AIMessage:
    """The turn's first tool call, made by the rule (not counted as a model call)."""
    call = tool_call(
        name=INTERNAL_SEARCH, args={"query": question}, id=f"call_rule_{uuid4().hex[:16]}"
    )
    return AIMessage(content="", tool_calls=[call])


def offered_tools(web: bool) -> list[Any]:
    """The tools the model is given: google_search only when web search can run."""
    return [t for name, t in AGENT_TOOLS.items() if web or name != GOOGLE_SEARCH]
