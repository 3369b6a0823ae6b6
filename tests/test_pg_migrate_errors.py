"""``kb migrate`` names the step that failed (issue 53 item 18): when the vector index
build crashed (PostgreSQL ends every backend after a crash), it said "waiting for the
writer lock": releasing the lock on the dead connection replaced the build's error."""

from __future__ import annotations

from pathlib import Path

import pytest
from psycopg import sql

from cli.main import main
from tests.fakes import hash_model
from tests.test_pg_store import db_url, pg  # noqa: F401
from tools.kb.knowledge_base import KBConfig, KnowledgeBase

# What a crash does to every session of the database, the build's own and the writer's.
CRASH = sql.SQL(
    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
    "WHERE datname = current_database() ORDER BY pid = pg_backend_pid()"
)


def test_a_crashed_index_build_is_named_not_the_writer_lock(
    tmp_path: Path,
    db_url: str,  # noqa: F811
    kb_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    home = tmp_path / "home"
    with KnowledgeBase(KBConfig(home=home), embedding_model=hash_model()) as kb:
        kb.ingest([kb_dir])
    monkeypatch.setattr("tools.kb.store.pg_migrate.vector_index", lambda tables: CRASH)
    assert main(["--home", str(home), "kb", "migrate", "--to", db_url]) != 0
    err = capsys.readouterr().err
    assert "during building the vector index" in err, err
    assert "writer lock" not in err, err
    monkeypatch.undo()  # the next run goes on and builds it
    assert main(["--home", str(home), "kb", "migrate", "--to", db_url]) == 0
    assert "vector index built in" in capsys.readouterr().out
