"""The knowledge base with its catalog and originals: what the document API, the sources'
syncs and the CLI read and change documents through.

Every read takes the caller's ``Reader``: a document the reader may not read does not
exist for them (``None``, never a different error). Writes are the knowledge base's own
(one writer across processes, one registry commit per document), then the catalog row.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

from tools.access.acl import ACL, Reader
from tools.errors import InputError
from tools.kb.documents.catalog import Catalog, DocumentRow
from tools.kb.documents.originals import Originals, read_no_links, suffix_of
from tools.kb.ingest.chunk_records import version_of
from tools.kb.ingest.formats import LoadLimits
from tools.kb.ingest.ingest_report import IngestReport
from tools.kb.ingest.loaders import (
    FileBytes,
    SkippedFile,
    SourceDocument,
    content_hash_of,
    read_file,
)
from tools.kb.knowledge_base import KnowledgeBase
from tools.kb.search.retrievers import readable_of
from tools.kb.store.protocol import DocRecord

StatusFn = Callable[[str, float], None]  # (file status, progress 0..1)


@dataclass(frozen=True)
class Item:
    """One document to add or replace, its original already stored."""

    doc_id: str
    path: str  # the name people know it by (shown in citations)
    blob: str  # Originals name
    sha256: str
    size: int
    acl: ACL
    origin: str  # "upload" or "source:<id>"
    owner: str = ""
    # An upload's compare-and-set: the owner its name had when it was checked ("" none);
    # another owner by the time it runs fails the file. None: no check.
    expected_owner: str | None = None


@dataclass(frozen=True)
class Original:
    """A document's original as served: a stored file, or the checked bytes of the file a
    CLI ingest read; ``problem`` says why there is none to serve."""

    name: str = ""
    path: Path | None = None
    data: bytes | None = None
    problem: str = ""


@dataclass(frozen=True)
class Outcome:
    status: str  # "done" (added, replaced or unchanged), "skipped" or "failed"
    reason: str = ""
    chunks: int = 0


def catalog_path(home: Path, collection: str) -> Path:
    return home / "catalog" / f"{collection}.sqlite"


class Library:
    """Documents of one knowledge base: add, replace, list, read, delete."""

    def __init__(self, kb: KnowledgeBase) -> None:
        self.kb = kb
        self.catalog = Catalog(catalog_path(kb.home, kb.config.collection))
        self.originals = Originals(kb.home / "originals")
        # Every active document's view and record, by path, for one (registry generation,
        # catalog version): a listing reads the registry once per change, not per request.
        self._listing: tuple[tuple[str, int], list[tuple[dict[str, Any], DocRecord]]] | None
        self._listing = None
        self._listing_lock = threading.Lock()

    def close(self) -> None:
        self.catalog.close()

    # -- writing ---------------------------------------------------------------------------

    def ingest(
        self, item: Item, limits: LoadLimits | None = None, status: StatusFn | None = None
    ) -> Outcome:
        """Parse, embed and commit one stored original as ``item.doc_id`` (a new version
        replaces the old one in one commit; the same bytes again change nothing)."""
        each = (lambda _doc_id, state, progress: status(state, progress)) if status else None
        return self.ingest_many([item], limits, each)[0]

    def ingest_many(
        self,
        items: Sequence[Item],
        limits: LoadLimits | None = None,
        status: Callable[[str, str, float], None] | None = None,
    ) -> list[Outcome]:
        """``ingest`` for several items at once: their chunks are embedded in shared
        batches (a model call per item costs ~4x more on CPU) and committed together by
        the knowledge base's batch rule. ``status`` gets (doc_id, state, progress)."""
        limits = limits or LoadLimits.from_env()
        outcomes: dict[str, Outcome] = {}
        docs: list[SourceDocument | FileBytes] = []
        known = self.kb.registry.records_of([item.doc_id for item in items])
        for item in items:
            if status:
                status(item.doc_id, "parsing", 0.0)
            doc = read_file(self.originals.path(item.blob), item.doc_id, limits)
            if not isinstance(doc, SkippedFile):
                doc = replace(doc, source=item.path, acl=item.acl)
            if isinstance(doc, FileBytes) and not _unchanged(doc, known.get(item.doc_id)):
                doc = doc.load()  # parsed now, in its bounded process, not under the writer's lock
            if isinstance(doc, SkippedFile):
                outcomes[item.doc_id] = Outcome("failed", doc.reason)
            else:
                docs.append(doc)

        def progress(done: int, total: int, note: str) -> None:
            doc_id, sep, where = note.rpartition(": chunk ")  # "doc: chunk 12/40"
            if status and sep:
                n, _, of = where.replace(",", "").partition("/")
                with contextlib.suppress(ValueError):
                    status(doc_id, "embedding", int(n) / max(int(of), 1))

        report = self._embed_then_commit(docs, known, progress) if docs else None
        skipped = {s.source: s.reason for s in report.skipped} if report else {}
        records = self.kb.registry.records_of([item.doc_id for item in items]) if docs else {}
        for item in items:
            if item.doc_id in outcomes:
                continue
            record = records.get(item.doc_id)
            if item.path in skipped:
                outcomes[item.doc_id] = Outcome("failed", skipped[item.path])
            elif not record or not record.get("version"):
                outcomes[item.doc_id] = Outcome("failed", "the document was not committed")
            else:
                self._record(item, record)
                outcomes[item.doc_id] = Outcome("done", chunks=int(record.get("chunks", 0)))
        return [outcomes[item.doc_id] for item in items]

    def _embed_then_commit(
        self,
        docs: Sequence[SourceDocument | FileBytes],
        known: dict[str, DocRecord],
        progress: Callable[[int, int, str], None],
    ) -> IngestReport:
        """Embed the changed documents before taking the writer's lock, then commit them
        under it from the embedding cache: one slow file no longer holds every other
        writer for as long as it embeds (issue 53, item 10: a 4 KB upload failed after
        600 s behind a 590 KB one). Committed only over the version seen here: a document
        another writer changed meanwhile is skipped with the reason, not overwritten."""
        changed = [
            d
            for d in docs
            if isinstance(d, SourceDocument) and not _unchanged(d, known.get(d.doc_id))
        ]
        self.kb.ingester.warm(changed, lambda note: progress(0, 1, note))
        seen = {d.doc_id: str(known.get(d.doc_id, {}).get("version") or "") for d in changed}
        return self.kb.ingest_documents(docs, progress=progress, expected=seen)

    def _record(self, item: Item, record: DocRecord) -> None:
        before = self.catalog.get(item.doc_id)
        self.catalog.put(
            DocumentRow(
                doc_id=item.doc_id,
                path=item.path,
                format=suffix_of(item.path).lstrip("."),
                owner=item.owner if before is None or not before.owner else before.owner,
                sha256=item.sha256,
                blob=item.blob,
                bytes=item.size,
                origin=item.origin,
                acl=",".join(item.acl),
                updated_at=str(record.get("ingested_at") or _now()),
            )
        )
        if before is not None and before.blob != item.blob:
            self._drop_blob(before.blob)

    def set_acl(self, doc_id: str, acl: ACL) -> Outcome:
        """Give a stored document a new access list: ingested again from its stored
        original with it, in one commit (its chunks rewritten, not embedded again), so
        both retrievers apply it from the next search. A source's documents take their
        source's list and a CLI ingest its ``--acl``: ``InputError`` saying so."""
        row = self.catalog.get(doc_id)
        if row is None:
            raise InputError("a document ingested by the command line takes its access "
                             "from there: hybrid-rag ingest PATH --acl ...")  # fmt: skip
        if row.origin != "upload":
            raise InputError(f"this document's access comes from its source ({row.origin}): "
                             "change the source's acl")  # fmt: skip
        item = Item(doc_id, row.path, row.blob, row.sha256, row.bytes, acl, row.origin, row.owner)
        return self.ingest(item)

    def delete(self, doc_id: str) -> int:
        """Remove a document from both retrievers, then its catalog row and original."""
        row = self.catalog.get(doc_id)
        try:
            chunks = self.kb.delete(doc_id)
        except InputError:
            if row is None:
                raise
            chunks = 0  # committed deletion, row left by a crash: finish it
        if row is not None:
            self.catalog.forget(doc_id)
            self._drop_blob(row.blob)
        return chunks

    def discard(self, blob: str) -> None:
        """Remove the stored original of a file that failed, unless a document or an
        unfinished job's file uses it."""
        self._drop_blob(blob)

    def _drop_blob(self, blob: str) -> None:
        if not self.catalog.blob_used(blob):
            self.originals.remove(blob)

    # -- reading ---------------------------------------------------------------------------

    def documents(self, reader: Reader) -> list[dict[str, Any]]:
        """Every document ``reader`` may read, by path."""
        return [dict(view) for view, record in self._all_documents() if reader.may_read(record)]

    def _all_documents(self) -> list[tuple[dict[str, Any], DocRecord]]:
        key = (self.kb.registry.generation(), self.catalog.version())
        with self._listing_lock:
            if self._listing is None or self._listing[0] != key:
                rows = self.catalog.rows()
                listing = [
                    (_view(doc_id, record, rows.get(doc_id)), record)
                    for doc_id, record in self.kb.registry.pages()  # paged: any number
                    if record.get("version")
                ]
                listing.sort(key=lambda pair: (pair[0]["path"], pair[0]["doc_id"]))
                self._listing = (key, listing)
            return self._listing[1]

    def document(self, doc_id: str, reader: Reader) -> dict[str, Any] | None:
        record = self.kb.registry.record(doc_id)
        if not record or not record.get("version") or not reader.may_read(record):
            return None
        return _view(doc_id, record, self.catalog.get(doc_id))

    def chunks(self, doc_id: str, reader: Reader) -> list[dict[str, Any]] | None:
        if self.document(doc_id, reader) is None:
            return None
        snap = self.kb.snapshot()
        found = [
            (int(snap.metadatas[i].get("chunk_index", 0)), snap.texts[i], snap.metadatas[i])
            for i in snap.by_document.get(doc_id, [])  # its chunks, not a walk over all
        ]
        return [
            {
                "index": index,
                "text": text,
                "page": m.get("page"),
                "page_end": m.get("page_end"),
                "sheet": m.get("sheet"),
                "heading": m.get("heading") or "",
            }
            for index, text, m in sorted(found, key=lambda c: c[0])
        ]

    def original(self, doc_id: str, reader: Reader) -> Original | None:
        """The original of a document ``reader`` may read (None: no such document). A
        document a CLI ingest read from a server path is served from that file only when
        its bytes, read without following any symbolic link, still hash to the indexed
        content hash: never another file put in its place (issue 53, item 9)."""
        if self.document(doc_id, reader) is None:
            return None
        row = self.catalog.get(doc_id)
        if row is not None:
            path = self.originals.path(row.blob)
            if path.is_symlink() or not path.is_file():
                return Original(problem="the original file of this document is not kept")
            return Original(PurePosixPath(row.path).name, path=path)
        record = self.kb.registry.record(doc_id) or {}
        source = Path(str(record.get("source", "")))
        if not source.is_absolute():
            return Original(problem="the original file of this document is not kept")
        data = read_no_links(source, LoadLimits.from_env().max_file_bytes)
        if isinstance(data, str):
            return Original(problem=f"the original file is not served: {data}")
        if content_hash_of(data, source.suffix) != record.get("content_hash"):
            return Original(problem="the original file is not served: the file on the "
                            "server no longer holds the indexed version")  # fmt: skip
        return Original(source.name, data=data)

    def stats(self, reader: Reader) -> dict[str, Any]:
        """``hybrid-rag kb stats``'s numbers over the documents ``reader`` may read."""
        snap = self.kb.snapshot()
        visible = readable_of(snap, reader).mask  # the columns, not a dict per chunk
        languages = snap.languages_in(visible)
        docs = self.documents(reader)
        return {
            "collection": self.kb.config.collection,
            "embedding_model": self.kb.model.model_id,
            "documents": len(docs),
            "chunks": int(visible.sum()),
            "languages": languages,
            "restricted_documents": sum(1 for d in docs if d["acl"] != "public"),
        }


def _view(doc_id: str, record: DocRecord, row: DocumentRow | None) -> dict[str, Any]:
    """A document as the API lists it."""
    source = str(record.get("source", ""))
    path = row.path if row else doc_id
    name = PurePosixPath(path).name
    return {
        "doc_id": doc_id,
        "path": path,
        "title": str(record.get("title") or "") or PurePosixPath(name).stem or name,
        "format": row.format if row else suffix_of(source).lstrip("."),
        "source": row.origin if row else "cli",
        "acl": str(record.get("acl") or "") or "public",
        "owner": row.owner if row else "",
        "chunks": int(record.get("chunks", 0)),
        "updated_at": str(record.get("ingested_at", "")),
        "bytes": row.bytes if row else _size(source),
    }


def _unchanged(doc: FileBytes | SourceDocument, record: DocRecord | None) -> bool:
    """Whether the knowledge base already holds this version of the file (the ingest
    then skips it without parsing)."""
    return (
        record is not None
        and record.get("version") == version_of(doc)
        and record.get("source") == doc.source
    )


def _size(source: str) -> int | None:
    with contextlib.suppress(OSError):
        if Path(source).is_absolute():
            return Path(source).lstat().st_size  # a link's own: never the size it points at
    return None


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
