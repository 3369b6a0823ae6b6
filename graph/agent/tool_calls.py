"""How the agent runs a step's tool calls: :func:`run_calls`, in call order, within the
budget, each with LangGraph's ``ToolRuntime`` injected as ``ToolNode`` injects it (the
tools: ``graph.agent.tools``; a repeated call and the folding of outcomes into the state:
``graph.agent.tool_outcomes``).

Why :func:`run_calls` runs a turn's calls, not LangGraph's ``ToolNode`` (measured by
``tests/test_agent_tool_node.py``): ``ToolNode`` runs them concurrently
(``asyncio.gather``), each with the state the step started from, and has no per-run
budget. On one turn of two ``internal_search`` calls and a ``google_search`` under
``max_tool_calls=2``, ``ToolNode`` numbered both searches from ``[internal-1]``: 5 labels
of the 10 passages the model read named two different passages, and the third call ran
past the bound. ``run_calls`` numbers in call order (``[internal-1..5]``, then
``[internal-6..10]``, 0 labels named twice), refuses the third call with a tool message,
and answers a call repeated in the turn from the first one's results. It injects the
``ToolRuntime`` as ``ToolNode`` does, so the tools would move to ``ToolNode`` unchanged.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.messages.tool import ToolCall
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config
from langgraph.errors import GraphBubbleUp
from langgraph.prebuilt import ToolRuntime

from graph.agent.tool_outcomes import call_key, calls_made, repeat_reply
from graph.agent.tool_work import SourceRegistry, registry_of
from graph.agent.tools import AGENT_TOOLS
from prompts.agent import BOUND_TOOL_MESSAGE
from run.approval_interrupt import APPROVAL_ERRORS
from run.run_view import RunLike, RunView

log = logging.getLogger("hybrid_rag.nodes")


async def run_calls(
    state: Mapping[str, Any], calls: list[ToolCall], run: RunView | RunLike, budget: int
) -> tuple[list[ToolMessage], list[tuple[ToolCall, dict[str, Any]]], SourceRegistry]:
    """Run ``calls`` in order, at most ``budget`` of them (the others get a tool message
    saying why not: every call needs an answer). Each call's ``ToolRuntime.state`` holds
    the sources the calls before it labelled, so labels are numbered in call order, and
    a web search the person skipped, so the step does not ask again. A call identical to
    one made before in this turn is not run again: its reply points at the first one's
    results (:func:`repeat_reply`). ``run``: the calling node's (or LangGraph's runtime)."""
    run = run if isinstance(run, RunView) else RunView(state, run)
    registry = registry_of(state)
    running = dict(state)
    replies: list[ToolMessage] = []
    done: list[tuple[ToolCall, dict[str, Any]]] = []
    made = calls_made(state.get("messages") or [])
    for call in calls:
        if call_key(call) in made:
            replies.append(repeat_reply(call, made[call_key(call)]))
            continue
        if len(done) >= budget:
            replies.append(
                ToolMessage(
                    BOUND_TOOL_MESSAGE.format(bound=run.context.max_tool_calls),
                    tool_call_id=call.get("id") or f"call_{call['name']}",
                    name=call["name"],
                    status="error",
                )
            )
            continue
        running["sources"] = registry.sources
        message, outcome = await execute_tool_call(call, running, run)
        registry = SourceRegistry(
            registry.language, [*registry.sources, *outcome.get("sources", [])]
        )
        if outcome.get("web_status") == "skipped":
            running["web_skipped"] = True  # the step does not ask again
        replies.append(message)
        done.append((call, outcome))
        if outcome.get("ok"):  # a failed call may be tried again
            labels = [str(src.get("label")) for src in outcome.get("sources") or []]
            made[call_key(call)] = ", ".join(labels)
    return replies, done, registry


async def execute_tool_call(
    call: ToolCall, state: Mapping[str, Any], run: RunView
) -> tuple[ToolMessage, dict[str, Any]]:
    """Run one tool call with ``state`` as its ``ToolRuntime.state``; returns its message
    and outcome. Never raises (but for an approval pause or a malformed resume)."""
    name = call["name"]
    call_id = call.get("id") or f"call_{name}"
    run.emit("tool", name=name, args=call.get("args"))
    tool = AGENT_TOOLS.get(name)
    if tool is None:
        text = f"Error: unknown tool {name!r}; the tools are {', '.join(sorted(AGENT_TOOLS))}."
        outcome: dict[str, Any] = {"ok": False, "status": "bad_arguments", "error": text}
        return ToolMessage(text, tool_call_id=call_id, name=name, status="error"), outcome
    runtime = run.runtime  # LangGraph's, whose parts the tool's runtime carries
    tool_runtime = ToolRuntime(
        state=state,
        context=run.context,
        config=_config(),
        stream_writer=runtime.stream_writer,
        tool_call_id=call_id,
        store=getattr(runtime, "store", None),
        tools=list(AGENT_TOOLS.values()),
    )
    # As ToolNode does: the runtime goes in as the injected argument (a model's own
    # "runtime" argument is overwritten, never trusted).
    args = {**(call.get("args") or {}), "runtime": tool_runtime}
    try:
        message = await tool.ainvoke({**call, "args": args, "id": call_id, "type": "tool_call"})
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
    run.emit("tool_done", name=name, ok=artifact.get("ok"),
             found=len(artifact.get("sources") or []))  # fmt: skip
    return message, artifact


def _config() -> RunnableConfig:
    try:
        return get_config()
    except RuntimeError:  # called outside a run (unit tests)
        return {}
