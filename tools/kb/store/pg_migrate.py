"""``hybrid-rag kb migrate --to URL``: an embedded home's knowledge base into PostgreSQL.

The chunks are copied with their vectors (nothing is embedded again), page by page; a
page whose chunks are all in PostgreSQL already is skipped, so an interrupted migration
run again goes on where it stopped, and a finished one run again copies nothing. Into an
empty table the pages are ``COPY``'d with the vector index dropped, and the index is
built once at the end, in memory (``maintenance_work_mem`` set for that statement):
inserting into a live HNSW graph costs a graph search per row, ~190 chunks/s at 200k on
two cores, against ~1,260 for the COPY and 1M chunks indexed in 11–13 min
(bench/README.md). The registry is copied after the chunks (the commit protocol's order: a reader of the target
never sees a document whose chunks are missing), with the embedded store's generation,
so the lexical index and snapshot under the data home stay valid. The originals and the
embedded store stay where they are. At the end the counts are compared.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from tools.errors import InputError, StoreError
from tools.kb.store.chroma.chroma_pages import read_pages
from tools.kb.store.chroma.chroma_registry import FORGOTTEN_ID, GENERATION_ID
from tools.kb.store.chroma.chroma_store import (
    StoreGuard,
    StoreLocation,
    never_written,
    open_client,
    require_collection,
)
from tools.kb.store.postgres.pg_backend import writer_key
from tools.kb.store.postgres.pg_connections import PgConnections, ReadPoint
from tools.kb.store.postgres.pg_registry import OPTIONAL_EMPTY
from tools.kb.store.postgres.pg_schema import (
    CATALOG,
    KbTables,
    drop_vector_index,
    has_vector_index,
    open_tables,
    vector_index,
)
from tools.kb.store.postgres.pg_store import PgChunkStore
from tools.kb.store.protocol import RECORD_PAGE, REGISTRY_SUFFIX, no_collection
from tools.kb.store.writer_lock import lock_path, writer_lock
from tools.settings import chroma_path, write_lock_dir, write_lock_timeout

COPY_PAGE = 1000  # chunks per copied page (one read of Chroma's, one write transaction)
INDEX_MEMORY_CAP_MB = 4096  # the default bound of the build's memory on the database server
GRAPH_BYTES = 768  # per vector beside its floats: pgvector's element and layer-0 neighbours
INDEX_BUILD_S = 600.0  # the build's statement bound: this, plus INDEX_BUILD_S_PER_CHUNK each
INDEX_BUILD_S_PER_CHUNK = 0.005
Progress = Callable[[int, int, str], None]  # done, total, note (cli.common.ProgressBar)


@dataclass
class MigrateReport:
    chunks: int = 0  # in the embedded store
    copied: int = 0  # chunks written this run (the rest were there already)
    documents: int = 0
    target: str = ""
    index_built_s: float | None = None  # the vector index built after a bulk copy


def index_memory_mb(chunks: int, dimension: int, cap_mb: int = INDEX_MEMORY_CAP_MB) -> int:
    """``maintenance_work_mem`` for building the HNSW graph of ``chunks`` vectors in memory
    (past it pgvector goes on on disk, many times slower), at most ``cap_mb``; at least
    PostgreSQL's default 64 MB."""
    need = chunks * (4 * dimension + GRAPH_BYTES) * 1.1 / 2**20
    return max(64, min(cap_mb, int(need) + 1))


