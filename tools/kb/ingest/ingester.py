"""Ingestion: documents in, chunks embedded and written, versions committed.

The order of writes is the crash-safety protocol of ``tools.kb.store.chroma.chroma_registry``: new chunks
beside the old ones, one registry commit per batch, then the old chunks go. Unchanged
documents (same content hash) are skipped; embeddings are cached by text, so a rerun
after an interruption embeds only what it had not reached. What the versions, records
and chunks hold is ``chunk_records``'s; this module decides when they are written.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from itertools import islice
from pathlib import Path

from tools.errors import InputError
from tools.kb.embed.embedding_cache import EmbeddingCache, embed_with_cache
from tools.kb.embed.embeddings import EmbeddingModel
from tools.kb.ingest.chunk_records import chunk_records, version_of
from tools.kb.ingest.chunking import ChunkingOptions
from tools.kb.ingest.identity import under
from tools.kb.ingest.ingest_report import FileNote, IngestReport
from tools.kb.ingest.loaders import FileBytes, FileRef, SkippedFile, SourceDocument, read_file
from tools.kb.store.pending import PendingCleanup
from tools.kb.store.protocol import ChunkStore, DocRecord, Registry

ProgressFn = Callable[[int, int, str], None]
CHANGED_MEANWHILE = "changed by another writer while this file was embedded: not overwritten"


def _inner(progress: ProgressFn | None, done: int, total: int) -> Callable[[str], None] | None:
    """Progress inside a batch ("big.md: chunk 1,280/39,116"), against the file count."""
    if progress is None:
        return None
    return lambda item: progress(done, total, item)


class Ingester:
    """Writes documents into one knowledge base; callers serialise calls (the KB's lock)."""

    # Documents embedded and committed together: one registry write makes a whole
    # batch active, so a batch is the unit of crash safety as well as of embedding.
    batch_documents = 32
    slice_chunks = 256  # chunks embedded and written together (bounds vectors in memory)

    def __init__(
        self,
        *,
        registry: Registry,
        chunks: ChunkStore,
        model: EmbeddingModel,
        cache: EmbeddingCache,
        chunking: ChunkingOptions,
        collection: str,
        pending: PendingCleanup | None = None,
    ) -> None:
        self._pending = pending
        self._registry = registry
        self._chunks = chunks
        self._model = model
        self._cache = cache
        self._chunking = chunking
        self._collection = collection

    def ingest(
        self,
        docs: Sequence[SourceDocument | FileBytes | FileRef],
        report: IngestReport,
        progress: ProgressFn | None,
        expected: Mapping[str, str] | None = None,
        known: Mapping[str, DocRecord] | None = None,
    ) -> set[str]:
        """Ingest documents, or files read one at a time (a document file is parsed only
        when its version changed). Returns the doc_ids present afterwards (indexed or
        unchanged): a file that could not be read is skipped with its reason. ``expected``
        (doc_id -> the version seen before embedding outside the lock, "" none): a
        document committed otherwise since then is skipped, not overwritten. ``known``:
        the registry's records as the caller read them under the writer's lock."""
        # The records of these documents only: a one-file change costs one file, whatever
        # the registry's size (issue 44).
        self._finish_interrupted()
        registry = (
            dict(known)
            if known is not None
            else self._registry.records_of([d.doc_id for d in docs])
        )
        pending: list[SourceDocument] = []
        present: set[str] = set()
        for n, item in enumerate(docs):
            if progress:
                progress(n, len(docs), item.doc_id)
            doc: SourceDocument | FileBytes | SkippedFile = (
                read_file(item.path, item.doc_id, item.limits, item.via)
                if isinstance(item, FileRef)
                else item
            )
            if isinstance(doc, SkippedFile):
                report.skipped.append(doc)
                continue
            if isinstance(item, FileRef) and item.acl:
                doc = replace(doc, acl=item.acl)
            if self._unchanged(doc, registry, report, expected):
                present.add(doc.doc_id)
                continue
            loaded = doc.load() if isinstance(doc, FileBytes) else doc
            if isinstance(loaded, SkippedFile):
                report.skipped.append(loaded)
                continue
            report.notes.extend(FileNote(loaded.source, note) for note in loaded.notes)
            present.add(loaded.doc_id)
            pending.append(loaded)
            if len(pending) >= self.batch_documents:
                self._ingest_batch(pending, registry, report, _inner(progress, n, len(docs)))
                pending = []
        if pending:
            self._ingest_batch(
                pending, registry, report, _inner(progress, max(len(docs) - 1, 0), len(docs))
            )
        if progress:
            progress(len(docs), len(docs), "")
        return present

    def _unchanged(
        self,
        doc: SourceDocument | FileBytes,
        registry: dict[str, DocRecord],
        report: IngestReport,
        expected: Mapping[str, str] | None,
    ) -> bool:
        """Whether ``doc`` is not written: its version is the registry's (unchanged, its
        chunks not read: a crash's leftovers are found by the pending records), or another
        writer committed it after it was embedded (skipped)."""
        current = registry.get(doc.doc_id) or {}
        if current.get("version") == version_of(doc) and current.get("source") == doc.source:
            self._reroute(doc.doc_id, current, doc.via, registry)
            report.unchanged.append(doc.doc_id)
            return True
        seen = (expected or {}).get(doc.doc_id)
        if seen is not None and str(current.get("version") or "") != seen:
            report.skipped.append(SkippedFile(doc.source, CHANGED_MEANWHILE))
            return True
        return False

    def warm(self, docs: Sequence[SourceDocument], progress: Callable[[str], None] | None) -> None:
        """Embed the chunks of ``docs`` into the embedding cache, without the writer's
        lock: the commit under the lock then finds every vector cached, so one slow file
        holds no other writer behind it (issue 53, item 10). Writes nothing else."""
        if getattr(self._cache, "broken", False):
            return  # no cache to fill: the commit embeds under the lock, as before
        records = chunk_records(docs, "", {}, IngestReport(), progress, self._chunking)
        for part in iter(lambda: list(islice(records, self.slice_chunks)), []):
            embed_with_cache(self._model, [r.index_text for r in part], self._cache)
            if progress:
                progress(part[-1].progress())

    def prune(
        self,
        roots: Sequence[Path],
        seen: set[str],
        report: IngestReport,
        known: Mapping[str, DocRecord] | None = None,
    ) -> None:
        """Delete documents that came from under ``roots`` (resolved folders) and were not
        seen; documents of other folders are never touched. ``known``: the records read
        under the same writer's lock before this ingest (every document it committed was
        seen), so the registry is not read again."""
        listed = known.items() if known is not None else self._registry.pages()
        done = set(report.deleted)
        gone = [
            doc_id
            for doc_id, record in listed  # listed first: deleting moves pages
            if record.get("version")
            and doc_id not in seen
            and doc_id not in done
            and under(record, roots)
        ]
        for doc_id in gone:
            self.delete(doc_id)
            report.deleted.append(doc_id)

    def retire(self, doc_ids: Sequence[str], report: IngestReport) -> None:
        """Delete records that held a file now indexed under another doc_id (a store
        written before ``tools.kb.ingest.identity``); called after that file's commit, so a crash
        in between leaves the file twice (repaired by the next ingest), never missing."""
        for doc_id in doc_ids:
            with contextlib.suppress(InputError):  # already gone
                self.delete(doc_id)
                report.deleted.append(doc_id)

    def delete(self, doc_id: str) -> int:
        """Remove a document; returns the number of chunks removed."""
        record = self._registry.record(doc_id)
        if not record or not record.get("version"):
            raise InputError(
                f"no document with doc_id {doc_id!r} in collection {self._collection!r}"
            )
        # Tombstone first (one write): from here on readers see no version.
        self._registry.commit({doc_id: {**record, "version": ""}})
        self._chunks.delete_document(doc_id)
        self._registry.forget(doc_id)
        return int(record.get("chunks", 0))

    def _finish_interrupted(self) -> None:
        """Complete what a crash interrupted: deletions (tombstone written, chunks still
        there) and replacements (the documents the pending records name: chunks of a
        version never committed, or of the old one never removed)."""
        for doc_id in self._registry.tombstones():
            self._chunks.delete_document(doc_id)
            self._registry.forget(doc_id)
        named = self._pending.listed() if self._pending else []
        if not named:
            return
        records = self._registry.records_of(named)
        for doc_id in named:
            version = str(records.get(doc_id, {}).get("version") or "")
            if version:
                self._chunks.delete_other_versions(doc_id, version)
            elif doc_id not in records:  # never committed: its chunks are orphans
                self._chunks.delete_document(doc_id)
        if self._pending:
            self._pending.clear(named)

    def _reroute(
        self, doc_id: str, current: DocRecord, via: str, registry: dict[str, DocRecord]
    ) -> None:
        """An unchanged file reached by another route: record the route that owns it (the
        folder that prunes it) without re-embedding anything. Its own folder wins over a
        followed link, so ingesting the link's folder never takes the file from it."""
        recorded = str(current.get("via") or "")
        if via == recorded or (via and not recorded):
            return
        record: DocRecord = {**current, "via": via}
        self._registry.commit({doc_id: record})
        registry[doc_id] = record

    def _ingest_batch(
        self,
        docs: Sequence[SourceDocument],
        registry: dict[str, DocRecord],
        report: IngestReport,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        now = datetime.now(UTC).isoformat(timespec="seconds")
        commits: dict[str, DocRecord] = {}
        if self._pending:  # named before their chunks are written: see _finish_interrupted
            self._pending.mark(d.doc_id for d in docs)
        records = chunk_records(docs, now, commits, report, progress, self._chunking)
        # Embedded and written slice by slice, chunks made one document at a time: a
        # giant document never holds all its vectors, index texts and metadata at once,
        # each slice's embeddings are cached as soon as computed (an interrupted ingest
        # resumes there), and progress moves inside one file. The registry commit below
        # still makes the whole batch active in one write (crash safety unchanged).
        for part in iter(lambda: list(islice(records, self.slice_chunks)), []):
            vectors = embed_with_cache(self._model, [r.index_text for r in part], self._cache)
            self._chunks.write(
                [r.id for r in part], vectors, [r.body for r in part], [r.metadata for r in part]
            )
            if progress:
                progress(part[-1].progress())
        if commits:
            self._commit(commits, registry, report)
        if self._pending:
            self._pending.clear(d.doc_id for d in docs)

    def _commit(
        self, commits: dict[str, DocRecord], registry: dict[str, DocRecord], report: IngestReport
    ) -> None:
        """Make a batch active in one registry write, then remove its old versions."""
        self._registry.commit(commits)
        for doc_id, record in commits.items():
            previous = registry.get(doc_id)
            if previous and previous.get("version"):
                self._chunks.delete_other_versions(doc_id, record["version"])
                report.updated.append(doc_id)
            else:
                report.added.append(doc_id)
            registry[doc_id] = record
            report.chunks_written += record["chunks"]
