"""Connections of the PostgreSQL knowledge base: writes to the primary, reads to replicas.

``PgConnections`` holds one small psycopg pool per server. Writes (and the reads of a
writer, which must see the latest commit) go to the primary. Other reads go round-robin
to the replicas; a replica that fails (refused, reset, killed mid-query) is skipped for
``REPLICA_PAUSE_S`` (twice as long after each failure in a row, at most
``REPLICA_PAUSE_MAX_S``) and the read is tried on the next one, then on the primary. Every
wait is bounded: a connection is awaited at most the store timeout
(``HYBRID_RAG_STORE_TIMEOUT``, cut to the run's deadline) and a statement runs at most
that long.

**Reading your own writes.** Each commit raises the collection's ``serial`` (beside its
generation, in one transaction). A read states the serial it needs (``ReadPoint``: the
highest this process committed or saw); a replica whose replayed serial is lower has not
caught up, so the read goes on to the next server and, at worst, the primary. So a
one-file change is searchable at once, with replicas too.

``pg_errors`` is the one mapping of psycopg's errors to ``StoreError``/``ConfigError``,
naming the step and the server (``user@host:port/dbname``), never a password.
"""

from __future__ import annotations

import contextlib
import itertools
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from tools.errors import ConfigError, StoreError
from tools.kb.store.postgres.pg_urls import PgServer, parse_database_url
from tools.kb.store.store_deadline import bounded_timeout
from tools.settings import store_timeout

T = TypeVar("T")
POOL_MAX = 4  # connections per server and process: searches run on a few threads
REPLICA_PAUSE_S = 10.0  # a failed replica is not tried again for this long...
REPLICA_PAUSE_MAX_S = 120.0  # ...doubled while it keeps failing, up to this
REPLICA_WAIT_S = 3.0  # at most this long for a replica's connection (then the next one)
# SQLSTATE classes that mean the configuration is wrong, not that the server is away:
# 28 = invalid authorization (bad password, unknown role), 3D = no such database.
CONFIG_STATES = ("28", "3D")
# The same refusals at connection time, where libpq gives a message but no SQLSTATE.
LOGIN_REFUSED = re.compile(
    r"FATAL: +(database \S+ does not exist|role \S+ does not exist|password authentication "
    r"failed|no pg_hba\.conf entry)"
)


class ReplicaBehind(Exception):
    """A replica has not replayed the serial a read needs (the read moves on)."""


@contextlib.contextmanager
def pg_errors(server: PgServer, what: str) -> Iterator[None]:
    """psycopg's errors as ``StoreError`` (``ConfigError`` for a bad login or database),
    naming ``what`` and the server, without a password."""
    try:
        yield
    except PoolTimeout as exc:
        raise StoreError(
            f"PostgreSQL at {server.where} gave no connection in time during {what} "
            "(HYBRID_RAG_STORE_TIMEOUT)"
        ) from exc
    except psycopg.Error as exc:
        state = getattr(exc, "sqlstate", None) or ""
        reason = server.clean(str(exc) or type(exc).__name__)[:300]
        bad_login = state[:2] in CONFIG_STATES or LOGIN_REFUSED.search(reason) is not None
        kind = ConfigError if bad_login else StoreError
        raise kind(f"PostgreSQL at {server.where} failed during {what}: {reason}") from exc


@dataclass
class ReadPoint:
    """The registry serial reads must reflect: the highest this process committed or
    read. Shared by a collection's chunk store and registry."""

    serial: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def raise_to(self, serial: int) -> None:
        with self._lock:
            self.serial = max(self.serial, serial)


def _timeout_ms() -> int:
    return max(1, int(bounded_timeout(store_timeout()) * 1000))


