"""The run deadline (``Context.run_timeout_s``): one bound on a whole run.

``prepare`` sets ``state["deadline"]``; every node then runs within what is left of it
(:func:`within_deadline`, applied by both graph builders). A node still busy at the
deadline is cancelled and, like every later node, runs again "late": with the offline
rules instead of the models (``mode``/``fast_mode`` offline), and with a late variant where
the offline rule would still wait on the network (web search, the agent's tools). The
run so ends with an answer from what it gathered, saying why, and never hangs on a
model that accepts a request and never answers.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, ToolMessage
from langgraph.config import get_config
from langgraph.runtime import Runtime

from nodes.agent import bounded_answer
from nodes.models import OFFLINE
from prompts.notices import (
    DEADLINE_EN,
    DEADLINE_SENTENCE_EN,
    DEADLINE_SENTENCE_ZH,
    DEADLINE_TOOL_MESSAGE,
)
from tools.kb.store_deadline import store_deadline

if TYPE_CHECKING:  # types only: at run time nodes never import graph/
    from graph.context import Context

# Seconds a late node (offline rules, no network) may take before it is skipped.
LATE_BUDGET_S = 10.0
# LangGraph's key for the task's scratchpad, whose ``resume`` holds the values a resumed
# task receives (langgraph._internal._constants.CONFIG_KEY_SCRATCHPAD).
_SCRATCHPAD = "__pregel_scratchpad"

NodeFn = Callable[[Any, Runtime[Any]], Awaitable[dict[str, Any]]]


def start(ctx: Context) -> float:
    """The deadline of a run starting now (epoch seconds: checkpoints keep it; ``prepare``
    computes the same)."""
    return time.time() + ctx.run_timeout_s


def deadline_reason(ctx: Context) -> str:
    return DEADLINE_EN.format(seconds=ctx.run_timeout_s)


def deadline_sentence(ctx: Context, language: str) -> str:
    template = DEADLINE_SENTENCE_ZH if language == "zh" else DEADLINE_SENTENCE_EN
    return template.format(seconds=ctx.run_timeout_s)


def _resuming() -> bool:
    """Whether this task is being resumed after an interrupt (a person answered an
    approval question, maybe hours later): the resumed run gets its own deadline."""
    try:
        scratchpad = get_config().get("configurable", {}).get(_SCRATCHPAD)
    except RuntimeError:  # called outside a run
        return False
    return bool(getattr(scratchpad, "resume", None))


async def within_deadline(
    node: NodeFn, state: Mapping[str, Any], runtime: Runtime[Context], late: NodeFn | None = None
) -> dict[str, Any]:
    """Run ``node`` within the run's deadline; past it, its late form (see module doc)."""
    ctx = runtime.context
    deadline = state.get("deadline")
    refreshed: dict[str, Any] = {}
    if deadline is not None and _resuming():
        deadline = start(ctx)
        refreshed = {"deadline": deadline}
    if deadline is None:  # prepare (which sets it), or a node called on its own
        return await node(state, runtime)
    # Cancelling the node cannot stop a knowledge-base call in its worker thread (and
    # the process waits for that thread at exit): the Chroma requests end by it too.
    with store_deadline(float(deadline)):
        left = float(deadline) - time.time()
        if left > 0:
            budget = asyncio.timeout(left)
            try:
                async with budget:
                    update = await node(state, runtime)
                return {**update, **refreshed}
            except TimeoutError:
                if not budget.expired():
                    raise  # the node's own timeout, not the deadline
        return {**await run_late(node, state, runtime, late), **refreshed}


async def run_late(
    node: NodeFn, state: Mapping[str, Any], runtime: Runtime[Context], late: NodeFn | None
) -> dict[str, Any]:
    ctx = runtime.context
    offline = {**state, "mode": OFFLINE, "fast_mode": OFFLINE}
    warning = deadline_reason(ctx)
    try:
        async with asyncio.timeout(LATE_BUDGET_S):
            update = dict(await (late or node)(offline, runtime))
    except TimeoutError:
        update = {}
    update["warnings"] = [*(update.get("warnings") or []), warning]
    sentence = deadline_sentence(ctx, str(state.get("language") or "en"))
    if update.get("answer") and sentence not in update["answer"]:  # cite keeps the draft's
        update["answer"] = f"{update['answer']}\n\n{sentence}"
    return update


async def late_search_web(state: Mapping[str, Any], runtime: Runtime[Context]) -> dict[str, Any]:
    """``search_web`` past the deadline: no search, the reason recorded as the web's."""
    return {"web_searched": True, "web_error": deadline_reason(runtime.context)}


async def late_run_tools(state: Mapping[str, Any], runtime: Runtime[Context]) -> dict[str, Any]:
    """The agent's ``run_tools`` past the deadline: every tool call is answered "not run"
    (a model provider rejects a tool call left without its reply)."""
    messages = state.get("messages") or []
    last = messages[-1] if messages else None
    calls = list(last.tool_calls) if isinstance(last, AIMessage) else []
    return {
        "messages": [
            ToolMessage(
                DEADLINE_TOOL_MESSAGE,
                tool_call_id=c.get("id") or f"call_{c['name']}",
                name=c["name"],
                status="error",
            )
            for c in calls
        ]
    }


async def late_call_model(state: Mapping[str, Any], runtime: Runtime[Context]) -> dict[str, Any]:
    """The agent's ``call_model`` past the deadline: the bounded extractive answer."""
    return bounded_answer(state, runtime.context, deadline_reason(runtime.context))
