"""Postgres checkpoints for the Python API (the ``postgres`` extra).

``graph.persistence.open_graph("postgresql://...")`` (or ``$HYBRID_RAG_CHECKPOINT_URL``)
lands here. Several processes (replicas, workers, a CLI) can then continue the same thread:
the state lives in one Postgres database, through ``langgraph-checkpoint-postgres``.

What this module adds to the library's ``AsyncPostgresSaver``:

* **A time-limited, clear start.** The server is probed once with ``connect_timeout``
  (the URL's, else 10 s); a malformed URL is a ``ConfigError`` and an unreachable,
  silent or refusing server a ``CheckpointError``, each naming the server
  (``user@host:port/dbname``), never the password.
* **Schema set-up once**, under a Postgres advisory lock, so processes starting together
  do not race on ``CREATE TABLE``.
* **Survives a server restart.** Connections come from a small pool that checks each one
  before handing it out, so a connection the restart broke is replaced and the thread
  continues. While the server is down an operation waits up to ``connect_timeout`` for a
  connection and then fails with a ``CheckpointError`` naming the server.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import DictRow, dict_row
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from graph.thread_guard import OneWriterPerThread, thread_key
from tools.errors import CheckpointError, ConfigError, redact_credentials

CONNECT_TIMEOUT_S = 10
# The saver serialises its queries; one more holds a thread's lock while a turn is saved,
# and a spare covers the pool's check.
POOL_MAX_SIZE = 5
# pg_advisory_lock key held while the checkpoint tables are created or migrated.
SETUP_LOCK_KEY = 0x68796272_6964_7261  # "hybrid-ra"; any 63-bit constant would do
POSTGRES_URL = re.compile(r"^postgres(?:ql)?://", re.IGNORECASE)


def is_postgres_url(value: str) -> bool:
    return bool(POSTGRES_URL.match(value.strip()))


@dataclass(frozen=True)
class PostgresTarget:
    """A parsed checkpoint URL: what to connect to and how to name it in messages."""

    url: str
    where: str  # "user@host:port/dbname": no password
    password: str  # kept only to redact it from driver messages
    connect_timeout: int
    timeout_in_url: bool

    def redact(self, text: str) -> str:
        """One line of ``text`` without the password."""
        line = " ".join(text.split())
        return line.replace(self.password, "***") if self.password else line


def parse_postgres_url(url: str) -> PostgresTarget:
    """Check a ``postgresql://`` URL without connecting; ``ConfigError`` names the problem."""
    url = url.strip()
    if not is_postgres_url(url):
        raise ConfigError(
            "not a Postgres URL (postgresql://user@host:port/dbname): "
            + redact_credentials(repr(url))
        )
    try:
        params = conninfo_to_dict(url)
    except psycopg.Error as exc:
        reason = redact_credentials(" ".join(str(exc).split()))  # psycopg quotes the URL
        raise ConfigError(f"invalid Postgres checkpoint URL: {reason}") from exc
    password = str(params.get("password") or "")
    host = str(params.get("host") or params.get("hostaddr") or "localhost")
    port = str(params.get("port") or "5432")
    where = f"{params.get('user') or 'postgres'}@{host}:{port}/{params.get('dbname') or ''}"
    if not all(p.isdigit() and 1 <= int(p) <= 65535 for p in port.split(",")):
        raise ConfigError(f"invalid port {port!r} in the Postgres checkpoint URL for {host}")
    raw_timeout = params.get("connect_timeout")
    try:
        timeout = int(str(raw_timeout)) if raw_timeout is not None else CONNECT_TIMEOUT_S
    except ValueError as exc:
        raise ConfigError(
            f"connect_timeout must be a whole number of seconds, got {raw_timeout!r} ({where})"
        ) from exc
    if timeout <= 0:
        raise ConfigError(f"connect_timeout must be positive, got {timeout} ({where})")
    return PostgresTarget(url, where, password, timeout, raw_timeout is not None)


