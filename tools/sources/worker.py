"""Syncs on schedule: one process (``hybrid-rag sources worker``) that syncs every source
whose schedule is due, one source at a time.

A worker rather than LangGraph crons: a cron starts a *graph run* on a thread, while a
sync is knowledge-base maintenance with no question, state or thread; it would need a
pseudo-graph, and would run only while the LangGraph server runs (and on each of its
replicas). The worker runs beside the server or without one (the CLI's own machine),
writes under the same writer lock, and the server searches its commits by the next
question (``KnowledgeBase._follow_writers``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from tools.errors import HybridRagError
from tools.kb.documents.library import Library
from tools.sources.model import LastSync, Source, SourceStore
from tools.sources.sync import sync

log = logging.getLogger("hybrid_rag.sources")
POLL_S = 30.0  # how often the worker looks for due sources


def run_due(
    library: Library, store: SourceStore, report: Callable[[Source, LastSync], None]
) -> int:
    """Sync every source that is due now; returns how many were synced."""
    done = 0
    for source in store.due():
        try:
            result = sync(library, source)
        except HybridRagError as exc:  # e.g. already being synced by someone else
            log.warning("source %s: %s", source.id, exc)
            continue
        store.record(source.id, result)
        report(source, result)
        done += 1
    return done


def run_worker(
    library: Library,
    store: SourceStore,
    report: Callable[[Source, LastSync], None],
    *,
    passes: int = 0,
    poll_s: float = POLL_S,
) -> None:
    """Sync due sources every ``poll_s`` seconds; ``passes`` > 0 stops after that many
    passes (0: until the process is stopped)."""
    n = 0
    while passes <= 0 or n < passes:  # bounded by ``passes``, or by the process's life
        run_due(library, store, report)
        n += 1
        if passes <= 0 or n < passes:
            time.sleep(poll_s)
