"""``retrieve_internal`` and ``search_web``: the two retrieval branches.

They run in parallel when the route is ``both`` and write disjoint keys, so no
reducer is needed to merge them. Failures become warnings, never exceptions:
the other branch, and the answer, go on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from run.deadline import deadline_reason
from run.run_view import RunView, node
from run.search_setup import locale_setting, search_service
from tools.answer.sources import Source
from tools.answer.turn import fold_web
from tools.policy.disclosure import web_reason_for

if TYPE_CHECKING:
    from run.state import State

RESULTS_PER_QUERY = 10  # results asked of the provider per query, before top_k_web


def merge_sources(old: Sequence[Source], new: Sequence[Source]) -> list[Source]:
    """Deduplicate by id across queries and iterations: the copy with the best relevance,
    carrying the best answerability any search gave the chunk (the evidence
    ``tools.policy`` reads; keeping only the more relevant copy could lose it)."""
    best: dict[str, Source] = {s["id"]: s for s in old}
    for s in new:
        current = best.get(s["id"])
        if current is None:
            best[s["id"]] = s
            continue
        winner = s if s.get("relevance", 0.0) > current.get("relevance", 0.0) else current
        answerability = max(s.get("answerability", 0.0), current.get("answerability", 0.0))
        best[s["id"]] = {**winner, "answerability": answerability}
    return sorted(best.values(), key=lambda s: -s.get("relevance", 0.0))


def _queries(state: Mapping[str, Any], source: str, planned: str) -> list[str]:
    if state.get("next_source") == source and state.get("next_query"):
        return [state["next_query"]]
    return list(state.get(planned) or [state["question"]])


@node
async def retrieve_internal(state: State, run: RunView) -> dict[str, Any]:
    queries = _queries(state, "internal", "kb_queries")
    run.emit("retrieving", queries=queries)
    question = state["question"]
    with run.timed("retrieve_internal"):
        anchor = None if run.context.embed_every_query else question
        found = await search_service(run).search_kb(
            queries, run.context.top_k_internal * 2, question=question, anchor=anchor
        )
        if found.error:
            run.warn(found.error)
    merged = merge_sources(state.get("internal_docs") or [], found.sources)
    run.emit("retrieved", count=len(found.sources))
    return {"internal_docs": merged[: run.context.top_k_internal * 3]}


@node
async def search_web(state: State, run: RunView) -> dict[str, Any]:
    """Search the web; with ``approve_web_search`` a person approves, edits or skips it first."""
    hl, gl = locale_setting(run.context)  # 'auto': each query's own language
    with run.timed("search_web"):
        found = await search_service(run).search_web(
            _queries(state, "web", "web_queries"),
            hl=hl,
            gl=gl,
            num=RESULTS_PER_QUERY,
            top_k=run.context.top_k_web,
            announce=lambda queries: run.emit("searching", queries=queries),
        )
    update = fold_web(state, found)
    if found.status == "ok":
        run.annotate(
            web_provider=found.providers,
            cache_hits=found.cache_hits,
            pages_read=found.pages_read,
            pages_failed=found.pages_failed,
        )
        update["web_docs"] = _merge_web(state.get("web_docs") or [], found.sources)
        warnings = found.warnings
    elif found.status in ("disabled", "skipped"):
        warnings = [found.error]
    else:
        warnings = [f"web search failed: {found.error}"]
    error = web_reason_for(found.error, operator=run.operator) if found.error else found.error
    run.emit("searched", count=len(update.get("web_docs") or []), error=error)
    return {**update, "warnings": warnings}


@node
async def late_search_web(state: Mapping[str, Any], run: RunView) -> dict[str, Any]:
    """``search_web`` past the deadline (``run.deadline``): no search, the reason recorded
    as the web's."""
    return {"web_searched": True, "web_error": deadline_reason(run.context)}


def _merge_web(old: Sequence[Source], new: Sequence[Source]) -> list[Source]:
    seen = {s["id"] for s in old}
    return [*old, *(s for s in new if s["id"] not in seen)]