def migrate(
    home: Path,
    url: str,
    collection: str,
    progress: Progress | None = None,
    index_memory_cap_mb: int = INDEX_MEMORY_CAP_MB,
) -> MigrateReport:
    """Copy ``collection`` of the embedded store under ``home`` into the database at ``url``
    (a bulk copy's index build takes at most ``index_memory_cap_mb`` on the server)."""
    location = StoreLocation(path=chroma_path(home))
    if never_written(location):
        raise no_collection(collection, location.describe())
    client = open_client(location)
    require_collection(client, collection, location.describe())
    guard = StoreGuard(location)
    chunks = guard("opening the chunks", lambda: client.get_collection(collection))
    registry = guard(
        "opening the registry", lambda: client.get_collection(collection + REGISTRY_SUFFIX)
    )
    # One writer: an ingest into this home waits for the copy (and the copy for it), and
    # so does any writer of the target knowledge base on another machine.
    lock = lock_path(write_lock_dir(home), location.describe(), collection)
    what = f"knowledge base {collection!r}"
    with writer_lock(lock, timeout=write_lock_timeout(), what=f"{what} ({location.describe()})"):
        total = guard("counting chunks", chunks.count)
        if total == 0:
            raise InputError(f"knowledge base {collection!r} is empty: nothing to migrate")
        meta = chunks.metadata or {}
        conns = PgConnections(url)
        try:
            with conns.writer(writer_key(collection), what, write_lock_timeout()):
                tables = open_tables(
                    conns,
                    collection,
                    model_id=str(meta.get("embedding_model")),
                    dimension=int(meta.get("embedding_dimension") or 0),
                    create=True,
                    index_vectors=False,  # created by _copy_chunks, before or after the copy
                )
                report = MigrateReport(target=f"PostgreSQL at {conns.primary.where}")
                memory = index_memory_mb(total, int(meta.get("embedding_dimension") or 0),
                                         index_memory_cap_mb)  # fmt: skip
                _copy_chunks(conns, tables, read_pages(chunks, guard, None, "reading chunks"),
                             total, memory, report, progress)  # fmt: skip
                report.documents = _copy_registry(conns, tables, registry, guard)
                _verify(conns, tables, report)
                return report
        finally:
            conns.close()


def _copy_chunks(
    conns: PgConnections,
    tables: KbTables,
    chunks: Iterator[Any],
    total: int,
    index_memory: int,
    report: MigrateReport,
    progress: Progress | None,
) -> None:
    """Every chunk into ``tables``, ``COPY_PAGE`` per transaction. Bulk into an empty table
    (its registry is copied last: nobody reads it yet) or on with an interrupted bulk copy
    (its vector index still missing; the rows then upserted): the index built at the end."""
    store = PgChunkStore(conns, tables, ReadPoint())
    indexed = conns.write("checking the vector index", lambda c: has_vector_index(c, tables))
    empty = _empty(conns, tables)
    bulk = not indexed or empty
    if bulk and indexed:
        conns.write("dropping the vector index for the copy", _run(drop_vector_index(tables)))
    page: list[Any] = []
    for chunk in itertools.chain(chunks, [None]):
        if chunk is not None:
            page.append(chunk)
        if page and (chunk is None or len(page) >= COPY_PAGE):
            report.chunks += len(page)
            report.copied += _append_page(store, page) if empty else _copy_page(store, page)
            if progress:
                progress(report.chunks, total, f"{report.copied} copied")
            page = []
    if bulk:
        if progress:
            progress(report.chunks, total, "building the vector index")
        started = time.perf_counter()
        bound = INDEX_BUILD_S + INDEX_BUILD_S_PER_CHUNK * total
        _build_index(conns, tables, index_memory, bound)
        report.index_built_s = round(time.perf_counter() - started, 1)


def _empty(conns: PgConnections, tables: KbTables) -> bool:
    query = sql.SQL("SELECT EXISTS (SELECT 1 FROM {})").format(tables.chunks)
    row = conns.write("checking the target", lambda c: c.execute(query).fetchone())
    return not (row and row[0])


def _run(statement: sql.Composed) -> Callable[[psycopg.Connection[Any]], None]:
    def run(conn: psycopg.Connection[Any]) -> None:
        conn.execute(statement)

    return run


def _build_index(conns: PgConnections, tables: KbTables, memory_mb: int, bound_s: float) -> None:
    """The HNSW index over every copied vector, in one statement with its own memory and
    time bound (the store's statement timeout is for queries, not for this)."""

    def build(conn: psycopg.Connection[Any]) -> None:
        conn.execute(
            sql.SQL("SET LOCAL maintenance_work_mem = {}").format(sql.Literal(f"{memory_mb}MB"))
        )
        conn.execute(
            sql.SQL("SET LOCAL statement_timeout = {}").format(sql.Literal(int(bound_s * 1000)))
        )
        conn.execute(vector_index(tables))

    conns.write("building the vector index", build)


