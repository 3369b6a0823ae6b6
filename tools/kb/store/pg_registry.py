"""The document registry in PostgreSQL: ``Registry``'s methods over the ``documents`` table.

The crash-safety protocol is the one of ``tools.kb.store.registry``: chunks of the new version
are written first, then ONE transaction on the primary upserts the documents' records and
sets a new ``generation`` (raising the ``serial``), then the other versions' chunks are
deleted. A crash before that transaction leaves the old version in force.

Reads go to a replica that has replayed at least the serial this process last committed
or saw (``ReadPoint``), else to the primary: a search right after this process's own
ingest reads it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from typing import Any, cast

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from tools.kb.store.pg_connections import PgConnections, ReadPoint
from tools.kb.store.pg_schema import CATALOG, KbTables
from tools.kb.store.registry import RECORD_PAGE, DocRecord, Registry

# Optional keys written empty when a record lacks them, as the Chroma registry stores
# them: both backends give the same records.
OPTIONAL_EMPTY = {"via": "", "acl": "", "title": ""}


class PgRegistry(Registry):
    """The ``documents`` table and the catalog row's generation, committed as one unit."""

    def __init__(self, conns: PgConnections, tables: KbTables, point: ReadPoint) -> None:
        # The Chroma registry's state is not used: every method is overridden.
        self.conns, self.tables, self.point = conns, tables, point
        self.written = ""

    def pages(self) -> Iterator[tuple[str, DocRecord]]:
        """Every document's record, ``RECORD_PAGE`` at a time by doc_id."""
        query = sql.SQL(
            "SELECT doc_id, record FROM {} WHERE doc_id > %s ORDER BY doc_id LIMIT %s"
        ).format(self.tables.documents)
        after = ""
        for _ in range(10**9):  # bounded by the table: each page moves past its last id
            rows = self.conns.read(
                "reading the registry",
                lambda c, after=after: c.execute(query, (after, RECORD_PAGE)).fetchall(),  # type: ignore[misc]
                self.tables.serial,
                self.point.serial,
            )
            for doc_id, record in rows:
                yield str(doc_id), cast(DocRecord, dict(record))
            if len(rows) < RECORD_PAGE:
                return
            after = rows[-1][0]

    def record(self, doc_id: str) -> DocRecord | None:
        query = sql.SQL("SELECT record FROM {} WHERE doc_id = %s").format(self.tables.documents)
        row = self.conns.read(
            f"reading the registry entry of {doc_id}",
            lambda c: c.execute(query, (doc_id,)).fetchone(),
            self.tables.serial,
            self.point.serial,
        )
        return cast(DocRecord, dict(row[0])) if row else None

    def generation(self) -> str:
        """The current generation, from a server that has this process's last commit."""
        query = sql.SQL("SELECT generation, serial FROM {} WHERE name = %s").format(
            sql.Identifier(CATALOG)
        )
        row = self.conns.read(
            "reading the generation",
            lambda c: c.execute(query, (self.tables.name,)).fetchone(),
            self.tables.serial,
            self.point.serial,
        )
        if row is None:
            return ""
        self.point.raise_to(int(row[1]))
        return str(row[0])

    def commit(self, records: Mapping[str, DocRecord]) -> None:
        """Point documents at versions and change the generation, in one transaction."""
        generation = uuid.uuid4().hex
        upsert = sql.SQL(
            "INSERT INTO {} (doc_id, record) VALUES (%s, %s) "
            "ON CONFLICT (doc_id) DO UPDATE SET record = EXCLUDED.record"
        ).format(self.tables.documents)
        bump = sql.SQL(
            "UPDATE {} SET generation = %s, serial = serial + 1 WHERE name = %s RETURNING serial"
        ).format(sql.Identifier(CATALOG))
        rows = [(doc_id, Jsonb({**OPTIONAL_EMPTY, **r})) for doc_id, r in records.items()]

        def commit(conn: psycopg.Connection[Any]) -> int:
            with conn.cursor() as cur:
                cur.executemany(upsert, rows)
            got = conn.execute(bump, (generation, self.tables.name)).fetchone()
            return int(got[0]) if got else 0

        names = ", ".join(list(records)[:3]) + ("…" if len(records) > 3 else "")
        serial = self.conns.write(f"committing {names}", commit)
        self.point.raise_to(serial)
        self.written = generation

    def forget(self, doc_id: str) -> None:
        query = sql.SQL("DELETE FROM {} WHERE doc_id = %s").format(self.tables.documents)
        self.conns.write(
            f"deleting registry entry of {doc_id}", lambda c: c.execute(query, (doc_id,))
        )
