"""State reducers and a turn's starting values: a leaf beside ``run.state`` (imports
nothing of ``nodes`` or of the graph builders; ``prepare`` imports it at run time).

``run.state`` annotates fields with the reducers; a new turn starts a field afresh with
LangGraph's ``Overwrite``, which bypasses the reducer.
"""

from __future__ import annotations

from typing import Any

from langgraph.types import Overwrite


def add_warnings(old: list[str] | None, new: list[str] | None) -> list[str]:
    """Append the warnings not given yet (a retrieval round repeating "knowledge base
    unavailable" adds nothing); reset with ``Overwrite([...])``."""
    return list(dict.fromkeys([*(old or []), *(new or [])]))


def merge_or_reset(old: dict[str, Any] | None, new: dict[str, Any] | None) -> dict[str, Any]:
    """Merge keys, the newer value winning; reset with ``Overwrite({...})``."""
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
        "decision": {},
        "evidence": {},
        "confidence": 0.0,
        "iteration": 0,
        "reasoning": [],
        "search_cost": 0.0,
        "search_calls": 0,
        "pages_read": 0,
        "pages_failed": 0,
        "warnings": Overwrite([]),
        "timings": Overwrite({}),
        "planned": {},
        "kb_queries": [],
        "web_queries": [],
        "internal_docs": [],
        "web_docs": [],
        "web_searched": False,
        "web_skipped": False,
        "web_error": "",
        "next_query": "",
        "next_source": "",
        "tool_calls": [],
        "crosslingual": {},
        "answer_message_id": None,
        "answer_draft": "",
    }
