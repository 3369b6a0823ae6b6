"""``retrieve_internal`` and ``search_web``: the two retrieval branches.

They run in parallel when the route is ``both`` and write disjoint keys, so no
reducer is needed to merge them. Failures become warnings, never exceptions:
the other branch, and the answer, go on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langgraph.runtime import Runtime

from nodes.common import emit, timed
from nodes.search import locale_setting, search_service
from nodes.tracing import annotate_run
from tools.answer.sources import Source
from tools.policy.confidence import as_question_evidence, is_keyword_selection

if TYPE_CHECKING:  # types only: at run time nodes never import graph/
    from graph.context import Context
    from graph.state import State

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
    ctx = runtime.context
    queries = _queries(state, "internal", "kb_queries")
    timings: dict[str, float] = {}
    warnings: list[str] = []
    emit(runtime, "retrieving", queries=queries)
    question = state["question"]
    with timed("retrieve_internal", timings):
        anchor = None if ctx.embed_every_query else question
        service, k = search_service(ctx, state), ctx.top_k_internal * 2
        found = await service.search_kb(queries, k, anchor=anchor)
        if found.error:
            warnings.append(found.error)
        sources = found.sources
        if found.searches and any(is_keyword_selection(q, question) for q in queries):
            # Keyword selections' hits count as the question's own search does (served
            # from the knowledge base's per-run cache when the question ran before).
            own = [r for q, r in zip(queries, found.searches, strict=True) if q == question]
            if not own:
                own = (await service.search_kb([question], k, anchor=anchor)).searches
            sources = as_question_evidence(
                question,
                queries,
                [len(r.hits) for r in found.searches],
                sources,
                own[0].answerability if own else 0.0,
            )
    merged = merge_sources(state.get("internal_docs") or [], sources)
    emit(runtime, "retrieved", count=len(found.sources))
    return {
        "internal_docs": merged[: ctx.top_k_internal * 3],
        "warnings": warnings,
        "timings": timings,
    }


async def search_web(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Search the web; with ``approve_web_search`` a person approves, edits or skips it first."""
    ctx = runtime.context
    timings: dict[str, float] = {}
    update: dict[str, Any] = {"web_searched": True}
    hl, gl = locale_setting(ctx)  # 'auto': each query's own language
    with timed("search_web", timings):
        found = await search_service(ctx, state).search_web(
            _queries(state, "web", "web_queries"),
            hl=hl,
            gl=gl,
            num=RESULTS_PER_QUERY,
            top_k=ctx.top_k_web,
            announce=lambda queries: emit(runtime, "searching", queries=queries),
        )
    update["web_error"] = found.error  # a later success supersedes an earlier failure
    if found.status == "ok":
        annotate_run(
            web_provider=found.providers,
            cache_hits=found.cache_hits,
            pages_read=found.pages_read,
            pages_failed=found.pages_failed,
        )
        update["web_docs"] = _merge_web(state.get("web_docs") or [], found.sources)
        update["search_cost"] = round(float(state.get("search_cost") or 0) + found.cost, 6)
        update["search_calls"] = int(state.get("search_calls") or 0) + found.calls
        update["pages_read"] = int(state.get("pages_read") or 0) + found.pages_read
        update["pages_failed"] = int(state.get("pages_failed") or 0) + found.pages_failed
        update["web_fetched_at"] = found.fetched_at
        warnings = found.warnings
    elif found.status in ("disabled", "skipped"):
        warnings = [found.error]
    else:
        warnings = [f"web search failed: {found.error}"]
    emit(runtime, "searched", count=len(update.get("web_docs") or []), error=found.error)
    return {**update, "warnings": warnings, "timings": timings}


def _merge_web(old: Sequence[Source], new: Sequence[Source]) -> list[Source]:
    seen = {s["id"] for s in old}
    return [*old, *(s for s in new if s["id"] not in seen)]
