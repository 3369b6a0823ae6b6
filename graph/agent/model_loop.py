"""The tool-calling agent's model loop: a model with ``internal_search`` / ``google_search``.

    agent_prepare ─(model)──→ call_model ⇄ run_tools ──→ cite → finalize
                  └(offline)→ offline_tools → offline_answer ──→ cite → finalize

* ``call_model`` asks the model (tools bound) what to do next. It counts model calls
  and stops at ``max_model_calls``; once ``max_tool_calls`` is used up the system
  prompt tells it to answer now; a model that still wants tools, errors, or hits the
  model bound gets a graceful extractive answer from the sources gathered so far.
* ``run_tools`` runs the requested calls in order (``graph.agent.tool_calls.run_calls``:
  sequentially, so labels are numbered deterministically), refuses calls beyond
  ``max_tool_calls`` with a tool message, and accumulates sources, costs, warnings and
  ``tool_calls`` records.
* Without a model (``offline``) a documented rule stands in: ``graph.agent.offline_loop``.
* What the model is shown and offered each turn is ``graph.agent.model_prompt``.

Confidence, the web fallback and the refusal are ``tools.policy.decide`` over the
agent's evidence (:func:`decision_of`), the function the state graph's ``grade`` calls.
Every answer leaves through ``nodes.generate.cite``, the state graph's citation check.
Sources are labelled by one ``graph.agent.tool_work.SourceRegistry`` per step, rebuilt
from ``state["sources"]``, so a label never changes once the model has seen it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.messages import (
    AIMessage,
    ToolMessage,
)

from graph.agent.model_prompt import (
    agent_messages,
    answer_sources,
    ask_model,
    first_search,
    first_search_by_rule,
)
from graph.agent.tool_calls import run_calls
from graph.agent.tool_outcomes import apply_outcomes, repeats_ignored, route_of
from nodes.generate import quoted_answer, web_note
from nodes.prepare import prepare
from prompts.agent import (
    BOUND_NOTE_EN,
    BOUND_NOTE_ZH,
)
from prompts.notices import DEADLINE_TOOL_MESSAGE
from run.deadline import CUT_OFF
from run.localize import localize
from run.models import OFFLINE, load_chat_model
from run.run_view import RunView, node
from run.search_setup import web_available
from tools.errors import HybridRagError
from tools.policy.decisions import Decision, Evidence, decide, record, turn_evidence

if TYPE_CHECKING:
    from run.state import AgentState

log = logging.getLogger("hybrid_rag.nodes")

# Why the offline rules took over a model's run (``degraded``; the answer's note says it).
MODEL_FAILED = "the model call failed"
# Why the agent stopped when the model, told once that a repeated call is not run, asks
# for it again (graph.agent.tool_outcomes.repeats_ignored).
REPEATED = "the model asked again for a search it had already made"

# --- helpers ---------------------------------------------------------------------------


def _add_ms(state: Mapping[str, Any], key: str, started: float) -> dict[str, float]:
    """Accumulate a node's time over the loop (a plain ``timed`` would keep only the last)."""
    previous = float((state.get("timings") or {}).get(key) or 0.0)
    return {key: round(previous + (time.perf_counter() - started) * 1000, 2)}


def bounded_answer(run: RunView, reason: str | None) -> dict[str, Any]:
    """Stop gracefully: quote the gathered sources and say why the run ended (``reason``
    None: the deadline, which the answer's deadline sentence states)."""
    state = run.state
    language = state.get("language", "en")
    sources = answer_sources(run)
    text, warnings = quoted_answer(state["question"], sources, language)
    if reason is not None:
        shown = localize(reason, language)
        text += " " + (BOUND_NOTE_ZH if language == "zh" else BOUND_NOTE_EN).format(reason=shown)
        warnings.append(f"agent stopped: {reason}; answered extractively from the sources gathered")
    return {
        "answer": f"{text}{web_note(state, language)}",
        "warnings": warnings,
        **route_of(state.get("tool_calls") or []),
        **_confidence(run),
    }


# --- nodes -----------------------------------------------------------------------------


@node
async def agent_prepare(state: AgentState, run: RunView) -> dict[str, Any]:
    """The state graph's ``prepare`` (validation, fresh turn), plus the agent's counters."""
    update = await prepare(state, run)
    offline = update["mode"] == OFFLINE
    return {**update, "model_calls": 0, "degraded": "", "strategy": "" if offline else "agent"}


