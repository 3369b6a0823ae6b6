"""``retrieve_internal`` and ``search_web``: the two retrieval branches.

They run in parallel when the route is ``both`` and write disjoint keys, so no
reducer is needed to merge them. Failures become warnings, never exceptions:
the other branch, and the answer, go on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langgraph.runtime import Runtime

from run.deadline import deadline_reason
from run.node_helpers import emit, timed
from run.run_view import run_of
from run.search_setup import locale_setting
from tools.answer.sources import Source
from tools.answer.turn import fold_web
from tools.policy.disclosure import web_reason_for

if TYPE_CHECKING:  # types only: at run time nodes never import graph/
    from run.context import Context
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


async def retrieve_internal(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    run = run_of(state, runtime)
    ctx = run.ctx
    queries = _queries(state, "internal", "kb_queries")
    timings: dict[str, float] = {}
    warnings: list[str] = []
    emit(runtime, "retrieving", queries=queries)
    question = state["question"]
    with timed("retrieve_internal", timings):
        anchor = None if ctx.embed_every_query else question
        found = await run.search().search_kb(
            queries, ctx.top_k_internal * 2, question=question, anchor=anchor
        )
        if found.error:
            warnings.append(found.error)
    merged = merge_sources(state.get("internal_docs") or [], found.sources)
    emit(runtime, "retrieved", count=len(found.sources))
    return {
        "internal_docs": merged[: ctx.top_k_internal * 3],
        "warnings": warnings,
        "timings": timings,
    }


async def search_web(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Search the web; with ``approve_web_search`` a person approves, edits or skips it first."""
    run = run_of(state, runtime)
    ctx = run.ctx
    timings: dict[str, float] = {}
    hl, gl = locale_setting(ctx)  # 'auto': each query's own language
    with timed("search_web", timings):
        found = await run.search().search_web(
            _queries(state, "web", "web_queries"),
            hl=hl,
            gl=gl,
            num=RESULTS_PER_QUERY,
            top_k=ctx.top_k_web,
            announce=lambda queries: emit(runtime, "searching", queries=queries),
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
    emit(runtime, "searched", count=len(update.get("web_docs") or []), error=error)
    return {**update, "warnings": warnings, "timings": timings}


async def late_search_web(state: Mapping[str, Any], runtime: Runtime[Context]) -> dict[str, Any]:
    """``search_web`` past the deadline (``run.deadline``): no search, the reason recorded
    as the web's."""
    return {"web_searched": True, "web_error": deadline_reason(runtime.context)}


def _merge_web(old: Sequence[Source], new: Sequence[Source]) -> list[Source]:
    seen = {s["id"] for s in old}
    return [*old, *(s for s in new if s["id"] not in seen)]
