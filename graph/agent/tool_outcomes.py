"""What a step's tool calls leave: a call the model repeats (answered from the first
one's results, :func:`repeat_reply`; the agent stops when it is ignored,
:func:`repeats_ignored`) and the outcomes folded into the state (:func:`apply_outcomes`:
sources, costs, web status, records, warnings; :func:`route_of`)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.messages.tool import ToolCall

from graph.agent.tool_work import GOOGLE_SEARCH, INTERNAL_SEARCH, SourceRegistry
from prompts.agent import REPEATED_NONE, REPEATED_TOOL_MESSAGE
from tools.answer.search_service import WebFound
from tools.answer.turn import fold_web
from tools.text import LABEL_RE


def call_key(call: Mapping[str, Any]) -> str:
    """What makes two tool calls the same: the tool and its arguments (string arguments
    with their spacing and case normalised)."""
    args = {
        k: " ".join(v.split()).casefold() if isinstance(v, str) else v
        for k, v in sorted((call.get("args") or {}).items())
        if k != "runtime"
    }
    return f"{call.get('name')}:{json.dumps(args, sort_keys=True, default=str)}"


def this_turn(messages: Sequence[AnyMessage]) -> list[AnyMessage]:
    """The messages after the last human message: this turn's tool-calling exchange."""
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], HumanMessage):
            return list(messages[i + 1 :])
    return []


def calls_made(messages: Sequence[AnyMessage]) -> dict[str, str]:
    """The tool calls that ran this turn (by :func:`call_key`), each with the labels its
    result showed the model ('' when it found nothing); repeats answered by the note are
    not calls made."""
    keys: dict[str, str] = {}
    made: dict[str, str] = {}
    for message in this_turn(messages):
        if isinstance(message, AIMessage):
            keys.update({str(c.get("id")): call_key(c) for c in message.tool_calls})
        elif isinstance(message, ToolMessage) and message.status != "error":
            if is_repeat_note(message):
                continue
            key = keys.get(message.tool_call_id)
            if key is not None and key not in made:
                labels = dict.fromkeys(m.group(0) for m in LABEL_RE.finditer(message.text))
                made[key] = ", ".join(labels)
    return made


def is_repeat_note(message: AnyMessage) -> bool:
    prefix = REPEATED_TOOL_MESSAGE.split("{", 1)[0]
    return isinstance(message, ToolMessage) and message.text.startswith(prefix)


def repeats_ignored(messages: Sequence[AnyMessage], reply: AIMessage) -> bool:
    """The model asks only for calls it already made, after being told once this turn
    that a repeat is not run: the agent stops instead of asking it again."""
    made = calls_made(messages)
    told = any(is_repeat_note(m) for m in this_turn(messages))
    return told and bool(reply.tool_calls) and all(call_key(c) in made for c in reply.tool_calls)


def repeat_reply(call: ToolCall, labels: str) -> ToolMessage:
    """The answer to a call identical to one made before: not run, see its results."""
    return ToolMessage(
        REPEATED_TOOL_MESSAGE.format(name=call["name"], labels=labels or REPEATED_NONE),
        tool_call_id=call.get("id") or f"call_{call['name']}",
        name=call["name"],
        artifact={"ok": True, "status": "repeated", "sources": []},
    )


def apply_outcomes(
    state: Mapping[str, Any],
    registry: SourceRegistry,
    done: list[tuple[ToolCall, dict[str, Any]]],
) -> dict[str, Any]:
    """Fold tool outcomes into the state: sources, costs, web status, records, warnings
    (a web search's outcome as the state graph folds it: ``tools.answer.turn.fold_web``)."""
    records = list(state.get("tool_calls") or [])
    warnings: list[str] = []
    turn: dict[str, Any] = {k: state.get(k) for k in FOLDED}
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
        if outcome.get("web_status"):  # a web search ran, failed or was skipped
            turn.update(fold_web(turn, web_found(outcome)))
        warnings.extend(f"{name}: {w}" for w in outcome.get("warnings") or [])
        if not outcome.get("ok"):
            warnings.append(f"{name}: {outcome.get('error')}")
    return {
        **{k: v for k, v in turn.items() if v is not None},
        "sources": registry.sources,
        "internal_docs": registry.of_kind("internal"),
        "web_docs": registry.of_kind("web"),
        "tool_calls": records,
        "warnings": warnings,
    }


# The state fields fold_web writes.
FOLDED = ("search_cost", "search_calls", "pages_read", "pages_failed", "web_searched",
          "web_skipped", "web_error", "web_fetched_at")  # fmt: skip


def web_found(outcome: Mapping[str, Any]) -> WebFound:
    """A google_search outcome as the search service's ``WebFound`` (what ``fold_web``
    reads)."""
    return WebFound(
        status=outcome["web_status"],
        error=str(outcome.get("error") or ""),
        cost=float(outcome.get("search_cost") or 0.0),
        calls=int(outcome.get("search_calls") or 0),
        fetched_at=str(outcome.get("web_fetched_at") or ""),
        pages_read=int(outcome.get("pages_read") or 0),
        pages_failed=int(outcome.get("pages_failed") or 0),
    )


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
