"""Long-lived resources shared by the runs of one process, opened on first use.

A knowledge base (Chroma client + BM25 snapshot) is expensive to open, so one
instance per configuration is kept and shared by all runs and threads. Web search
clients hold an event-loop-bound ``httpx.AsyncClient``, so each run opens its own,
while all of them share the process-wide search cache.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import TYPE_CHECKING

from run.run_settings import RunSettings
from tools.errors import HybridRagError
from tools.kb.knowledge_base import KBConfig, KnowledgeBase
from tools.websearch import WebSearchSettings

if TYPE_CHECKING:
    from run.context import Context

_lock = threading.Lock()
_kbs: dict[KBConfig, KnowledgeBase] = {}


def kb_config(ctx: Context, settings: RunSettings) -> KBConfig:
    """The context's knowledge base, in the run's data home. With no ``chroma_host`` in the
    context, the process's ``$CHROMA_HOST`` / ``$CHROMA_PORT`` (read by ``prepare``) name
    the Chroma server (how a replica of the LangGraph server is pointed at the shared
    one), else Chroma is embedded."""
    host, port = ctx.chroma_host or None, ctx.chroma_port
    if host is None:
        if isinstance(settings.chroma, HybridRagError):
            raise settings.chroma
        if settings.chroma[0]:
            host, port = settings.chroma[0], settings.chroma[1] or port
    # PostgreSQL: the context's URLs, else (no Chroma host in the context) the process's
    # $HYBRID_RAG_KB_DATABASE_URL / $HYBRID_RAG_KB_READ_URLS; both it and $CHROMA_HOST set
    # is a ConfigError (KBConfig).
    database_url, read_urls = ctx.kb_database_url, ctx.kb_read_urls.split(",")
    if database_url:
        host = None
    elif not ctx.chroma_host:
        database_url, read_urls = settings.kb_database[0], list(settings.kb_database[1])
    return KBConfig(
        home=settings.home,
        collection=ctx.collection,
        embedding=ctx.embedding,
        chroma_host=host,
        chroma_port=port,
        database_url=database_url,
        read_urls=tuple(u for u in read_urls if u.strip()),
        # A run reads: a missing collection (nothing ingested yet, or a mistyped name) is
        # an InputError the nodes turn into a warning, never a new empty collection that
        # would also pin the embedding model before the first ingest chose one.
        create=False,
    )


def get_kb(ctx: Context, settings: RunSettings, *, create: bool = False) -> KnowledgeBase:
    """The shared knowledge base for this configuration (opened once).

    Blocking (it may open the store): call it off the event loop. A collection that does
    not exist yet is an ``InputError`` and nothing is kept, so the first run after an
    ingest opens it; a writer (the document API) passes ``create`` and shares the instance
    with the runs, so they see its commits at once."""
    config = kb_config(ctx, settings)
    if create:
        config = replace(config, create=True)
    with _lock:
        kb = _kbs.get(config)
        if kb is None:
            kb = _kbs[config] = KnowledgeBase(config)
        return kb


def register_kb(kb: KnowledgeBase) -> None:
    """Use an already-open knowledge base for its configuration (tests, embedding apps).

    Runs look a KB up by a configuration whose data home is resolved (``RunSettings``), so
    one opened with the default home is registered under the home it opened."""
    key = kb.config if kb.config.home is not None else replace(kb.config, home=kb.home)
    with _lock:
        _kbs[key] = kb


def close_all() -> None:
    with _lock:
        for kb in _kbs.values():
            kb.close()
        _kbs.clear()


def web_settings(settings: RunSettings) -> WebSearchSettings | None:
    """This run's search settings (``run.run_settings``: the environment read once per run);
    None when disabled."""
    if settings.web_problem is not None:
        raise settings.web_problem
    return settings.web
