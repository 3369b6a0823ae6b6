"""The one protocol of a store, whichever backend keeps it (``chroma/``, ``postgres/``).

A knowledge base is two things in a store: the chunks (:class:`ChunkStore`: vectors,
texts and metadata keyed by ``doc_id#version#index``) and the document registry
(:class:`Registry`: which version of each document is active). Crash safety of an
update (ingest of a changed document ``d``, old version ``v1``, new ``v2``):

1. the chunks of ``v2`` are written beside those of ``v1`` (ids carry the version);
2. commit: one registry write sets ``d -> v2`` and a new generation;
3. the chunks of ``d`` whose version is not ``v2`` are deleted.

Readers only use chunks whose version is the registry's active one, so a crash before 2
leaves ``v1`` fully in force, after 2 leaves ``v2``; never a mix, never nothing. Every
commit numbers itself (``seq``), so :meth:`Registry.changes` reads only what changed
after a number a reader has seen. Both backends subclass these protocols (their shared
methods are here) and raise the same errors for a missing or mismatched knowledge base.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypedDict

import numpy as np

from tools.errors import ConfigError, EmbeddingMismatchError, InputError
from tools.kb.embed.embeddings import spec_for_model_id

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{1,500}[A-Za-z0-9]$")
REGISTRY_SUFFIX = "-docs"  # the registry's name beside the chunks' (Chroma's collection)
READ_PAGE = 2000  # chunks per read when reading the whole store
HISTORY_KEPT = 1000  # the newest commits' (seq, generation), kept on the generation record
# Records per read: embedded Chroma binds one SQL variable per id it returns, and SQLite
# refuses more than 32,766 in one statement ("too many SQL variables"), so a registry of
# more documents than that could not be read whole.
RECORD_PAGE = 5000


@dataclass(frozen=True)
class StoredChunk:
    """One chunk as read back from the store."""

    chunk_id: str
    text: str
    metadata: dict[str, Any]
    vector: Any = None  # its embedding (a sequence of floats), when read with it


class DocRecord(TypedDict, total=False):
    """The registry's record of one document."""

    version: str  # the first 16 hex digits of the content hash; "" marks a tombstone
    content_hash: str
    source: str  # absolute path of the file, or the corpus name for API documents
    via: str  # the symbolic link under the ingested folder that reached the file, or ""
    acl: str  # who may read it, comma-separated principals (tools.access.acl); "" public
    chunks: int
    ingested_at: str  # ISO 8601, UTC
    title: str  # its metadata title or first heading (tools.kb.ingest.titles), or ""
    seq: int  # the commit that wrote it (``Registry.changes``)


@dataclass(frozen=True)
class RegistryChanges:
    """What :meth:`Registry.changes` read."""

    seq: int  # the sequence number the reader is now at
    records: dict[str, DocRecord]  # changed records; a removed document as a tombstone
    complete: bool  # ``records`` is the whole registry (a document not in it is gone)
    generation: str = ""  # the generation at ``seq`` (read with it)


class ChunkStore(Protocol):
    """The chunks: every read and write of them (version-agnostic except where said)."""

    # Called when a search finds the store changed under it (another process committed
    # between the generation check and the search): the owner reopens it, and the
    # search is tried once more.
    on_stale: Callable[[], None] | None

    def write(
        self,
        ids: Sequence[str],
        vectors: Sequence[Sequence[float]],
        texts: Sequence[str],
        metadatas: Sequence[dict[str, Any]],
    ) -> None: ...

    def delete_other_versions(self, doc_id: str, version: str) -> None: ...

    def delete_document(self, doc_id: str) -> None: ...

    def scan(self) -> Iterator[StoredChunk]: ...

    def document_chunks(self, doc_ids: Sequence[str]) -> Iterator[StoredChunk]: ...

    def nearest(
        self,
        vector: np.ndarray,
        n: int,
        where: dict[str, Any] | None,
        ids: Sequence[str] | None = None,
    ) -> list[tuple[str, float]]: ...

    def vectors(self, ids: Sequence[str]) -> tuple[list[str], np.ndarray]: ...

    def count(self) -> int: ...

    def cosines(self, ids: Sequence[str], vector: np.ndarray) -> dict[str, float]:
        """Cosine similarity of ``vector`` to the stored vectors of ``ids``."""
        found, mat = self.vectors(ids)
        if not found:
            return {}
        q = vector / (np.linalg.norm(vector) or 1.0)
        norms = np.linalg.norm(mat, axis=1)
        norms[norms == 0] = 1.0
        return {cid: float(cos) for cid, cos in zip(found, (mat @ q) / norms, strict=True)}


class Registry(Protocol):
    """The document registry, read and committed as one unit."""

    written: str  # the generation this object committed last

    def pages(self, where: dict[str, Any] | None = None) -> Iterator[tuple[str, DocRecord]]: ...

    def changes(self, after: int | None, generation: str | None = None) -> RegistryChanges: ...

    def records_of(self, doc_ids: Sequence[str]) -> dict[str, DocRecord]: ...

    def tombstones(self) -> list[str]: ...

    def record(self, doc_id: str) -> DocRecord | None: ...

    def generation(self) -> str: ...

    def commit(self, records: Mapping[str, DocRecord]) -> None: ...

    def forget(self, doc_id: str) -> None: ...

    def records(self) -> dict[str, DocRecord]:
        """Every document's record, tombstones included (read page by page)."""
        return dict(self.pages())


def active_versions(records: Mapping[str, DocRecord]) -> dict[str, str]:
    """``doc_id -> version`` of the documents readers may see (tombstones excluded)."""
    return {d: str(r["version"]) for d, r in records.items() if r.get("version")}


def validate_collection_name(name: str) -> str:
    if not _NAME_RE.match(name) or len(name) + len(REGISTRY_SUFFIX) > 512:
        raise ConfigError(
            f"invalid collection name {name!r}: use 3-500 characters of letters, digits, "
            "'.', '_' or '-', starting and ending with a letter or digit"
        )
    return name


def no_collection(name: str, where: str, existing: Sequence[str] = ()) -> InputError:
    listed = f"existing: {', '.join(existing)}" if existing else "nothing ingested yet"
    return InputError(
        f"no knowledge base (collection) {name!r} in {where}; {listed}. "
        f"'hybrid-rag ingest PATH --collection {name}' creates it"
    )


def _reopen_hint(stored_model: str) -> str:
    # The default local model changed from USE to e5: old knowledge bases must stay openable.
    spec = spec_for_model_id(stored_model)
    return f"To open it as it is, set HYBRID_RAG_EMBEDDING={spec}. " if spec else ""


def model_mismatch(
    name: str, stored_model: Any, stored_dimension: Any, model_id: str, dimension: int
) -> EmbeddingMismatchError:
    """The one wording of "built with another embedding model" (Chroma and PostgreSQL)."""
    return EmbeddingMismatchError(
        f"collection {name!r} was built with embedding model "
        f"{stored_model!r} (dimension {stored_dimension}); "
        f"it cannot be opened with {model_id!r} (dimension {dimension}). "
        + _reopen_hint(str(stored_model))
        + "Use another collection name, or delete this one and re-ingest."
    )
