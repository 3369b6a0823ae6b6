"""The Chroma store: embedded by default, a ``chroma run`` server when a host is set.

Two collections make one knowledge base:

* ``<name>`` holds the chunks (vectors, text, metadata). Its metadata records the
  embedding model id and dimension; opening it with another model is refused.
* ``<name>-docs`` is the document registry: one record per ``doc_id`` naming the
  version (content hash) that is *active*, plus a ``__generation__`` record that
  changes whenever the active set changes. A document's registry record and the
  generation are written by one ``upsert`` call, which Chroma applies as one
  write; that single write is the commit point of an ingest (see
  ``tools.kb.store.chroma.chroma_registry``).

``ChromaChunkStore`` is every read and write of the chunk collection; ``StoreGuard`` turns
whatever the Chroma client raises into a ``StoreError`` that names the step.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import chromadb
import httpx
import numpy as np
from chromadb.api import ClientAPI
from chromadb.api.models.Collection import Collection

from tools.errors import StoreError
from tools.kb.store.chroma.chroma_pages import STORED, read_pages
from tools.kb.store.protocol import (
    REGISTRY_SUFFIX,
    ChunkStore,
    StoredChunk,
    model_mismatch,
    no_collection,
    validate_collection_name,
)
from tools.kb.store.store_deadline import DeadlineTransport, bounded_timeout
from tools.settings import store_timeout

STORE_FILE = "chroma.sqlite3"  # embedded Chroma's database, in the store's folder
WRITE_PAGE = 1000  # chunks per upsert: bounded request bodies for a Chroma server
STALE_INDEX = "Error finding id"  # embedded Chroma's vector index is older than its store
T = TypeVar("T")


@dataclass(frozen=True)
class StoreLocation:
    """Embedded at ``path``, or a server at ``host:port`` when ``host`` is set."""

    path: Path
    host: str | None = None
    port: int = 8000

    def describe(self) -> str:
        if self.host:
            return f"Chroma server at {self.host}:{self.port}"
        return f"embedded Chroma at {self.path}"


def open_client(location: StoreLocation) -> ClientAPI:
    settings = chromadb.Settings(anonymized_telemetry=False)
    if location.host:
        timeout = bounded_timeout(store_timeout())
        where = f"{location.host}:{location.port}"
        try:
            # chromadb's constructor already sends requests, with no time limit: ask the
            # server once ourselves, bounded, before handing it to chromadb.
            httpx.get(f"http://{where}/api/v2/heartbeat", timeout=timeout)
            client = chromadb.HttpClient(host=location.host, port=location.port, settings=settings)
            _limit_requests(client, timeout)
            client.heartbeat()
        except httpx.TimeoutException as exc:
            raise StoreError(
                f"the Chroma server at {where} did not answer within {timeout:g} s "
                "(HYBRID_RAG_STORE_TIMEOUT)"
            ) from exc
        except Exception as exc:  # chromadb raises several unrelated types here
            raise StoreError(
                f"cannot reach the Chroma server at {where}: {type(exc).__name__}"
            ) from exc
        return client
    try:
        location.path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a file in its place, or no permission
        raise StoreError(
            f"cannot create the embedded Chroma directory {location.path}: "
            f"{exc.strerror or type(exc).__name__}"
            + (" (a file is in the way)" if location.path.is_file() else "")
        ) from exc
    check_intact(location.path)  # before Chroma: its Rust core panics on a damaged file
    try:
        return chromadb.PersistentClient(path=str(location.path), settings=settings)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # a Rust panic (pyo3's PanicException) is not an Exception
        check_intact(location.path)
        raise StoreError(f"cannot open embedded Chroma at {location.path}: {exc}") from exc


def check_intact(folder: Path) -> None:
    """``StoreError`` ("knowledge base unavailable: damaged store at …") when the embedded
    store's database fails SQLite's structural check (overwritten or torn pages): said once
    and plainly, where Chroma would panic in Rust on every command. Read-only, and linear in
    the file's size (milliseconds for a few megabytes), once per opening."""
    path = folder / STORE_FILE
    if not path.is_file():
        return
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            row = db.execute("PRAGMA quick_check(1)").fetchone()
        problem = None if row and row[0] == "ok" else " ".join(str(row and row[0]).split())
    except sqlite3.DatabaseError as exc:  # "file is not a database", "malformed", ...
        problem = str(exc)
    if problem:
        raise StoreError(
            f"knowledge base unavailable: damaged store at {path} ({problem[:160]}). Restore "
            "the data home from a backup, or move it aside and ingest the documents again "
            "(docs/FAULTS.md)"
        )