class GuardedPostgresSaver(OneWriterPerThread, AsyncPostgresSaver):
    """``AsyncPostgresSaver`` whose connection failures are ``CheckpointError``s naming the
    server (every query of the saver goes through ``_cursor``, so that is the one place),
    and which saves only onto a thread's latest checkpoint (``graph.thread_guard``)."""

    def __init__(self, conn: AsyncConnectionPool[Any], target: PostgresTarget) -> None:
        super().__init__(conn)
        self.target = target

    @asynccontextmanager
    async def _cursor(self, *, pipeline: bool = False) -> AsyncIterator[Any]:
        async with self._named_errors(), super()._cursor(pipeline=pipeline) as cursor:
            yield cursor

    @asynccontextmanager
    async def thread_lock(self, thread_id: str) -> AsyncIterator[None]:
        """The thread's advisory lock, held by a transaction on a pooled connection of its
        own (not ``_cursor``: the saver's own queries run while it is held)."""
        pool: AsyncConnectionPool[Any] = self.conn  # type: ignore[assignment]
        async with self._named_errors(), pool.connection() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (thread_key(thread_id),))
            yield

    @asynccontextmanager
    async def _named_errors(self) -> AsyncIterator[None]:
        try:
            yield
        except PoolTimeout as exc:
            raise CheckpointError(
                f"the checkpoint database (Postgres at {self.target.where}) gave no connection "
                f"within {self.target.connect_timeout} s: is the server running?"
            ) from exc
        except psycopg.OperationalError as exc:
            raise CheckpointError(
                f"the checkpoint database (Postgres at {self.target.where}) failed: "
                f"{self.target.redact(str(exc))}"
            ) from exc


def _connection_kwargs(target: PostgresTarget) -> dict[str, Any]:
    # What AsyncPostgresSaver needs of a connection (as in its from_conn_string).
    kwargs: dict[str, Any] = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    if not target.timeout_in_url:
        kwargs["connect_timeout"] = target.connect_timeout
    return kwargs


async def _connect(target: PostgresTarget) -> psycopg.AsyncConnection[DictRow]:
    try:
        return await psycopg.AsyncConnection.connect(target.url, **_connection_kwargs(target))
    except psycopg.Error as exc:
        raise CheckpointError(
            f"cannot connect to the checkpoint database (Postgres at {target.where}) within "
            f"{target.connect_timeout} s: {target.redact(str(exc))}"
        ) from exc


async def _setup(target: PostgresTarget) -> None:
    """Create or migrate the checkpoint tables, one process at a time."""
    conn = await _connect(target)
    try:
        await conn.execute("SELECT pg_advisory_lock(%s)", (SETUP_LOCK_KEY,))
        await AsyncPostgresSaver(conn).setup()  # closing the session releases the lock
    except psycopg.Error as exc:
        raise CheckpointError(
            f"cannot set up the checkpoint tables in Postgres at {target.where}: "
            f"{target.redact(str(exc))}"
        ) from exc
    finally:
        await conn.close()


@asynccontextmanager
async def open_postgres_saver(url: str) -> AsyncIterator[GuardedPostgresSaver]:
    """A checkpointer on the Postgres database at ``url`` (its pool closed on exit)."""
    target = parse_postgres_url(url)
    await _setup(target)
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        target.url,
        kwargs=_connection_kwargs(target),
        min_size=1,
        max_size=POOL_MAX_SIZE,
        open=False,
        check=AsyncConnectionPool.check_connection,
        timeout=target.connect_timeout,
        name="hybrid-rag-checkpoints",
    )
    try:
        await pool.open(wait=True, timeout=target.connect_timeout)
    except PoolTimeout as exc:
        await pool.close()
        raise CheckpointError(
            f"cannot connect to the checkpoint database (Postgres at {target.where}) within "
            f"{target.connect_timeout} s"
        ) from exc
    try:
        yield GuardedPostgresSaver(pool, target)
    finally:
        await pool.close()
