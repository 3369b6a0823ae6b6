"""State reducers, defined beside the nodes that write the values they merge.

``graph.state`` annotates fields with them; nodes return :class:`Reset` to start a
new turn's list (or ``{"__reset__": True, ...}`` for a dict) instead of extending.
"""

from __future__ import annotations

from typing import Any


class Reset(list[Any]):
    """A list update that replaces the accumulated value instead of extending it."""


def extend_or_reset(old: list[Any] | None, new: list[Any] | None) -> list[Any]:
    if isinstance(new, Reset):
        return list(new)
    return [*(old or []), *(new or [])]


def merge_or_reset(old: dict[str, Any] | None, new: dict[str, Any] | None) -> dict[str, Any]:
    if new is not None and new.get("__reset__"):
        return {k: v for k, v in new.items() if k != "__reset__"}
    return {**(old or {}), **(new or {})}


def fresh_turn() -> dict[str, Any]:
    """Every per-turn field at its starting value, so a thread's next turn starts clean."""
    return {
        "answer": "",
        "citations": [],
        "sources": [],
        "route": "both",
        "route_reason": "",
        "strategy": "",
        "confidence": 0.0,
        "iteration": 0,
        "reasoning": [],
        "search_cost": 0.0,
        "search_calls": 0,
        "warnings": Reset(),
        "timings": {"__reset__": True},
        "kb_queries": [],
        "web_queries": [],
        "internal_docs": [],
        "web_docs": [],
        "web_searched": False,
        "web_error": "",
        "next_query": "",
        "next_source": "",
        "tool_calls": [],
        "crosslingual": {},
        "answer_message_id": None,
    }
