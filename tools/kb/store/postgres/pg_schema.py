"""The PostgreSQL knowledge base's tables, created idempotently on the primary.

* ``hybrid_rag_kb`` (one row per knowledge base, the "meta"): its name, its schema, the
  embedding model and dimension (opening it with another model is refused with the
  Chroma side's error), and the registry's ``generation`` and ``serial`` (a counter
  raised by every commit, which replicas are compared on: ``tools.kb.store.postgres.pg_connections``).
* schema ``kb_<name>``: ``chunks`` (id, doc_id, version, text, metadata jsonb, lang, acl,
  source, embedding vector(dim); an HNSW index with ``vector_cosine_ops``, b-tree indexes
  on the filtered columns) and ``documents`` (the registry: doc_id -> record jsonb).

Set-up runs in one transaction under an advisory lock, so servers starting together do
not race on ``CREATE``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from tools.errors import ConfigError
from tools.kb.store.postgres.pg_connections import PgConnections
from tools.kb.store.postgres.pg_probe import check_hnsw_build
from tools.kb.store.protocol import model_mismatch, no_collection, validate_collection_name

CATALOG = "hybrid_rag_kb"
SETUP_LOCK_KEY = 0x68796272_6B62  # "hybrkb": the advisory lock of the set-up
SCHEMA_BYTES = 63  # PostgreSQL's identifier limit
MIN_PGVECTOR = (0, 8)  # hnsw.iterative_scan: a filtered search still returns n rows


@dataclass(frozen=True)
class PgLocation:
    """Where a PostgreSQL knowledge base lives, as messages and ``kb stats`` name it."""

    path: Path  # the data home's store folder (unused: nothing is embedded)
    host: str
    port: int
    where: str  # user@host:port/dbname of the primary, no password
    replicas: tuple[str, ...] = ()

    def describe(self) -> str:
        return f"PostgreSQL at {self.where}"


def schema_name(collection: str) -> str:
    """``kb_<name>``, shortened with a hash of the name when too long for PostgreSQL."""
    name = f"kb_{collection}"
    if len(name) <= SCHEMA_BYTES:
        return name
    digest = hashlib.sha256(collection.encode()).hexdigest()[:12]
    return f"{name[: SCHEMA_BYTES - 13]}_{digest}"


@dataclass(frozen=True)
class KbTables:
    """One knowledge base's tables, as SQL identifiers."""

    name: str
    schema: str

    @property
    def chunks(self) -> sql.Composed:
        return sql.SQL("{}.chunks").format(sql.Identifier(self.schema))

    @property
    def documents(self) -> sql.Composed:
        return sql.SQL("{}.documents").format(sql.Identifier(self.schema))

    @property
    def history(self) -> sql.Composed:
        """Each commit's generation by its serial (``Registry.changes``' store check)."""
        return sql.SQL("{}.history").format(sql.Identifier(self.schema))

    @property
    def forgotten(self) -> sql.Composed:
        """The removed records, by the sequence number of their removal."""
        return sql.SQL("{}.forgotten").format(sql.Identifier(self.schema))

    def serial(self, conn: psycopg.Connection[Any]) -> int:
        """The registry serial this server has (replayed); -1 when it has not replayed the
        knowledge base's creation yet (the read then moves on: the server is behind, not
        broken)."""
        query = sql.SQL("SELECT serial FROM {} WHERE name = %s").format(sql.Identifier(CATALOG))
        try:
            row = conn.execute(query, (self.name,)).fetchone()
        except psycopg.errors.UndefinedTable:
            return -1
        return int(row[0]) if row else -1


def open_tables(
    conns: PgConnections,
    name: str,
    *,
    model_id: str,
    dimension: int,
    create: bool,
    index_vectors: bool = True,
) -> KbTables:
    """The knowledge base's tables, created if ``create`` (else an ``InputError`` naming
    the existing ones when absent), refusing another embedding model. ``index_vectors``
    False leaves a missing vector index missing (a bulk copy builds it at its end)."""
    validate_collection_name(name)
    where = f"PostgreSQL at {conns.primary.where}"
    if not create:
        row = conns.write("opening the knowledge base", lambda c: _meta(c, name))
        if row is None:
            raise no_collection(name, where, knowledge_bases(conns))
    else:
        if conns.write("opening the knowledge base", lambda c: _meta(c, name)) is None:
            check_hnsw_build(conns, SETUP_LOCK_KEY)  # before any vector index exists
        row = conns.write(
            "creating the knowledge base tables",
            lambda c: _create(c, name, model_id, dimension, index_vectors),
        )
    stored_model, stored_dim, schema = row
    version = conns.write("reading the pgvector version", _vector_version)
    if version < MIN_PGVECTOR:
        shown = ".".join(map(str, version)) if version else "none"
        raise ConfigError(
            f"{where} has pgvector {shown}; the knowledge base needs pgvector 0.8 or later "
            "(its iterative index scans keep a filtered vector search complete)"
        )
    if stored_model != model_id or stored_dim != dimension:
        raise model_mismatch(name, stored_model, stored_dim, model_id, dimension)
    return KbTables(name, schema)


def _vector_version(conn: psycopg.Connection[Any]) -> tuple[int, ...]:
    row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
    parts = str(row[0]).split(".") if row else []
    return tuple(int(p) for p in parts if p.isdigit())


