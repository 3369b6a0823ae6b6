"""The run's :class:`~tools.answer.search_service.SearchService`, built from the run's
view (``run.run_view.RunView``): the shared knowledge base, the web-search settings and
the approval rule. The state graph's retrieval nodes and the agent's tools search
through it."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from run.approval_interrupt import tool_approval
from run.resources import web_settings
from run.run_view import RunView
from tools.answer.search_service import SearchService
from tools.errors import HybridRagError, kb_unavailable

if TYPE_CHECKING:
    from run.context import Context


def locale_setting(ctx: Context) -> tuple[str | None, str | None]:
    """The context's ``hl``/``gl`` for a search: ``None`` for 'auto', which the search
    then takes from the query's language (``tools.websearch.snippets.search_locale``)."""
    return (None if ctx.hl == "auto" else ctx.hl, None if ctx.gl == "auto" else ctx.gl)


def search_service(run: RunView) -> SearchService:
    """Searches under the run's context for its reader with its settings
    (``run.run_settings``); a web search first asks a person when ``approve_web_search``
    says so (not when the turn already ``web_skipped``; once skipped in this step, later
    searches are skipped without asking)."""
    settings = run.settings
    return SearchService(
        kb=run.kb,
        web_settings=lambda: web_settings(settings),
        approve=tool_approval(run),
        cache=settings.cache,
        read_pages=run.context.read_pages,
        page_settings=settings.pages,
        reader=run.reader,
    )


def web_available(run: RunView) -> bool:
    """Whether a web search can run at all (a provider configured, not disabled): the
    planner and the agent's tool list are told, so no route or call goes to a source that
    is off (issue 56: the planner sent questions to a disabled web and never read the KB)."""
    settings = run.settings
    web = settings.web
    return settings.web_problem is None and web is not None and web.is_configured


async def kb_probe(run: RunView, question: str) -> tuple[float, list[str]]:
    """The router's "does the KB answer this?" (``KnowledgeBase.probe``, off the event
    loop) for both graphs, over the documents the caller may read; an unavailable KB
    probes 0.0 with its warning."""
    reader = run.reader
    try:
        return await asyncio.to_thread(lambda: run.kb().probe(question, reader=reader)), []
    except HybridRagError as exc:
        return 0.0, [kb_unavailable(exc)]
