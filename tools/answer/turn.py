"""How a web search's outcome changes a turn: one fold for both graphs.

The state graph's ``search_web`` node and the agent's ``google_search`` tool calls
(``graph.agent.tool_outcomes.apply_outcomes``) fold each :class:`WebFound` into the turn here, so
the web's status has one meaning everywhere: ``web_searched`` (a search ran, or failed),
``web_skipped`` (the person approving it said skip: not a failure), ``web_error`` (why the
last search found nothing; a later success clears it), plus the costs and page counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tools.answer.search_service import WebFound


def fold_web(turn: Mapping[str, Any], found: WebFound) -> dict[str, Any]:
    """The turn's web fields after ``found`` (``turn`` holds them before)."""
    update: dict[str, Any] = {
        "search_cost": round(float(turn.get("search_cost") or 0.0) + found.cost, 6),
        "search_calls": int(turn.get("search_calls") or 0) + found.calls,
        "pages_read": int(turn.get("pages_read") or 0) + found.pages_read,
        "pages_failed": int(turn.get("pages_failed") or 0) + found.pages_failed,
    }
    if found.status == "skipped":
        return {**update, "web_skipped": True}
    update["web_searched"] = True
    if found.status == "ok":
        update["web_error"] = ""  # a later success supersedes an earlier failure
        update["web_fetched_at"] = found.fetched_at
    else:
        update["web_error"] = found.error or "web search failed"
    return update
