"""Optional human approval of paid web search (``Context.approve_web_search``).

One rule for both graphs: the state graph's ``search_web`` and the agent's
``google_search`` tool call :func:`web_search_decision` right before they would search.
It pauses the run with LangGraph's ``interrupt`` and a payload from
``tools.websearch.approval_request`` (queries, provider, price per query, estimated
cost); the run continues when resumed with ``Command(resume=...)``, whose value is
validated as a ``WebSearchDecision`` (approve / edit / skip). An invalid value fails that
resume with an ``InvalidDecisionError`` naming the problem and leaves the question open,
so it can be answered again.

No question is asked when the switch is off, when web search is disabled or not
configured (nothing to pay for), when every query is in the search cache (it costs
nothing), or when the user already skipped web search in this turn. Pausing needs a checkpointer: ``prepare`` checks for one upfront
(:func:`require_checkpointer`), because LangGraph would otherwise return the pause as a
finished run that cannot be resumed.

The state graph asks inside ``search_web`` rather than in a node of its own: with the
route ``both``, ``retrieve_internal`` and ``search_web`` run in the same step and join
in ``rerank``; a node in front of ``search_web`` would split that step and run
``rerank`` twice. On resume LangGraph re-runs only the interrupted task.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from langgraph.runtime import ExecutionInfo
from langgraph.types import interrupt
from pydantic import ValidationError

from run.resources import web_settings
from tools.answer.search_service import WebApproval
from tools.errors import ConfigError
from tools.websearch import (
    SearchCache,
    WebSearchDecision,
    WebSearchSettings,
    approval_request,
    default_cache,
)
from tools.websearch.approval import InvalidDecisionError, invalid_decision

if TYPE_CHECKING:
    from run.context import Context
    from run.run_view import RunView

SKIP = WebSearchDecision(action="skip")
# Errors that end the run instead of becoming a warning or a tool message.
APPROVAL_ERRORS = (InvalidDecisionError,)


class CheckpointerRequiredError(ConfigError):
    """``approve_web_search`` is on, web search is configured, and the graph has no
    checkpointer to keep the paused run in."""


def approval_needed(ctx: Context, web: WebSearchSettings | None) -> bool:
    """Whether a web search under ``web`` waits for a person: the switch is on and a
    provider is configured (a disabled or unconfigured search costs nothing)."""
    return ctx.approve_web_search and web is not None and web.is_configured


def require_checkpointer(run: RunView) -> None:
    """Fail upfront, naming the problem, when this run could pause but not be resumed.

    Told by LangGraph's public ``Runtime.execution_info``: a run has a ``thread_id`` when
    its graph keeps threads (a checkpointer needs one; None without persistence). Not
    caught: a caller naming a thread to a graph compiled without a checkpointer."""
    if not run.context.approve_web_search:
        return
    execution: ExecutionInfo | None = run.execution_info
    if execution is not None and execution.thread_id is not None:
        return
    if not approval_needed(run.context, web_settings(run.settings)):
        return
    raise CheckpointerRequiredError(
        "approve_web_search needs a checkpointer to pause the run before a web search and "
        "resume it: run on a thread of the LangGraph server, use graph.persistence."
        "open_graph(), or compile with build_graph(checkpointer=...); or turn "
        "approve_web_search off"
    )


def web_search_decision(
    ctx: Context,
    web: WebSearchSettings | None,
    queries: Sequence[str],
    *,
    hl: str | None,
    gl: str | None,
    num: int,
    cache: SearchCache | None = None,
    web_skipped: bool = False,
) -> WebSearchDecision | None:
    """The person's decision on searching ``queries``, or ``None`` when none is needed.

    Pauses the run (``interrupt``) until it is resumed with a decision. ``hl``, ``gl`` and
    ``num`` are those of the coming search (the estimate skips queries already cached);
    ``web_skipped``: the person skipped a web search earlier in this turn.
    """
    if not approval_needed(ctx, web):
        return None
    assert web is not None  # approval_needed checked it
    if web_skipped:
        return SKIP  # skipped once this turn: do not ask again
    cache = cache or default_cache()
    request = approval_request(web, queries, hl=hl, gl=gl, num=num, cache=cache)
    if request["queries"] and len(request["cached_queries"]) == len(request["queries"]):
        return None  # every query is answered from the cache: nothing to pay, nothing to ask
    try:
        return interrupt(request, response_schema=WebSearchDecision)
    except ValidationError as exc:  # LangGraph saved nothing: the question stays open
        raise invalid_decision(exc) from None


def tool_approval(run: RunView) -> WebApproval:
    """:func:`web_search_decision` as the search service's hook for one step (both graphs):
    once the user skips (in this turn: ``web_skipped``), later searches in the step are
    skipped too without asking again."""
    ctx, cache = run.context, run.settings.cache
    turn = {"web_skipped": bool(run.state.get("web_skipped"))}  # this step's, once skipped

    def approve(
        web: WebSearchSettings, queries: list[str], *, hl: str | None, gl: str | None, num: int
    ) -> WebSearchDecision | None:
        decision = web_search_decision(
            ctx, web, queries, hl=hl, gl=gl, num=num, cache=cache,
            web_skipped=turn["web_skipped"],
        )  # fmt: skip
        if decision is not None and decision.action == "skip":
            turn["web_skipped"] = True
        return decision

    return approve
