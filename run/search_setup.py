"""The run's :class:`~tools.answer.search_service.SearchService`, built from the run's
context and settings: the shared knowledge base, the web-search settings and the approval
rule. The state graph's retrieval nodes and the agent's tools search through it, reached
through their run's view (``run.run_view.RunView.search``)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from run.approval_interrupt import tool_approval
from run.resources import get_kb, web_settings
from run.run_settings import RunSettings
from tools.access.acl import Reader
from tools.answer.search_service import SearchService
from tools.errors import HybridRagError, kb_unavailable

if TYPE_CHECKING:  # types only: at run time nodes never import graph/
    from run.context import Context


def locale_setting(ctx: Context) -> tuple[str | None, str | None]:
    """The context's ``hl``/``gl`` for a search: ``None`` for 'auto', which the search
    then takes from the query's language (``tools.websearch.snippets.search_locale``)."""
    return (None if ctx.hl == "auto" else ctx.hl, None if ctx.gl == "auto" else ctx.gl)


def search_service(
    ctx: Context, settings: RunSettings, reader: Reader, *, web_skipped: bool
) -> SearchService:
    """Searches under ``ctx`` for ``reader`` with the run's settings (``run.run_settings``);
    a web search first asks a person when ``approve_web_search`` says so (not when the
    turn already ``web_skipped``; once skipped in this step, later searches are skipped
    without asking)."""
    return SearchService(
        kb=lambda: get_kb(ctx, settings),
        web_settings=lambda: web_settings(settings),
        approve=tool_approval(ctx, settings, web_skipped=web_skipped),
        cache=settings.cache,
        read_pages=ctx.read_pages,
        page_settings=settings.pages,
        reader=reader,
    )


async def kb_probe(
    ctx: Context, settings: RunSettings, reader: Reader, question: str
) -> tuple[float, list[str]]:
    """The router's "does the KB answer this?" (``KnowledgeBase.probe``, off the event
    loop) for both graphs, over the documents the caller may read; an unavailable KB
    probes 0.0 with its warning."""
    try:
        kb = get_kb
        return await asyncio.to_thread(lambda: kb(ctx, settings).probe(question, reader=reader)), []
    except HybridRagError as exc:
        return 0.0, [kb_unavailable(exc)]