def _lock(conn: psycopg.Connection[Any], key: int, what: str, timeout: float) -> None:
    """The advisory lock ``key`` on ``conn``, awaited at most ``timeout`` s."""
    try:
        conn.execute(f"SET lock_timeout = {max(1, int(timeout * 1000))}")
        conn.execute("SELECT pg_advisory_lock(%s)", (key,))
    except psycopg.errors.LockNotAvailable as exc:
        raise StoreError(
            f"another writer held {what} for more than {timeout:g} s "
            "(HYBRID_RAG_WRITE_LOCK_TIMEOUT)"
        ) from exc
    finally:
        conn.execute("SET lock_timeout = 0")


def _open_pool(server: PgServer) -> ConnectionPool[Any]:
    timeout = store_timeout()
    return ConnectionPool(
        server.url,
        min_size=1,
        max_size=POOL_MAX,
        open=False,
        timeout=timeout,
        reconnect_timeout=timeout,
        check=ConnectionPool.check_connection,
        kwargs={"autocommit": True, "connect_timeout": max(1, int(timeout))},
    )


class PgConnections:
    """The primary's pool (writes, a writer's reads) and the replicas' (other reads)."""

    def __init__(self, primary: str, replicas: Sequence[str] = ()) -> None:
        self.primary = parse_database_url(primary)
        self.replicas = [parse_database_url(u, f"read URL {i + 1}") for i, u in enumerate(replicas)]
        self.reads: Counter[str] = Counter()  # reads served per server (where)
        self._pools: dict[str, ConnectionPool[Any]] = {}
        self._paused: dict[str, float] = {}  # where -> monotonic time it may be tried again
        self._failures: Counter[str] = Counter()  # where -> failures in a row
        self._turn = itertools.count()
        self._lock = threading.Lock()
        self.primary_reads = threading.local()  # .on: this thread reads from the primary
        self.probe(self.primary, "connecting")

    def probe(self, server: PgServer, what: str) -> None:
        """One bounded connection, so an unreachable server is named at once."""
        timeout = max(1, int(bounded_timeout(store_timeout())))
        with pg_errors(server, what), psycopg.connect(server.url, connect_timeout=timeout):
            pass

    def _pool(self, server: PgServer) -> ConnectionPool[Any]:
        with self._lock:
            pool = self._pools.get(server.where)
            if pool is None:
                pool = self._pools[server.where] = _open_pool(server)
                pool.open(wait=False)
            return pool

    def run(self, server: PgServer, what: str, fn: Callable[[psycopg.Connection[Any]], T]) -> T:
        """``fn`` on a pooled connection of ``server``, in one transaction, bounded."""
        wait = bounded_timeout(store_timeout())
        if server is not self.primary:
            wait = min(wait, REPLICA_WAIT_S)
        with (
            pg_errors(server, what),
            self._pool(server).connection(timeout=wait) as conn,
            conn.transaction(),
        ):
            conn.execute(f"SET LOCAL statement_timeout = {_timeout_ms()}")
            return fn(conn)

    def write(self, what: str, fn: Callable[[psycopg.Connection[Any]], T]) -> T:
        return self.run(self.primary, what, fn)

    @contextlib.contextmanager
    def on_primary(self) -> Iterator[None]:
        """Reads of this thread go to the primary in this block (a writer's)."""
        before = getattr(self.primary_reads, "on", False)
        self.primary_reads.on = True
        try:
            yield
        finally:
            self.primary_reads.on = before

    @contextlib.contextmanager
    def writer(self, key: int, what: str, timeout: float) -> Iterator[None]:
        """One writer of ``key`` across every machine: an advisory lock on the primary,
        held by a connection of its own for the block, awaited at most ``timeout`` s (the
        data home's file lock only serialises the writers of one machine). Re-entrant
        within a thread."""
        if getattr(self.primary_reads, "writing", False):
            yield
            return
        pool = self._pool(self.primary)
        # Only taking the lock is "waiting for the writer lock": a step of the block that
        # fails names itself (pg_errors of its own), and the release below never hides it.
        with pg_errors(self.primary, f"waiting for the writer lock of {what}"):
            conn = pool.getconn(timeout=bounded_timeout(store_timeout()))
        try:
            with pg_errors(self.primary, f"waiting for the writer lock of {what}"):
                _lock(conn, key, what, timeout)
            self.primary_reads.writing = True
            with self.on_primary():
                yield
        except BaseException:
            self.primary_reads.writing = False
            with contextlib.suppress(psycopg.Error):  # a broken session lost its lock with it
                conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
            raise
        else:
            self.primary_reads.writing = False
            with pg_errors(self.primary, f"releasing the writer lock of {what}"):
                conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
        finally:
            pool.putconn(conn)

    def read_order(self) -> list[PgServer]:
        """The servers a read tries, in order: the replicas not paused, starting with the
        next in turn, then the primary."""
        if getattr(self.primary_reads, "on", False) or not self.replicas:
            return [self.primary]
        now = time.monotonic()
        start = next(self._turn) % len(self.replicas)
        turn = self.replicas[start:] + self.replicas[:start]
        return [r for r in turn if self._paused.get(r.where, 0.0) <= now] + [self.primary]

    def read(
        self,
        what: str,
        fn: Callable[[psycopg.Connection[Any]], T],
        serial_of: Callable[[psycopg.Connection[Any]], int] | None = None,
        need: int = 0,
    ) -> T:
        """``fn`` on a replica that has replayed serial ``need`` (``serial_of`` reads it
        in the same transaction), else the next replica, else the primary."""
        order = self.read_order()
        for server in order[:-1]:
            try:
                got = self.run(server, what, lambda c: _checked(c, fn, serial_of, need))
            except ReplicaBehind:
                continue
            except StoreError:  # refused, reset, killed mid-query: skip it for a while
                self._failures[server.where] += 1
                pause = REPLICA_PAUSE_S * 2 ** (self._failures[server.where] - 1)
                self._paused[server.where] = time.monotonic() + min(pause, REPLICA_PAUSE_MAX_S)
                continue
            self._failures.pop(server.where, None)
            self.reads[server.where] += 1
            return got
        got = self.run(self.primary, what, fn)
        self.reads[self.primary.where] += 1
        return got

    def replica_lag(self) -> list[dict[str, Any]]:
        """Each replica's lag behind the primary: ``lag_bytes`` (WAL not yet replayed) and
        ``lag_seconds`` (0 when it has replayed everything, else since its last replayed
        commit); ``status`` ``"unreachable"`` (and no figures) when it does not answer."""
        current = self.run(
            self.primary, "reading the WAL position",
            lambda c: str(c.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0]),  # type: ignore[index]
        )  # fmt: skip
        out: list[dict[str, Any]] = []
        for server in self.replicas:
            try:
                lag_bytes, seconds = self.run(
                    server, "reading replica lag", lambda c: _lag(c, current)
                )
                status = "streaming"
            except StoreError:
                lag_bytes, seconds, status = None, None, "unreachable"
            out.append(
                {
                    "replica": server.where,
                    "status": status,
                    "lag_bytes": lag_bytes,
                    "lag_seconds": seconds,
                }
            )
        return out

    def close(self) -> None:
        with self._lock:
            pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            pool.close(timeout=5.0)


def _checked(
    conn: psycopg.Connection[Any],
    fn: Callable[[psycopg.Connection[Any]], T],
    serial_of: Callable[[psycopg.Connection[Any]], int] | None,
    need: int,
) -> T:
    if serial_of is not None and serial_of(conn) < need:
        raise ReplicaBehind
    return fn(conn)


def _lag(conn: psycopg.Connection[Any], primary_lsn: str) -> tuple[int, float]:
    row = conn.execute(
        "SELECT pg_wal_lsn_diff(%s::pg_lsn, pg_last_wal_replay_lsn())::bigint, "
        "CASE WHEN pg_last_wal_replay_lsn() >= %s::pg_lsn THEN 0 ELSE "
        "extract(epoch FROM now() - pg_last_xact_replay_timestamp()) END",
        (primary_lsn, primary_lsn),
    ).fetchone()
    if row is None or row[0] is None:
        raise StoreError("not a replica (no WAL replayed)")
    return max(0, int(row[0])), round(float(row[1] or 0.0), 3)
