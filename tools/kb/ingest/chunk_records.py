"""What an ingest writes of a document: its version, its registry record and its chunks'
records (ids, the text embedded, the metadata the searches filter and show).

The ``Ingester`` decides when they are written; this module decides what they hold. The
version (``version_of``) is also what the document API compares to skip an unchanged
upload (``tools.kb.documents.library``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from tools.access.acl import acl_metadata
from tools.kb.ingest.chunking import ChunkingOptions, chunk_document
from tools.kb.ingest.ingest_report import IngestReport
from tools.kb.ingest.loaders import SkippedFile, SourceDocument
from tools.kb.ingest.titles import chosen_title
from tools.kb.store.protocol import DocRecord
from tools.text import detect_language


class Versioned(Protocol):
    @property
    def content_hash(self) -> str: ...
    @property
    def extraction(self) -> str: ...
    @property
    def acl(self) -> tuple[str, ...]: ...


def version_of(doc: Versioned) -> str:
    """The content hash; for documents, of the bytes together with the extraction tag
    (loader revision and bounds), so a better loader re-extracts unchanged files; with
    the access list when there is one, so a changed ACL rewrites the chunks' metadata
    (their embeddings come from the cache). A public text file keeps its old version."""
    if not doc.extraction and not doc.acl:
        return doc.content_hash[:16]
    acl = f":acl={','.join(doc.acl)}" if doc.acl else ""
    return hashlib.sha256(f"{doc.content_hash}:{doc.extraction}{acl}".encode()).hexdigest()[:16]


@dataclass(frozen=True)
class ChunkRecord:
    """One chunk on its way to the store, and where it stands in its document."""

    id: str
    body: str
    index_text: str
    metadata: dict[str, Any]
    doc_id: str
    number: int  # 1-based
    of: int

    def progress(self) -> str:
        return f"{self.doc_id}: chunk {self.number:,}/{self.of:,}"


def chunk_records(
    docs: Sequence[SourceDocument],
    now: str,
    commits: dict[str, DocRecord],
    report: IngestReport,
    progress: Callable[[str], None] | None,
    chunking: ChunkingOptions,
) -> Iterator[ChunkRecord]:
    """The chunks of ``docs``, one document chunked at a time; each document's registry
    record goes into ``commits`` as it is chunked."""
    for doc in docs:
        if progress:
            progress(f"{doc.doc_id}: chunking")
        version = version_of(doc)
        chunks = chunk_document(doc.text, markdown=doc.is_markdown, options=chunking)
        if not chunks:
            report.skipped.append(SkippedFile(doc.source, "no text after chunking"))
            continue
        fmt = doc.extraction.split(":", 1)[0]
        title = chosen_title(doc.text, markdown=doc.is_markdown, fmt=fmt, metadata=doc.title)
        commits[doc.doc_id] = {
            "version": version,
            "content_hash": doc.content_hash,
            "source": doc.source,
            **({"via": doc.via} if doc.via else {}),
            **({"acl": ",".join(doc.acl)} if doc.acl else {}),
            "chunks": len(chunks),
            "ingested_at": now,
            "title": title,
        }
        for c in chunks:
            yield ChunkRecord(
                id=f"{doc.doc_id}#{version}#{c.chunk_index:05d}",
                body=c.text,
                index_text=c.index_text(),
                metadata={
                    "doc_id": doc.doc_id,
                    "source": doc.source,
                    "heading": c.heading,
                    "chunk_index": c.chunk_index,
                    "total_chunks": c.total_chunks,
                    "content_hash": doc.content_hash,
                    "version": version,
                    "ingested_at": now,
                    "is_table": c.is_table,
                    "lang": detect_language(c.text),
                    **c.location(),  # page, page_end, sheet: only those known
                    **acl_metadata(doc.acl),  # who may read it: the searches filter
                    **({"doc_title": title} if title else {}),  # shown, never indexed
                },
                doc_id=doc.doc_id,
                number=c.chunk_index + 1,
                of=len(chunks),
            )