def reopen_client(location: StoreLocation) -> ClientAPI:
    """A new client of embedded Chroma that reads the store as it is on disk now.

    chromadb keeps one system per path for the process, whose vector index stays in
    memory: after another process commits, it no longer matches the store ("Error finding
    id"). Forgetting the cached system makes the next client load it again; the old one
    is left to the searches still using it (never stopped here: another instance of this
    process may share it) and is freed with its last reference."""
    from chromadb.api.shared_system_client import SharedSystemClient

    SharedSystemClient._identifier_to_system.pop(str(location.path), None)
    return open_client(location)


def _limit_requests(client: ClientAPI, timeout: float) -> None:
    """Give the HTTP client's requests a time limit.

    chromadb's ``HttpClient`` builds its ``httpx.Client`` with ``timeout=None`` and no
    setting to change it, so a server that accepts and never answers would hang every
    call; the session is reached through the client's server object (checked here, and
    by a test against such a server, so a chromadb upgrade cannot drop it silently). Its
    transport is wrapped so a request made for a run also ends by the run's deadline
    (:func:`store_deadline`): the client is shared by runs with different deadlines.
    """
    session = getattr(getattr(client, "_server", None), "_session", None)
    transport = getattr(session, "_transport", None)
    if not isinstance(session, httpx.Client) or not isinstance(transport, httpx.BaseTransport):
        raise StoreError("this chromadb version hides its HTTP session: cannot limit request time")
    session.timeout = httpx.Timeout(timeout)
    if not isinstance(transport, DeadlineTransport):  # and each request by the run's deadline
        session._transport = DeadlineTransport(transport)


def knowledge_bases(client: ClientAPI) -> list[str]:
    """The names of the knowledge bases (chunk collections) in a store."""
    names = {c.name if hasattr(c, "name") else str(c) for c in client.list_collections()}
    return sorted(n for n in names if not n.endswith(REGISTRY_SUFFIX))


def require_collection(client: ClientAPI, name: str, where: str) -> None:
    """``InputError`` naming the existing knowledge bases unless ``name`` is one of them:
    a read must not create (a mistyped name would silently read an empty one)."""
    existing = knowledge_bases(client)
    if name not in existing:
        raise no_collection(name, where, existing)


def never_written(location: StoreLocation) -> bool:
    """An embedded store no ingest has written: a reader says so without opening it
    (opening creates the folder, Chroma's database and the locks)."""
    path = location.path  # a file in its place is not "never written": opening names it
    return location.host is None and (
        not path.exists() or (path.is_dir() and not (path / STORE_FILE).is_file())
    )


def open_collections(
    client: ClientAPI, name: str, *, model_id: str, dimension: int
) -> tuple[Collection, Collection]:
    """Return ``(chunks, registry)``, creating them if needed, refusing a model change."""
    validate_collection_name(name)
    meta: dict[str, Any] = {"embedding_model": model_id, "embedding_dimension": dimension}
    chunks = client.get_or_create_collection(
        name, metadata=meta, configuration={"hnsw": {"space": "cosine"}}, embedding_function=None
    )
    stored = chunks.metadata or {}
    if stored.get("embedding_model") != model_id or stored.get("embedding_dimension") != dimension:
        raise model_mismatch(
            name,
            stored.get("embedding_model"),
            stored.get("embedding_dimension"),
            model_id,
            dimension,
        )
    registry = client.get_or_create_collection(
        name + REGISTRY_SUFFIX, metadata={"role": "registry"}, embedding_function=None
    )
    return chunks, registry


def drop_collections(client: ClientAPI, name: str) -> None:
    for n in (name, name + REGISTRY_SUFFIX):
        with contextlib.suppress(Exception):  # absent already: nothing to drop
            client.delete_collection(n)


