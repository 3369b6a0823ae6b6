"""Opening a knowledge base in PostgreSQL (``KBConfig.database_url``): the connections,
the tables, the chunk store and the registry, as ``KnowledgeBase`` uses them."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.kb.store.postgres.pg_connections import PgConnections, ReadPoint
from tools.kb.store.postgres.pg_registry import PgRegistry
from tools.kb.store.postgres.pg_schema import KbTables, PgLocation, drop_tables, open_tables
from tools.kb.store.postgres.pg_store import PgChunkStore
from tools.settings import write_lock_timeout


@dataclass
class PgBackend:
    """One knowledge base's PostgreSQL side."""

    conns: PgConnections
    tables: KbTables
    location: PgLocation
    chunks: PgChunkStore
    registry: PgRegistry

    def writing(self) -> contextlib.AbstractContextManager[None]:
        """The one writer of this knowledge base across machines; its reads go to the
        primary (they decide what to write)."""
        what = f"knowledge base {self.tables.name!r}"
        return self.conns.writer(writer_key(self.tables.name), what, write_lock_timeout())

    def drop(self) -> None:
        drop_tables(self.conns, self.tables)

    def close(self) -> None:
        self.conns.close()

    def stats(self) -> dict[str, Any]:
        """The backend as ``kb stats`` shows it: the primary and each replica's lag."""
        return {
            "backend": "postgresql",
            "primary": f"{self.conns.primary.host}:{self.conns.primary.port}",
            "database": self.conns.primary.where,
            "replicas": self.conns.replica_lag(),
            "reads": dict(self.conns.reads),
        }


def writer_key(collection: str) -> int:
    """The advisory lock key of a knowledge base's writer (63 bits of a hash of its name)."""
    return int.from_bytes(hashlib.sha256(collection.encode()).digest()[:8], "big") >> 1


def open_pg(
    home: Path,
    url: str,
    read_urls: Sequence[str],
    collection: str,
    *,
    model_id: str,
    dimension: int,
    create: bool,
) -> PgBackend:
    """Connect (the primary is probed: an unreachable one is a ``StoreError`` at once),
    create or check the tables, and build the store and registry."""
    conns = PgConnections(url, read_urls)
    try:
        tables = open_tables(
            conns, collection, model_id=model_id, dimension=dimension, create=create
        )
    except BaseException:
        conns.close()
        raise
    point = ReadPoint()
    location = PgLocation(
        path=home / "chroma",
        host=conns.primary.host,
        port=conns.primary.port,
        where=conns.primary.where,
        replicas=tuple(r.where for r in conns.replicas),
    )
    return PgBackend(
        conns,
        tables,
        location,
        PgChunkStore(conns, tables, point),
        PgRegistry(conns, tables, point),
    )
