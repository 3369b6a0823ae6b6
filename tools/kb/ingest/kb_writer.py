"""The writes of one knowledge base: its one writer, and the flow of an ingest under it.

``KbWriter`` is what ``KnowledgeBase`` delegates every write to. It takes the writer's
lock, across processes (``tools.kb.store.writer_lock``) then across the instance's
threads, and runs an ingest's steps in their order under it: the named files found and
given their doc_ids (``identity``) with their access lists, read and committed by the
``Ingester``, then the aliases of a file retired and a folder's vanished files pruned.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from tools.access.acl import ACL, FolderRules
from tools.kb.embed.embedding_cache import EmbeddingCache
from tools.kb.embed.embeddings import EmbeddingModel
from tools.kb.ingest.chunking import ChunkingOptions
from tools.kb.ingest.formats import LoadLimits
from tools.kb.ingest.identity import aliases, assign_doc_ids, find_files
from tools.kb.ingest.ingest_report import IngestReport
from tools.kb.ingest.ingester import Ingester, ProgressFn
from tools.kb.ingest.loaders import FileBytes, FileRef, SourceDocument
from tools.kb.store.opened_store import OpenedStore
from tools.kb.store.pending import PendingCleanup
from tools.kb.store.writer_lock import lock_path, writer_lock
from tools.settings import write_lock_timeout


class KbWriter:
    """Every write to one opened store; ``lock`` is the knowledge base's (writers and
    snapshot rebuilds), ``lock_dir`` where the writers' lock files live."""

    def __init__(
        self,
        *,
        store: OpenedStore,
        model: EmbeddingModel,
        cache: EmbeddingCache,
        lock: contextlib.AbstractContextManager[Any],
        lock_dir: Path,
        chunking: ChunkingOptions,
        collection: str,
    ) -> None:
        self._store = store
        self._lock = lock
        self._collection = collection
        self._lock_file = lock_path(lock_dir, store.describe(), collection)
        self.ingester = Ingester(
            registry=store.registry,
            chunks=store.chunks,
            model=model,
            cache=cache,
            chunking=chunking,
            collection=collection,
            pending=PendingCleanup(self._lock_file.with_suffix(".pending")),
        )

    @contextlib.contextmanager
    def writing(self, progress: ProgressFn | None = None) -> Iterator[None]:
        """The one writer of this knowledge base: across processes (``writer_lock``),
        then across this instance's threads (taken second, so searches here go on while
        another process's ingest is awaited)."""
        waiting = (lambda note: progress(0, 1, note)) if progress else None
        what = f"knowledge base {self._collection!r} ({self._store.describe()})"
        with (
            writer_lock(self._lock_file, timeout=write_lock_timeout(), what=what, waiting=waiting),
            self._lock,
            self._store.writing(),
        ):
            self._store.follow_writers()  # never write through a vector index older than the store
            yield

    def ingest(
        self,
        paths: Iterable[str | os.PathLike[str]],
        *,
        prune: bool,
        progress: ProgressFn | None,
        limits: LoadLimits | None,
        follow_links: bool,
        acl: ACL,
    ) -> IngestReport:
        """Named files and folders in (``KnowledgeBase.ingest`` says what each option does)."""
        started = time.perf_counter()
        report = IngestReport()
        limits = limits or LoadLimits.from_env()
        path_list = [Path(p) for p in paths]
        # find_files raises InputError for a missing path before anything is written.
        found, report.skipped = find_files(path_list, follow_links=follow_links)
        rules = FolderRules(acl)
        access = {f.path: rules.acl_for(f.path) for f in found}  # a bad .acl: before writing
        with self.writing(progress):
            records = self._store.registry.records()
            assigned = assign_doc_ids(found, records)
            files = [
                FileRef(f.path, doc_id, limits, f.via, access[f.path]) for f, doc_id in assigned
            ]
            present = self.ingester.ingest(files, report, progress, known=records)
            stale = aliases([a for a in assigned if a[1] in present], records)
            self.ingester.retire(stale, report)  # after the commit: see Ingester.retire
            if prune:
                roots = [p.resolve() for p in path_list if p.is_dir()]
                self.ingester.prune(roots, present, report, records)
        report.seconds = time.perf_counter() - started
        return report

    def ingest_documents(
        self,
        docs: Sequence[SourceDocument | FileBytes],
        *,
        progress: ProgressFn | None,
        expected: Mapping[str, str] | None,
    ) -> IngestReport:
        """Documents that do not come from named files (``KnowledgeBase.ingest_documents``)."""
        started = time.perf_counter()
        report = IngestReport()
        with self.writing(progress):
            self.ingester.ingest(docs, report, progress, expected)
        report.seconds = time.perf_counter() - started
        return report

    def delete(self, doc_id: str) -> int:
        """Remove a document; returns the chunks removed."""
        with self.writing():
            return self.ingester.delete(doc_id)

    def drop(self, forget: Callable[[], None]) -> None:
        """Delete both collections, then ``forget`` what was derived from them (the
        snapshots), under the same lock."""
        with self.writing():
            self._store.drop()
            forget()