@dataclass(frozen=True)
class StoreGuard:
    """Runs one store call; a failure becomes a ``StoreError`` naming the store and step."""

    location: StoreLocation

    def __call__(self, what: str, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # chromadb raises many types; its Rust core panics
            if self.location.host is None:  # a page damaged since the store was opened
                check_intact(self.location.path)
            raise StoreError(
                f"{self.location.describe()} failed during {what}: {type(exc).__name__}: {exc}"
            ) from exc


class ChromaChunkStore(ChunkStore):
    """The chunk collection: vectors, texts and metadata keyed by chunk id.

    Chunk ids are ``doc_id#version#index``; which version counts is the registry's
    business, so every method here is version-agnostic except where it says so.
    """

    def __init__(self, collection: Collection, guard: StoreGuard) -> None:
        self.collection = collection
        self._guard = guard
        # Called when a search finds the store changed under it (another process
        # committed between the generation check and the search): the owner reopens it,
        # and the search is tried once more.
        self.on_stale: Callable[[], None] | None = None

    def _searching(self, what: str, fn: Callable[[], T]) -> T:
        try:
            return self._guard(what, fn)
        except StoreError as exc:
            if self.on_stale is None or STALE_INDEX not in str(exc):
                raise
            self.on_stale()
            return self._guard(what, fn)

    def write(
        self,
        ids: Sequence[str],
        vectors: Sequence[Sequence[float]],
        texts: Sequence[str],
        metadatas: Sequence[dict[str, Any]],
    ) -> None:
        for start in range(0, len(ids), WRITE_PAGE):
            sl = slice(start, start + WRITE_PAGE)
            self._guard(
                "writing chunks",
                lambda sl=sl: self.collection.upsert(  # type: ignore[misc]
                    ids=list(ids[sl]),
                    embeddings=list(vectors[sl]),
                    documents=list(texts[sl]),
                    metadatas=list(metadatas[sl]),  # type: ignore[arg-type]
                ),
            )

    def delete_other_versions(self, doc_id: str, version: str) -> None:
        """Remove the chunks of ``doc_id`` not of ``version``: listed by an equality on
        ``doc_id`` (a ``$ne`` filter scans the store), then deleted by id."""
        old = [c.chunk_id for c in self._pages({"doc_id": doc_id}, "listing chunks", ())]
        old = [c for c in old if not c.startswith(f"{doc_id}#{version}#")]
        for start in range(0, len(old), WRITE_PAGE):
            self._guard(
                f"removing old chunks of {doc_id}",
                lambda start=start: self.collection.delete(ids=old[start : start + WRITE_PAGE]),  # type: ignore[misc]
            )

    def delete_document(self, doc_id: str) -> None:
        self._guard(
            f"deleting chunks of {doc_id}",
            lambda: self.collection.delete(where={"doc_id": doc_id}),
        )

    def scan(self) -> Iterator[StoredChunk]:
        """Every stored chunk (all versions), read page by page."""
        return self._pages(None, "reading chunks")

    def document_chunks(self, doc_ids: Sequence[str]) -> Iterator[StoredChunk]:
        """The stored chunks (all versions) of some documents, 100 documents per read."""
        for start in range(0, len(doc_ids), 100):
            where = {"doc_id": {"$in": list(doc_ids[start : start + 100])}}
            yield from self._pages(where, "reading changed documents")

    def _pages(
        self, where: dict[str, Any] | None, what: str, include: Sequence[str] = STORED
    ) -> Iterator[StoredChunk]:
        return read_pages(self.collection, self._guard, where, what, include)

    def nearest(
        self,
        vector: np.ndarray,
        n: int,
        where: dict[str, Any] | None,
        ids: Sequence[str] | None = None,
    ) -> list[tuple[str, float]]:
        """The ``n`` nearest chunks as ``(chunk id, cosine similarity)``, best first;
        ``ids`` restricts the search to those chunks."""
        res = self._searching(
            "vector search",
            lambda: self.collection.query(
                query_embeddings=[vector.tolist()],
                n_results=n,
                where=where,
                ids=list(ids) if ids is not None else None,
                include=["distances"],
            ),
        )
        # The collection is in cosine space: distance = 1 - cosine similarity.
        return [
            (cid, 1.0 - float(dist))
            for cid, dist in zip(res["ids"][0], (res["distances"] or [[]])[0], strict=True)
        ]

    def vectors(self, ids: Sequence[str]) -> tuple[list[str], np.ndarray]:
        """The stored vectors of ``ids`` as stored, with the ids found, in that order.

        Chunks deleted meanwhile are simply absent from the result.
        """
        got = self._searching(
            "reading vectors",
            lambda: self.collection.get(ids=list(ids), include=["embeddings"]),
        )
        embs = got["embeddings"]
        if embs is None or len(got["ids"]) == 0:
            return [], np.zeros((0, 0), dtype=np.float32)
        return list(got["ids"]), np.asarray(embs, dtype=np.float32)

    def count(self) -> int:
        return int(self._guard("counting chunks", self.collection.count))
