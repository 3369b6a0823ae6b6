"""One search service for both graphs: the knowledge base and the web, with the
approval, cost and warning rules written once.

The state graph's ``retrieve_internal`` / ``search_web`` nodes and the agent's
``internal_search`` / ``google_search`` tools call :class:`SearchService` and render its
outcome their own way (state updates; a tool message for the model). Nothing here
raises for a source that cannot answer: a store error, a disabled or unconfigured web
search, a skip by the person approving, a provider outage are outcomes with a status
and an error text. The one exception is the ``approve`` hook, which may pause the run
(LangGraph's ``interrupt``, see ``run.approval_interrupt``) or reject a malformed decision.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from tools.access.acl import Reader
from tools.answer.sources import Source, chunk_to_source, web_to_source
from tools.errors import HybridRagError, kb_unavailable
from tools.kb.knowledge_base import KnowledgeBase, Retrieval
from tools.kb.search.rerankers import Reranker, rerank_chunks
from tools.policy.confidence import KBSearch, evidence_from, is_keyword_selection
from tools.policy.disclosure import KB_EMPTY_DETAIL
from tools.websearch import (
    SKIPPED_BY_USER,
    SearchCache,
    WebSearchClient,
    WebSearchDecision,
    WebSearchError,
    WebSearchNotConfiguredError,
    WebSearchSettings,
    default_cache,
)
from tools.websearch.page_passages import PageRead, page_text, read_pages
from tools.websearch.pages import PageCache, PageSettings

WEB_DISABLED = "web search is disabled (search_provider=none)"
RERANK_POOL = 20  # first-stage candidates a reranker orders (at least top_k)


class WebApproval(Protocol):
    """Asked before a web search spends anything: a person's decision on searching
    ``queries`` with ``settings``, or ``None`` when no approval is needed (it may pause
    the run until the decision comes; see ``run.approval_interrupt``)."""

    def __call__(
        self,
        settings: WebSearchSettings,
        queries: list[str],
        /,
        *,
        hl: str | None,
        gl: str | None,
        num: int,
    ) -> WebSearchDecision | None: ...


@dataclass
class KBFound:
    """What a knowledge-base search found: each search (with its calibrated
    answerability), their hits as sources, or why there are none."""

    searches: list[Retrieval] = field(default_factory=list)
    sources: list[Source] = field(default_factory=list)
    status: Literal["ok", "empty", "unavailable"] = "ok"
    error: str = ""


@dataclass
class WebFound:
    """What a web search did: the results as sources, cost and upstream calls, the
    queries actually searched (a person may have edited them), or why nothing was."""

    status: Literal["ok", "disabled", "skipped", "not_configured", "failed"] = "ok"
    error: str = ""
    queries: list[str] = field(default_factory=list)
    edited: bool = False
    sources: list[Source] = field(default_factory=list)
    cost: float = 0.0
    calls: int = 0
    fetched_at: str = ""
    warnings: list[str] = field(default_factory=list)
    providers: str = ""
    cache_hits: int = 0
    pages_read: int = 0  # pages whose passages were added to their snippet
    pages_failed: int = 0  # pages that could not be read (reasons in ``warnings``)


@dataclass
class SearchService:
    """One run's searches, under the run's settings given as values (resolved once per
    run by the caller; nothing here reads the environment). ``kb`` and ``web_settings`` are
    called on each search (not now), so building the service opens nothing;
    ``web_settings`` returns ``None`` when web search is disabled."""

    kb: Callable[[], KnowledgeBase]
    web_settings: Callable[[], WebSearchSettings | None]
    approve: WebApproval | None = None
    cache: SearchCache | None = None
    read_pages: int = 0  # top web results whose pages are fetched and read (0: snippets)
    page_settings: PageSettings = field(
        default_factory=PageSettings
    )  # the run's (run.run_settings)
    page_cache: PageCache | None = None
    reader: Reader = field(default_factory=Reader.everyone)  # whose documents the KB shows

    async def search_kb(
        self,
        queries: Sequence[str],
        k: int,
        *,
        question: str | None = None,
        anchor: str | None = None,
        reranker: Reranker | None = None,
    ) -> KBFound:
        """Top ``k`` chunks per query (``anchor``: see ``KnowledgeBase.retrieve_many``);
        with a ``reranker``, the best ``k`` of a wider first stage. With the turn's
        ``question``, the hits carry the answerability they are evidence of for it
        (``tools.policy.confidence.evidence_from``, both graphs): a query made only of the
        question's words also searches the question (served from the knowledge base's
        per-run cache when it ran before) for the value its hits carry."""

        def run() -> KBFound:
            kb = self.kb()  # opening the store is blocking too
            first = k if reranker is None else max(RERANK_POOL, k)  # the first stage's k
            searches = self._retrieve(kb, list(queries), k, first, anchor, reranker)
            found = KBFound(searches, self._sources(kb, queries, searches, question, first, anchor))
            if not found.sources and kb.stats()["chunks"] == 0:
                found.status, found.error = "empty", KB_EMPTY_DETAIL
            return found

        try:
            return await asyncio.to_thread(run)  # Chroma and BM25 are blocking work
        except HybridRagError as exc:
            return KBFound(status="unavailable", error=kb_unavailable(exc))

    def _retrieve(
        self,
        kb: KnowledgeBase,
        queries: list[str],
        k: int,
        first: int,
        anchor: str | None,
        reranker: Reranker | None,
    ) -> list[Retrieval]:
        wide = kb.retrieve_many(queries, first, anchor=anchor, reader=self.reader)
        if reranker is None:
            return wide
        return [
            Retrieval(rerank_chunks(q, r.hits, reranker, k), r.evidence, r.answerability)
            for q, r in zip(queries, wide, strict=True)
        ]

    def _sources(
        self,
        kb: KnowledgeBase,
        queries: Sequence[str],
        searches: list[Retrieval],
        question: str | None,
        k: int,
        anchor: str | None,
    ) -> list[Source]:
        """The hits as sources, as evidence for ``question`` when it is given."""
        done = [
            KBSearch(q, r.answerability, [chunk_to_source(h, r.answerability) for h in r.hits])
            for q, r in zip(queries, searches, strict=True)
        ]
        if question is None:
            return [s for search in done for s in search.sources]  # type: ignore[misc]
        asked = {q.strip() for q in queries}
        if question.strip() not in asked and any(
            is_keyword_selection(q, question) for q in queries
        ):
            own = kb.retrieve_many([question], k, anchor=anchor, reader=self.reader)[0]
            done.append(KBSearch(question, own.answerability))  # its value, not its hits
        return evidence_from(done, question)

    async def search_web(
        self,
        queries: Sequence[str],
        *,
        hl: str | None,
        gl: str | None,
        num: int,
        top_k: int,
        announce: Callable[[list[str]], None] | None = None,
    ) -> WebFound:
        """Search ``queries`` (merged and re-ranked, cut to ``top_k``), after the person's
        approval when one is needed; ``announce`` hears the queries about to be searched."""
        wanted = list(queries)
        try:
            settings = self.web_settings()
        except HybridRagError as exc:
            return WebFound("failed", str(exc), wanted)
        decision = (
            self.approve(settings, wanted, hl=hl, gl=gl, num=num)
            if self.approve is not None and settings is not None
            else None
        )
        edited = bool(decision is not None and decision.queries)
        if decision is not None and decision.queries:
            wanted = list(decision.queries)
        if announce is not None:
            announce(wanted)
        if settings is None:
            return WebFound("disabled", WEB_DISABLED, wanted)
        if decision is not None and decision.action == "skip":
            return WebFound("skipped", SKIPPED_BY_USER, wanted)
        try:
            async with WebSearchClient(settings, cache=self.cache or default_cache()) as client:
                multi = await client.search_many(wanted, hl=hl, gl=gl, num=num, top_k=top_k)
        except WebSearchNotConfiguredError as exc:
            return WebFound("not_configured", str(exc), wanted, edited, calls=exc.calls)
        except (WebSearchError, HybridRagError) as exc:
            calls = exc.calls if isinstance(exc, WebSearchError) else 0
            return WebFound("failed", str(exc), wanted, edited, calls=calls)
        found = WebFound(
            queries=wanted,
            edited=edited,
            sources=[web_to_source(r) for r in multi.results],
            cost=multi.cost,
            calls=multi.calls,
            fetched_at=multi.fetched_at,
            warnings=list(multi.warnings),
            providers=",".join(sorted({r.provider for r in multi.responses})),
            cache_hits=sum(r.cache_hit for r in multi.responses),
        )
        if self.read_pages > 0 and found.sources:
            await self._read_pages(found, " ".join(dict.fromkeys(wanted)))
        return found

    async def _read_pages(self, found: WebFound, question: str) -> None:
        """Put the top results' best page passages before their snippets
        (``page_text``); a page that cannot be read keeps its snippet and leaves a
        warning."""
        top = found.sources[: self.read_pages]
        try:
            reads = await read_pages(
                [s["url"] for s in top], question, settings=self.page_settings,
                cache=self.page_cache,
            )  # fmt: skip
        except HybridRagError as exc:  # a misconfigured page reader: snippets only
            found.warnings.append(f"web pages not read: {exc}")
            return
        by_url: dict[str, PageRead] = {r.url: r for r in reads}
        sources: list[Source] = []
        for source in found.sources:
            read = by_url.get(source.get("url", ""))
            if read is not None and read.error:
                found.pages_failed += 1
                found.warnings.append(f"web page not read: {read.url}: {read.error}")
            if read is None or not read.passages:
                sources.append(source)
                continue
            found.pages_read += 1
            text = page_text(source.get("text", ""), read.passages)
            sources.append(
                {**source, "text": text, "snippet": source.get("text", ""), "page_read": True}
            )
        found.sources = sources
