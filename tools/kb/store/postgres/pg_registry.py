"""The document registry in PostgreSQL: ``Registry``'s methods over the ``documents`` table.

The crash-safety protocol is the one of ``tools.kb.store.chroma.chroma_registry``: chunks of the new version
are written first, then ONE transaction on the primary upserts the documents' records and
sets a new ``generation`` (raising the ``serial``), then the other versions' chunks are
deleted. A crash before that transaction leaves the old version in force.

Reads go to a replica that has replayed at least the serial this process last committed
or saw (``ReadPoint``), else to the primary: a search right after this process's own
ingest reads it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, cast

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from tools.errors import InputError
from tools.kb.store.postgres.pg_connections import PgConnections, ReadPoint
from tools.kb.store.postgres.pg_schema import CATALOG, TOMBSTONE, KbTables
from tools.kb.store.protocol import HISTORY_KEPT, RECORD_PAGE, DocRecord, Registry, RegistryChanges

# Optional keys written empty when a record lacks them, as the Chroma registry stores
# them: both backends give the same records.
OPTIONAL_EMPTY = {"via": "", "acl": "", "title": ""}
# A reader further behind than this many commits reads the whole registry instead of the
# changes (the removals since then are read in one query: this bounds it).
CHANGES_KEPT = 50_000


class PgRegistry(Registry):
    """The ``documents`` table and the catalog row's generation, committed as one unit."""

    def __init__(self, conns: PgConnections, tables: KbTables, point: ReadPoint) -> None:
        # The Chroma registry's state is not used: every method is overridden.
        self.conns, self.tables, self.point = conns, tables, point
        self.written = ""

    def pages(self, where: dict[str, Any] | None = None) -> Iterator[tuple[str, DocRecord]]:
        """Every document's record, ``RECORD_PAGE`` at a time by doc_id (``where``: only
        ``{"seq": {"$gt": n}}``, the records committed after ``n``)."""
        after_seq = -1
        if where is not None:
            try:
                after_seq = int(where["seq"]["$gt"])
            except (KeyError, TypeError, ValueError):
                raise InputError(
                    f"the PostgreSQL registry reads by seq only, got {where!r}"
                ) from None
        query = sql.SQL(
            "SELECT doc_id, record, seq FROM {} WHERE doc_id > %s AND seq > %s "
            "ORDER BY doc_id LIMIT %s"
        ).format(self.tables.documents)
        after = ""
        for _ in range(10**9):  # bounded by the table: each page moves past its last id
            rows = self.conns.read(
                "reading the registry",
                lambda c, after=after: c.execute(query, (after, after_seq, RECORD_PAGE)).fetchall(),  # type: ignore[misc]
                self.tables.serial,
                self.point.serial,
            )
            for doc_id, record, seq in rows:
                yield str(doc_id), cast(DocRecord, {**dict(record), "seq": int(seq)})
            if len(rows) < RECORD_PAGE:
                return
            after = rows[-1][0]

    def changes(self, after: int | None, generation: str | None = None) -> RegistryChanges:
        """As ``Registry.changes``: the commit serial is the sequence number, removals are
        rows of the ``forgotten`` table, each commit's generation a row of ``history``
        (read first, then the records: a commit racing the read is read again next time,
        never missed)."""
        query = sql.SQL("SELECT serial, generation FROM {} WHERE name = %s").format(
            sql.Identifier(CATALOG)
        )
        row = self.conns.read(
            "reading the registry's sequence number",
            lambda c: c.execute(query, (self.tables.name,)).fetchone(),
            self.tables.serial,
            self.point.serial,
        )
        seq, now = (int(row[0]), str(row[1])) if row else (0, "")
        self.point.raise_to(seq)
        behind = after is not None and after > seq  # restored from an older backup
        if after is None or behind or seq - after > CHANGES_KEPT:
            return RegistryChanges(seq, self.records(), True, now)
        if not self._follows(after, generation):
            return RegistryChanges(seq, self.records(), True, now)
        if after >= seq:
            return RegistryChanges(seq, {}, False, now)
        removed = sql.SQL("SELECT doc_id FROM {} WHERE seq > %s AND seq <= %s").format(
            self.tables.forgotten
        )
        gone = self.conns.read(
            "reading the registry's removals",
            lambda c: c.execute(removed, (after, seq)).fetchall(),
            self.tables.serial,
            self.point.serial,
        )
        found: dict[str, DocRecord] = {str(d): {"version": ""} for (d,) in gone}
        found.update(self.pages({"seq": {"$gt": after}}))
        return RegistryChanges(seq, found, False, now)

    def _follows(self, after: int, generation: str | None) -> bool:
        """Whether the newest commit at or before ``after`` had ``generation`` (see
        ``tools.kb.store.chroma.chroma_registry.descends``)."""
        if generation is None:
            return True
        query = sql.SQL(
            "SELECT generation FROM {} WHERE seq <= %s ORDER BY seq DESC LIMIT 1"
        ).format(self.tables.history)
        row = self.conns.read(
            "reading the registry's history",
            lambda c: c.execute(query, (after,)).fetchone(),
            self.tables.serial,
            self.point.serial,
        )
        return row is not None and str(row[0]) == generation

    def records_of(self, doc_ids: Sequence[str]) -> dict[str, DocRecord]:
        """As ``Registry.records_of``: by id, ``RECORD_PAGE`` at a time."""
        query = sql.SQL("SELECT doc_id, record, seq FROM {} WHERE doc_id = ANY(%s)").format(
            self.tables.documents
        )
        wanted = list(dict.fromkeys(doc_ids))
        out: dict[str, DocRecord] = {}
        for start in range(0, len(wanted), RECORD_PAGE):
            page = wanted[start : start + RECORD_PAGE]
            rows = self.conns.read(
                "reading the registry",
                lambda c, page=page: c.execute(query, (page,)).fetchall(),  # type: ignore[misc]
                self.tables.serial,
                self.point.serial,
            )
            for doc_id, record, seq in rows:
                out[str(doc_id)] = cast(DocRecord, {**dict(record), "seq": int(seq)})
        return out

    def tombstones(self) -> list[str]:
        """As ``Registry.tombstones``."""
        query = sql.SQL(f"SELECT doc_id FROM {{}} WHERE {TOMBSTONE} ORDER BY doc_id").format(
            self.tables.documents
        )  # the partial index documents_tombstones
        rows = self.conns.read(
            "reading the registry's interrupted deletions",
            lambda c: c.execute(query).fetchall(),
            self.tables.serial,
            self.point.serial,
        )
        return [str(r[0]) for r in rows]

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
        """Point documents at versions and change the generation, in one transaction (the
        new serial is the records' ``seq``)."""
        generation = uuid.uuid4().hex
        upsert = sql.SQL(
            "INSERT INTO {} (doc_id, record, seq) VALUES (%s, %s, %s) "
            "ON CONFLICT (doc_id) DO UPDATE SET record = EXCLUDED.record, seq = EXCLUDED.seq"
        ).format(self.tables.documents)
        bump = sql.SQL(
            "UPDATE {} SET generation = %s, serial = serial + 1 WHERE name = %s RETURNING serial"
        ).format(sql.Identifier(CATALOG))

        history = sql.SQL("INSERT INTO {} (seq, generation) VALUES (%s, %s)").format(
            self.tables.history
        )
        prune = sql.SQL("DELETE FROM {} WHERE seq <= %s").format(self.tables.history)

        def commit(conn: psycopg.Connection[Any]) -> int:
            got = conn.execute(bump, (generation, self.tables.name)).fetchone()
            serial = int(got[0]) if got else 0
            conn.execute(history, (serial, generation))
            conn.execute(prune, (serial - HISTORY_KEPT,))
            rows = [
                (doc_id, Jsonb({**OPTIONAL_EMPTY, **r, "seq": serial}), serial)
                for doc_id, r in records.items()
            ]
            with conn.cursor() as cur:
                cur.executemany(upsert, rows)
            return serial

        names = ", ".join(list(records)[:3]) + ("…" if len(records) > 3 else "")
        serial = self.conns.write(f"committing {names}", commit)
        self.point.raise_to(serial)
        self.written = generation

    def forget(self, doc_id: str) -> None:
        """Remove a document's record, logged under the next serial in the same
        transaction (the generation stays: the tombstone's commit changed it)."""
        delete = sql.SQL("DELETE FROM {} WHERE doc_id = %s").format(self.tables.documents)
        bump = sql.SQL("UPDATE {} SET serial = serial + 1 WHERE name = %s RETURNING serial").format(
            sql.Identifier(CATALOG)
        )
        log = sql.SQL("INSERT INTO {} (seq, doc_id) VALUES (%s, %s)").format(self.tables.forgotten)

        def forget(conn: psycopg.Connection[Any]) -> int:
            conn.execute(delete, (doc_id,))
            got = conn.execute(bump, (self.tables.name,)).fetchone()
            serial = int(got[0]) if got else 0
            conn.execute(log, (serial, doc_id))
            return serial

        self.point.raise_to(self.conns.write(f"deleting registry entry of {doc_id}", forget))
