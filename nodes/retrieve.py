"""``retrieve_internal`` and ``search_web``: the two retrieval branches.

They run in parallel when the route is ``both`` and write disjoint keys, so no
reducer is needed to merge them. Failures become warnings, never exceptions:
the other branch, and the answer, go on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langgraph.runtime import Runtime

from nodes.approval import APPROVAL_ERRORS, web_search_decision
from nodes.common import emit, timed
from nodes.resources import get_kb, web_settings
from nodes.tracing import annotate_run
from tools.answer.sources import Source, chunk_to_source, web_to_source
from tools.errors import HybridRagError, kb_unavailable
from tools.kb.knowledge_base import KnowledgeBase, Retrieval
from tools.websearch import SKIPPED_BY_USER, WebSearchClient, WebSearchError, default_cache

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
    found: list[Source] = []

    def run() -> tuple[KnowledgeBase, list[Retrieval]]:
        kb = get_kb(ctx)  # opening the store is blocking too
        anchor = None if ctx.embed_every_query else state["question"]
        return kb, kb.retrieve_many(queries, ctx.top_k_internal * 2, anchor=anchor)

    with timed("retrieve_internal", timings):
        try:
            kb, searches = await asyncio.to_thread(run)  # Chroma and BM25 are blocking work
            found = [chunk_to_source(h, r.answerability) for r in searches for h in r.hits]
            hits = [h for r in searches for h in r.hits]
            if not hits and kb.stats()["chunks"] == 0:
                warnings.append("the knowledge base is empty: run 'hybrid-rag ingest PATH'")
        except HybridRagError as exc:
            warnings.append(kb_unavailable(exc))
    merged = merge_sources(state.get("internal_docs") or [], found)[: ctx.top_k_internal * 3]
    emit(runtime, "retrieved", count=len(found))
    return {"internal_docs": merged, "warnings": warnings, "timings": timings}


async def search_web(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Search the web; with ``approve_web_search`` a person approves, edits or skips it first."""
    ctx = runtime.context
    queries = _queries(state, "web", "web_queries")
    timings: dict[str, float] = {}
    warnings: list[str] = []
    update: dict[str, Any] = {"web_searched": True}
    with timed("search_web", timings):
        try:
            settings = web_settings(ctx)
            # 'auto' leaves hl/gl to the client, which derives them from the query language.
            hl = None if ctx.hl == "auto" else ctx.hl
            gl = None if ctx.gl == "auto" else ctx.gl
            decision = web_search_decision(
                ctx, state, settings, queries, hl=hl, gl=gl, num=RESULTS_PER_QUERY
            )
            if decision is not None and decision.queries:
                queries = decision.queries
            emit(runtime, "searching", queries=queries)
            if settings is None:
                update["web_error"] = "web search is disabled (search_provider=none)"
                warnings.append(update["web_error"])
            elif decision is not None and decision.action == "skip":
                update["web_error"] = SKIPPED_BY_USER
                warnings.append(SKIPPED_BY_USER)
            else:
                async with WebSearchClient(settings, cache=default_cache()) as client:
                    multi = await client.search_many(
                        queries, hl=hl, gl=gl, num=RESULTS_PER_QUERY, top_k=ctx.top_k_web
                    )
                found = [web_to_source(r) for r in multi.results]
                annotate_run(  # LangSmith metadata of this node's run (no-op untraced)
                    web_provider=",".join(sorted({r.provider for r in multi.responses})),
                    cache_hits=sum(r.cache_hit for r in multi.responses),
                )
                update["web_docs"] = _merge_web(state.get("web_docs") or [], found)
                update["web_error"] = ""  # a later success supersedes an earlier failure
                update["search_cost"] = round(float(state.get("search_cost") or 0) + multi.cost, 6)
                update["search_calls"] = int(state.get("search_calls") or 0) + multi.calls
                update["web_fetched_at"] = multi.fetched_at
                warnings.extend(multi.warnings)
        except APPROVAL_ERRORS:
            raise  # a bad approval answer: the run fails and the question stays open
        except (WebSearchError, HybridRagError) as exc:
            update["web_error"] = str(exc)
            warnings.append(f"web search failed: {exc}")
    emit(
        runtime, "searched", count=len(update.get("web_docs") or []), error=update.get("web_error")
    )
    return {**update, "warnings": warnings, "timings": timings}


def _merge_web(old: Sequence[Source], new: Sequence[Source]) -> list[Source]:
    seen = {s["id"] for s in old}
    return [*old, *(s for s in new if s["id"] not in seen)]
