"""``finalize``: record the run's statistics (never fails the run) and put the warnings
in the answer's language."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from langgraph.types import Overwrite

from run.deadline import stated_once
from run.localize import localize_all
from run.run_view import RunView, node
from tools.evaluation.run_stats import record_run
from tools.policy.decisions import web_unavailable
from tools.policy.disclosure import shown_warnings
from tools.settings import data_home, run_stats_path

if TYPE_CHECKING:
    from run.state import State

log = logging.getLogger("hybrid_rag.nodes")


@node
async def finalize(state: State, run: RunView) -> dict[str, Any]:
    decision = state.get("decision")
    record = {
        "graph": "agent" if state.get("tool_calls") else "state",
        "route": state.get("route"),
        "strategy": state.get("strategy"),
        "web_fallback": bool(decision and decision.get("web_fallback")),
        "confidence": state.get("confidence"),
        "iterations": state.get("iteration"),
        "search_cost": state.get("search_cost"),
        "search_calls": state.get("search_calls"),
        "pages_read": state.get("pages_read") or 0,
        "pages_failed": state.get("pages_failed") or 0,
        "mode": state.get("mode"),
        "warnings": len(state.get("warnings") or []),
    }

    where = run.settings.home

    def write() -> None:
        # create=False: a run records into an existing data home, never makes one
        record_run(run_stats_path(data_home(where, create=False)), record)

    try:
        # File I/O off the event loop: the LangGraph server rejects blocking calls in nodes.
        await asyncio.to_thread(write)
    except OSError as exc:  # statistics are best effort; the answer is not
        log.warning("could not record run statistics: %s", exc)
    language = str(state.get("language") or "en")
    warnings = list(state.get("warnings") or [])
    # Not the web failure the answer's note states, nor the server's configuration to
    # anyone but its operator.
    shown = shown_warnings(warnings, web_unavailable(state), operator=run.operator)
    once = stated_once(shown, str(state.get("answer") or ""), run.context, language)
    localized = localize_all(once, language)
    # The warnings in the answer's language (Overwrite: the reducer would append them).
    return {"warnings": Overwrite(localized)} if localized != warnings else {}
