"""The chunk store in PostgreSQL with pgvector: ``ChunkStore``'s methods over SQL.

Writes go to the primary in pages (``WRITE_PAGE`` chunks per transaction); reads go to a
replica that has replayed what the reader needs (``tools.kb.store.postgres.pg_connections``). Whole-
collection reads (``scan``, ``document_chunks``) are keyset pages on the chunk id, never
one unbounded list. ``nearest`` orders by pgvector's cosine distance (``<=>``) on the
HNSW index, and translates the Chroma-style ``where`` clauses the search side builds
(``{"doc_id": {"$in": [...]}}``, ``{"lang": "zh"}``, ``{"acl": {"$in": [...]}}``,
``{"$and": [...]}``) into SQL with bound parameters.

Vectors travel as pgvector text literals (``[0.1,0.2,...]``): float32 printed with 9
significant digits, which reads back bit for bit; no adapter package is needed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import numpy as np
import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from tools.errors import InputError
from tools.kb.store.postgres.pg_connections import PgConnections, ReadPoint
from tools.kb.store.postgres.pg_schema import KbTables
from tools.kb.store.protocol import READ_PAGE, ChunkStore, StoredChunk

T = TypeVar("T")
WRITE_PAGE = 500  # chunks per write transaction
DOC_BATCH = 100  # documents per read of ``document_chunks``
EF_SEARCH_MAX = 1000  # pgvector's bound on hnsw.ef_search
COLUMNS = ("doc_id", "source", "lang", "acl", "version")  # filtered as columns
CHUNK_COLUMNS = sql.SQL("id, doc_id, version, text, metadata, lang, acl, source, embedding")
COMPARE = {"$eq": "=", "$ne": "<>", "$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


def vector_literal(vector: Sequence[float] | np.ndarray) -> str:
    """pgvector's text form of a vector (float32 values, read back exactly)."""
    values = np.asarray(vector, dtype=np.float32)
    return "[" + ",".join(f"{v:.9g}" for v in values.tolist()) + "]"


def parse_vector(text: str) -> np.ndarray:
    return np.array(text[1:-1].split(","), dtype=np.float32) if len(text) > 2 else np.zeros(0)


def where_sql(where: dict[str, Any] | None) -> tuple[sql.Composable, list[Any]]:
    """A Chroma ``where`` dict as an SQL condition and its parameters; an operator it
    does not know is an ``InputError`` naming it."""
    if not where:
        return sql.SQL("TRUE"), []
    parts: list[sql.Composable] = []
    params: list[Any] = []
    for key, value in where.items():
        if key in ("$and", "$or"):
            if not isinstance(value, list) or not value:
                raise InputError(f"{key} takes a non-empty list of conditions, got {value!r}")
            subs = [where_sql(v) for v in value]
            joiner = sql.SQL(" AND " if key == "$and" else " OR ")
            parts.append(sql.SQL("({})").format(joiner.join(s for s, _ in subs)))
            params += [p for _, ps in subs for p in ps]
        else:
            cond, ps = _field(key, value)
            parts.append(cond)
            params += ps
    return sql.SQL(" AND ").join(parts), params


def _field(key: str, value: Any) -> tuple[sql.Composable, list[Any]]:
    column = key in COLUMNS
    target: sql.Composable = (
        sql.Identifier(key) if column else sql.SQL("(metadata -> {})").format(sql.Literal(key))
    )
    op, operand = next(iter(value.items())) if isinstance(value, dict) else ("$eq", value)
    if isinstance(value, dict) and len(value) != 1:
        raise InputError(f"one operator per field in a where clause, got {value!r} for {key}")
    if op in ("$in", "$nin"):
        items = list(operand)
        arr = items if column else [Jsonb(v) for v in items]
        expr = "{} = ANY(%s)" if op == "$in" else "NOT ({} = ANY(%s))"
        return sql.SQL(expr).format(target), [arr]
    if op not in COMPARE:
        raise InputError(f"unknown where operator {op!r} for {key}")
    return sql.SQL("{} {} %s").format(target, sql.SQL(COMPARE[op])), [
        operand if column else Jsonb(operand)
    ]