def _meta(conn: psycopg.Connection[Any], name: str) -> tuple[str, int, str] | None:
    if conn.execute("SELECT to_regclass(%s)", (CATALOG,)).fetchone() == (None,):
        return None
    row = conn.execute(
        sql.SQL(
            "SELECT embedding_model, embedding_dimension, schema_name FROM {} WHERE name = %s"
        ).format(sql.Identifier(CATALOG)),
        (name,),
    ).fetchone()
    return (str(row[0]), int(row[1]), str(row[2])) if row else None


def _create(
    conn: psycopg.Connection[Any], name: str, model_id: str, dimension: int, index_vectors: bool
) -> tuple[str, int, str]:
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (SETUP_LOCK_KEY,))
    conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    conn.execute(
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (name text PRIMARY KEY, schema_name text NOT NULL "
            "UNIQUE, embedding_model text NOT NULL, embedding_dimension integer NOT NULL, "
            "generation text NOT NULL DEFAULT '', serial bigint NOT NULL DEFAULT 0)"
        ).format(sql.Identifier(CATALOG))
    )
    conn.execute(
        sql.SQL(
            "INSERT INTO {} (name, schema_name, embedding_model, embedding_dimension) "
            "VALUES (%s, %s, %s, %s) ON CONFLICT (name) DO NOTHING"
        ).format(sql.Identifier(CATALOG)),
        (name, schema_name(name), model_id, dimension),
    )
    meta = _meta(conn, name)
    assert meta is not None  # inserted above, under the lock
    if meta[0] != model_id or meta[1] != dimension:
        return meta  # refused by the caller; nothing of this model is created
    schema = sql.Identifier(meta[2])
    tables = KbTables(name, meta[2])
    conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(schema))
    conn.execute(
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (id text PRIMARY KEY, doc_id text NOT NULL, "
            "version text NOT NULL, text text NOT NULL, metadata jsonb NOT NULL, lang text, "
            "acl text, source text, embedding vector({}) NOT NULL)"
        ).format(tables.chunks, sql.Literal(dimension))
    )
    for column in ("doc_id", "source", "lang", "acl"):
        conn.execute(
            sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} ({})").format(
                sql.Identifier(f"chunks_{column}"), tables.chunks, sql.Identifier(column)
            )
        )
    if index_vectors:
        conn.execute(vector_index(tables))
    _registry_tables(conn, tables)
    return meta


TOMBSTONE = "coalesce(record->>'version', '') = ''"  # a record whose deletion was interrupted


def vector_index(tables: KbTables) -> sql.Composed:
    """The HNSW index of the chunks' vectors (cosine), created when missing."""
    return sql.SQL(
        "CREATE INDEX IF NOT EXISTS chunks_embedding ON {} USING hnsw (embedding vector_cosine_ops)"
    ).format(tables.chunks)


def drop_vector_index(tables: KbTables) -> sql.Composed:
    return sql.SQL("DROP INDEX IF EXISTS {}.chunks_embedding").format(sql.Identifier(tables.schema))


def has_vector_index(conn: psycopg.Connection[Any], tables: KbTables) -> bool:
    row = conn.execute(
        "SELECT to_regclass(%s)", (f'"{tables.schema}".chunks_embedding',)
    ).fetchone()
    return bool(row and row[0] is not None)


def _registry_tables(conn: psycopg.Connection[Any], tables: KbTables) -> None:
    """The documents' records and the log of removals (``Registry.changes`` reads both by
    sequence number)."""
    conn.execute(
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (doc_id text PRIMARY KEY, record jsonb NOT NULL, "
            "seq bigint NOT NULL DEFAULT 0)"
        ).format(tables.documents)
    )
    conn.execute(
        sql.SQL("ALTER TABLE {} ADD COLUMN IF NOT EXISTS seq bigint NOT NULL DEFAULT 0").format(
            tables.documents
        )
    )
    conn.execute(
        sql.SQL("CREATE INDEX IF NOT EXISTS documents_seq ON {} (seq)").format(tables.documents)
    )
    # Interrupted deletions (a record without a version), read by every ingest: a partial
    # index holds only those, so the read does not scan every document's record.
    conn.execute(
        sql.SQL(
            f"CREATE INDEX IF NOT EXISTS documents_tombstones ON {{}} (doc_id) WHERE {TOMBSTONE}"
        ).format(tables.documents)
    )
    conn.execute(
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (seq bigint PRIMARY KEY, doc_id text NOT NULL)"
        ).format(tables.forgotten)
    )
    conn.execute(
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (seq bigint PRIMARY KEY, generation text NOT NULL)"
        ).format(tables.history)
    )


def knowledge_bases(conns: PgConnections) -> list[str]:
    """The names of the knowledge bases in the database (a handful of rows)."""

    def names(conn: psycopg.Connection[Any]) -> list[str]:
        if conn.execute("SELECT to_regclass(%s)", (CATALOG,)).fetchone() == (None,):
            return []
        query = sql.SQL("SELECT name FROM {} ORDER BY name LIMIT 10000")
        return [str(r[0]) for r in conn.execute(query.format(sql.Identifier(CATALOG)))]

    return conns.write("listing the knowledge bases", names)


def drop_tables(conns: PgConnections, tables: KbTables) -> None:
    """Delete a knowledge base: its schema and its catalog row, in one transaction."""

    def drop(conn: psycopg.Connection[Any]) -> None:
        conn.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(tables.schema))
        )
        conn.execute(
            sql.SQL("DELETE FROM {} WHERE name = %s").format(sql.Identifier(CATALOG)),
            (tables.name,),
        )

    conns.write(f"dropping knowledge base {tables.name}", drop)