@node
async def call_model(state: AgentState, run: RunView) -> dict[str, Any]:
    """One model turn: tool calls to run next, or the answer (bounded, never raises)."""
    started = time.perf_counter()
    calls = int(state.get("model_calls") or 0)
    max_model_calls, max_tool_calls = run.context.max_model_calls, run.context.max_tool_calls
    if calls >= max_model_calls:
        return bounded_answer(run, f"the max_model_calls bound ({max_model_calls}) was reached")
    tools_left = max_tool_calls - len(state.get("tool_calls") or [])
    if first_search_by_rule(run, tools_left):
        return {"messages": [first_search(state["question"])]}
    web = web_available(run)
    messages = agent_messages(state, tools_left, web=web)
    run.emit("thinking", call=calls + 1, tools_left=max(0, tools_left))
    update: dict[str, Any] = {"model_calls": calls + 1}
    env = run.model_env  # outside the try: missing settings are no model failure
    try:
        reply = await ask_model(run, load_chat_model(state["mode"], env), messages, web, calls)
    except Exception as exc:  # provider/network failure: the offline rules take over
        if not isinstance(exc, HybridRagError):
            log.warning("agent model call failed", exc_info=True)
        detail = str(exc) if isinstance(exc, HybridRagError) else type(exc).__name__
        return {
            **update,
            "degraded": MODEL_FAILED,
            **route_of(state.get("tool_calls") or []),
            "warnings": [f"model call failed: {detail}; the offline rules answer"],
            "timings": _add_ms(state, "call_model", started),
        }
    update["timings"] = _add_ms(state, "call_model", started)
    if isinstance(reply, AIMessage) and reply.tool_calls:
        if repeats_ignored(state.get("messages") or [], reply):
            return {**update, **bounded_answer(run, REPEATED)}
        if tools_left <= 0:
            return {
                **update,
                **bounded_answer(run, f"the max_tool_calls bound ({max_tool_calls}) was reached"),
            }
        return {**update, "messages": [reply]}
    answer = reply.text.strip() if isinstance(reply, AIMessage) else str(reply).strip()
    if not answer:
        bounded = bounded_answer(run, "the model replied with nothing")
        return {**update, **bounded}
    language = state.get("language", "en")
    run.emit("answering", mode=state["mode"])
    # The reply is not appended to ``messages`` here: ``cite`` appends the checked answer,
    # under the streamed reply's id when it is the draft unchanged (see generate.cite).
    return {
        **update,
        "answer": f"{answer}{web_note(state, language)}",
        "answer_message_id": reply.id,
        "answer_draft": answer,
        **route_of(state.get("tool_calls") or []),
        **_confidence(run),
    }


@node
async def run_tools(state: AgentState, run: RunView) -> dict[str, Any]:
    """Run the last model turn's tool calls in order, within ``max_tool_calls``."""
    bound = run.context.max_tool_calls
    started = time.perf_counter()
    messages = state.get("messages") or []
    last = messages[-1] if messages else None
    requested = list(last.tool_calls) if isinstance(last, AIMessage) else []
    budget = max(0, bound - len(state.get("tool_calls") or []))
    # Every tool call needs an answer (OpenAI rejects a dangling one): those over the
    # budget get a message saying why not.
    replies, done, registry = await run_calls(state, requested, run, budget)
    # A repeat answered from the first call's results was not refused by the budget.
    repeats = sum(1 for r in replies if (r.artifact or {}).get("status") == "repeated")
    refused = len(requested) - len(done) - repeats
    update = apply_outcomes(state, registry, done)
    if refused:
        update["warnings"].append(
            f"{refused} tool call(s) not run: max_tool_calls ({bound}) reached"
        )
    return {**update, "messages": replies, "timings": _add_ms(state, "run_tools", started)}


def evidence_of(state: Mapping[str, Any]) -> Evidence:
    """The agent's evidence: the sources its tools found, for the route its calls took (a
    model's), or the one the offline rule took (``offline_tools``)."""
    if not model_drives(state):
        return turn_evidence(state)
    return turn_evidence(state, route=route_of(state.get("tool_calls") or []).get("route"))


def model_drives(state: Mapping[str, Any]) -> bool:
    """A model picks this run's searches (not the offline rule, nor after it failed)."""
    return state.get("mode") != OFFLINE and not state.get("degraded")


def decision_of(run: RunView, *, searches_left: int = 0) -> Decision:
    """``tools.policy.decide`` over the agent's evidence (the state graph's ``grade`` asks
    the same function); ``searches_left``: 0 once the run answers."""
    state, ctx = run.state, run.context
    return decide(
        evidence_of(state),
        ctx.confidence_threshold,
        refusal=ctx.refusal_threshold,
        model_driven=model_drives(state),
        searches_left=searches_left,
    )


def _confidence(run: RunView) -> dict[str, Any]:
    verdict = decision_of(run)
    return {
        "confidence": verdict["confidence"],
        "decision": verdict,
        "evidence": record(evidence_of(run.state)),
    }


# --- past the run's deadline ------------------------------------------------------------


@node
async def late_run_tools(state: Mapping[str, Any], run: RunView) -> dict[str, Any]:
    """The agent's ``run_tools`` past the deadline (``run.deadline``): every tool call is
    answered "not run"
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


@node
async def late_call_model(state: Mapping[str, Any], run: RunView) -> dict[str, Any]:
    """The agent's ``call_model`` past the deadline (``run.deadline``): the bounded
    extractive answer (the deadline sentence ``run_late`` appends says why), counting the
    model call the deadline cut off."""
    calls = int(state.get("model_calls") or 0) + (1 if state.get(CUT_OFF) else 0)
    return {"model_calls": calls, **bounded_answer(run, None)}


# --- routing ---------------------------------------------------------------------------


def after_prepare(state: Mapping[str, Any]) -> Literal["call_model", "offline_tools"]:
    """Offline (no model configured) takes the deterministic branch."""
    return "offline_tools" if state.get("mode") == OFFLINE else "call_model"


def after_model(
    state: Mapping[str, Any],
) -> Literal["run_tools", "cite", "offline_tools", "offline_answer"]:
    """Run tools while the model's last message asks for them; otherwise check citations.
    A failed model leaves the run to the offline rules, as in the state graph: they search
    when nothing was searched yet, and answer from what was found."""
    if state.get("degraded"):
        return "offline_answer" if state.get("tool_calls") else "offline_tools"
    last = (state.get("messages") or [None])[-1]
    if not state.get("answer") and isinstance(last, AIMessage) and last.tool_calls:
        return "run_tools"
    return "cite"