class PgChunkStore(ChunkStore):
    """The chunk table of one knowledge base (same methods as the Chroma ``ChunkStore``)."""

    def __init__(self, conns: PgConnections, tables: KbTables, point: ReadPoint) -> None:
        # The Chroma store's state is not used: every method is overridden.
        self.conns, self.tables, self.point = conns, tables, point
        self.on_stale = None

    def _read(self, what: str, fn: Callable[[psycopg.Connection[Any]], T]) -> T:
        return self.conns.read(what, fn, self.tables.serial, self.point.serial)

    def write(
        self,
        ids: Sequence[str],
        vectors: Sequence[Sequence[float]],
        texts: Sequence[str],
        metadatas: Sequence[dict[str, Any]],
    ) -> None:
        query = sql.SQL(
            "INSERT INTO {} ({}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s::vector) "
            "ON CONFLICT (id) DO UPDATE SET "
            "doc_id = EXCLUDED.doc_id, version = EXCLUDED.version, text = EXCLUDED.text, "
            "metadata = EXCLUDED.metadata, lang = EXCLUDED.lang, acl = EXCLUDED.acl, "
            "source = EXCLUDED.source, embedding = EXCLUDED.embedding"
        ).format(self.tables.chunks, CHUNK_COLUMNS)
        for start in range(0, len(ids), WRITE_PAGE):
            page = slice(start, start + WRITE_PAGE)
            rows = list(_rows(ids[page], vectors[page], texts[page], metadatas[page]))
            self.conns.write("writing chunks", lambda c, rows=rows: _many(c, query, rows))  # type: ignore[misc]

    def append(
        self,
        ids: Sequence[str],
        vectors: Sequence[Sequence[float]],
        texts: Sequence[str],
        metadatas: Sequence[dict[str, Any]],
    ) -> None:
        """Chunks known not to be stored (a migration into an empty table), in one
        ``COPY``: several times faster than :meth:`write`'s upserts. A chunk already
        there fails the whole call on the primary key; nothing is written then."""
        copy = sql.SQL("COPY {} ({}) FROM STDIN").format(self.tables.chunks, CHUNK_COLUMNS)
        rows = list(_rows(ids, vectors, texts, metadatas))

        def run(conn: psycopg.Connection[Any]) -> None:
            with conn.cursor() as cur, cur.copy(copy) as out:
                for row in rows:
                    out.write_row(row)

        self.conns.write("appending chunks", run)

    def delete_other_versions(self, doc_id: str, version: str) -> None:
        """Remove the chunks of ``doc_id`` not of ``version`` (by their id's version)."""
        query = sql.SQL("DELETE FROM {} WHERE doc_id = %s AND NOT starts_with(id, %s)")
        self.conns.write(
            f"removing old chunks of {doc_id}",
            lambda c: c.execute(query.format(self.tables.chunks), (doc_id, f"{doc_id}#{version}#")),
        )

    def delete_document(self, doc_id: str) -> None:
        query = sql.SQL("DELETE FROM {} WHERE doc_id = %s").format(self.tables.chunks)
        self.conns.write(f"deleting chunks of {doc_id}", lambda c: c.execute(query, (doc_id,)))

    def scan(self) -> Iterator[StoredChunk]:
        """Every stored chunk (all versions), ``READ_PAGE`` per read by chunk id."""
        return self._keyset_pages(sql.SQL("TRUE"), [], "reading chunks")

    def document_chunks(self, doc_ids: Sequence[str]) -> Iterator[StoredChunk]:
        """The stored chunks (all versions) of some documents, 100 documents per read."""
        for start in range(0, len(doc_ids), DOC_BATCH):
            batch = list(doc_ids[start : start + DOC_BATCH])
            yield from self._keyset_pages(
                sql.SQL("doc_id = ANY(%s)"), [batch], "reading changed documents"
            )

    def _keyset_pages(
        self, cond: sql.Composable, params: list[Any], what: str, vectors: bool = True
    ) -> Iterator[StoredChunk]:
        query = sql.SQL(
            "SELECT id, text, metadata, {} FROM {} WHERE {} AND id > %s ORDER BY id LIMIT %s"
        ).format(sql.SQL("embedding::text" if vectors else "NULL"), self.tables.chunks, cond)
        after = ""
        for _ in range(10**9):  # bounded by the table: each page moves past its last id
            rows = self._read(
                what,
                lambda c, after=after: c.execute(query, [*params, after, READ_PAGE]).fetchall(),  # type: ignore[misc]
            )
            for cid, text, meta, vec in rows:
                yield StoredChunk(cid, text, dict(meta), parse_vector(vec) if vec else None)
            if len(rows) < READ_PAGE:
                return
            after = rows[-1][0]

    def nearest(
        self,
        vector: np.ndarray,
        n: int,
        where: dict[str, Any] | None,
        ids: Sequence[str] | None = None,
    ) -> list[tuple[str, float]]:
        """The ``n`` nearest chunks as ``(chunk id, cosine similarity)``, best first."""
        cond, params = where_sql(where)
        if ids is not None:
            cond = sql.SQL("{} AND id = ANY(%s)").format(cond)
            params = [*params, list(ids)]
        query = sql.SQL(
            "SELECT id, embedding <=> %s::vector AS d FROM {} WHERE {} ORDER BY d LIMIT %s"
        ).format(self.tables.chunks, cond)
        literal = vector_literal(vector)

        def search(conn: psycopg.Connection[Any]) -> list[tuple[str, float]]:
            # The HNSW scan goes on until n rows pass the filter (pgvector >= 0.8).
            conn.execute(f"SET LOCAL hnsw.ef_search = {max(40, min(n, EF_SEARCH_MAX))}")
            conn.execute("SET LOCAL hnsw.iterative_scan = strict_order")
            rows = conn.execute(query, [literal, *params, n]).fetchall()
            return [(str(cid), 1.0 - float(d)) for cid, d in rows]

        return self._read("vector search", search)

    def vectors(self, ids: Sequence[str]) -> tuple[list[str], np.ndarray]:
        """The stored vectors of ``ids``, with the ids found, in the order asked."""
        query = sql.SQL("SELECT id, embedding::text FROM {} WHERE id = ANY(%s)").format(
            self.tables.chunks
        )
        rows = self._read("reading vectors", lambda c: c.execute(query, [list(ids)]).fetchall())
        found = {str(cid): parse_vector(vec) for cid, vec in rows}
        order = [c for c in ids if c in found]
        if not order:
            return [], np.zeros((0, 0), dtype=np.float32)
        return order, np.stack([found[c] for c in order]).astype(np.float32)

    def count(self) -> int:
        query = sql.SQL("SELECT count(*) FROM {}").format(self.tables.chunks)
        return int(self._read("counting chunks", lambda c: c.execute(query).fetchone()[0]))  # type: ignore[index]


def _rows(
    ids: Sequence[str],
    vectors: Sequence[Sequence[float]],
    texts: Sequence[str],
    metadatas: Sequence[dict[str, Any]],
) -> Iterator[tuple[Any, ...]]:
    """Chunks as rows of :data:`CHUNK_COLUMNS` (the filtered fields as columns too)."""
    for cid, vec, text, meta in zip(ids, vectors, texts, metadatas, strict=True):
        yield (
            cid,
            str(meta.get("doc_id", "")),
            str(meta.get("version", "")),
            text,
            Jsonb(meta),
            meta.get("lang"),
            meta.get("acl"),
            meta.get("source"),
            vector_literal(vec),
        )


def _many(conn: psycopg.Connection[Any], query: sql.Composed, rows: list[tuple[Any, ...]]) -> None:
    with conn.cursor() as cur:
        cur.executemany(query, rows)