def _append_page(store: PgChunkStore, page: list[Any]) -> int:
    store.append([c.chunk_id for c in page], [c.vector for c in page],
                 [c.text for c in page], [c.metadata for c in page])  # fmt: skip
    return len(page)


def _copy_page(store: PgChunkStore, page: list[Any]) -> int:
    ids = [c.chunk_id for c in page]
    query = sql.SQL("SELECT count(*) FROM {} WHERE id = ANY(%s)").format(store.tables.chunks)
    there = store.conns.write(
        "checking copied chunks", lambda c: c.execute(query, [ids]).fetchone()
    )
    if there and int(there[0]) == len(ids):
        return 0  # copied by an earlier run
    store.write(ids, [c.vector for c in page], [c.text for c in page], [c.metadata for c in page])
    return len(ids)


def _copy_registry(conns: PgConnections, tables: KbTables, registry: Any, guard: StoreGuard) -> int:
    """Every record, ``RECORD_PAGE`` per transaction, then the generation and the sequence
    number: the embedded one, so a snapshot of the home reads only what changes after it."""
    upsert = sql.SQL(
        "INSERT INTO {} (doc_id, record, seq) VALUES (%s, %s, %s) "
        "ON CONFLICT (doc_id) DO UPDATE SET record = EXCLUDED.record, seq = EXCLUDED.seq"
    ).format(tables.documents)
    generation, seq, count = "", 0, 0
    for offset in itertools.count(0, RECORD_PAGE):
        got = guard(
            "reading the registry",
            lambda offset=offset: registry.get(
                include=["metadatas"], limit=RECORD_PAGE, offset=offset
            ),  # type: ignore[misc]
        )
        rows = []
        for doc_id, record in zip(got["ids"], got["metadatas"] or [], strict=True):
            if doc_id == GENERATION_ID:
                generation = str((record or {}).get("generation", ""))
                seq = int((record or {}).get("seq") or 0)
            elif doc_id != FORGOTTEN_ID:  # removals already done there: nothing to copy
                meta = {**OPTIONAL_EMPTY, **dict(record or {})}
                rows.append((doc_id, Jsonb(meta), int(meta.get("seq") or 0)))
        count += len(rows)
        conns.write("copying the registry", lambda c, rows=rows: _upsert(c, upsert, rows))  # type: ignore[misc]
        if len(got["ids"]) < RECORD_PAGE:
            break
    bump = sql.SQL(
        "UPDATE {} SET generation = %s, serial = GREATEST(serial + 1, %s) WHERE name = %s "
        "RETURNING serial"
    ).format(sql.Identifier(CATALOG))
    history = sql.SQL(
        "INSERT INTO {} (seq, generation) VALUES (%s, %s) "
        "ON CONFLICT (seq) DO UPDATE SET generation = EXCLUDED.generation"
    ).format(tables.history)

    def finish(c: psycopg.Connection[Any]) -> None:
        got = c.execute(bump, (generation, seq, tables.name)).fetchone()
        c.execute(history, (int(got[0]) if got else seq, generation))

    conns.write("setting the generation", finish)
    return count


def _upsert(conn: psycopg.Connection[Any], query: sql.Composed, rows: list[Any]) -> None:
    with conn.cursor() as cur:
        cur.executemany(query, rows)


def _verify(conns: PgConnections, tables: KbTables, report: MigrateReport) -> None:
    def counts(conn: psycopg.Connection[Any]) -> tuple[int, int]:
        chunks = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(tables.chunks)).fetchone()
        docs = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(tables.documents)).fetchone()
        return int(chunks[0]) if chunks else 0, int(docs[0]) if docs else 0

    chunks, docs = conns.write("verifying the copy", counts)
    if (chunks, docs) != (report.chunks, report.documents):
        raise StoreError(
            f"{report.target} holds {chunks} chunks and {docs} documents of "
            f"{tables.name!r}, the embedded store {report.chunks} and {report.documents}: "
            "the target held another knowledge base of that name. Migrate into an empty "
            "database (or drop that collection there) and run the migration again"
        )
