"""The backup and restore of docs/DEPLOYMENT.md ("Backup and restore"), run without Docker:
the same ``pg_dump`` / ``pg_restore`` options against a real PostgreSQL on loopback, the
same ``tar`` of a Chroma data folder; what was written after the backup is gone after the
restore, what was there before is back."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes import hash_model
from tests.servers import PostgresServer
from tests.test_docs import BLOCKS, ROOT
from tools.kb.knowledge_base import KBConfig, KnowledgeBase
from tools.settings import chroma_path


def backup_block() -> str:
    blocks = [b.code for b in BLOCKS if b.doc == "docs/DEPLOYMENT.md" and "pg_restore" in b.code]
    assert len(blocks) == 1, "docs/DEPLOYMENT.md: one backup and restore block"
    return blocks[0]


def documented(program: str) -> list[str]:
    """The options the docs give ``program`` (inside ``docker compose exec`` or
    ``docker run ... sh -c``), without its redirections."""
    for line in backup_block().splitlines():
        m = re.search(rf"\b{program}\s+(?P<args>[^<>&']*)", line)
        if m:
            return shlex.split(m["args"])
    raise AssertionError(f"no {program} command in the backup block")


def test_the_documented_postgres_backup_restores_the_database(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    import psycopg

    url = postgres_server.create_database("aegra")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE thread (id text PRIMARY KEY, owner text)")
        conn.execute("INSERT INTO thread VALUES ('t1', 'alice'), ('t2', 'bob')")
    connect = ["-h", postgres_server.host, "-p", str(postgres_server.port), "-U", "postgres"]
    dump_args = documented("pg_dump")
    assert dump_args == ["-U", "hybrid", "--format=custom", "aegra"]
    dump = tmp_path / "aegra.dump"
    with dump.open("wb") as out:
        subprocess.run(
            [str(postgres_server.bin_dir / "pg_dump"), *connect, *dump_args[2:]],
            stdout=out, check=True, timeout=120,
        )  # fmt: skip
    with psycopg.connect(url, autocommit=True) as conn:  # after the backup
        conn.execute("DELETE FROM thread WHERE id = 't1'")
        conn.execute("INSERT INTO thread VALUES ('t3', 'mallory')")
    restore_args = documented("pg_restore")
    assert restore_args == ["-U", "hybrid", "--clean", "--if-exists", "--no-owner", "-d", "aegra"]
    with dump.open("rb") as dumped:
        subprocess.run(
            [str(postgres_server.bin_dir / "pg_restore"), *connect, *restore_args[2:]],
            stdin=dumped, check=True, timeout=120,
        )  # fmt: skip
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT id, owner FROM thread ORDER BY id").fetchall()
    assert rows == [("t1", "alice"), ("t2", "bob")]


def test_the_documented_chroma_backup_restores_the_knowledge_base(tmp_path: Path) -> None:
    if shutil.which("tar") is None:
        pytest.skip("tar is not installed")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "leave.md").write_text("# Leave\n\nAnnual leave is 18 days after six years.\n")
    home = tmp_path / "home"
    with KnowledgeBase(KBConfig(home=home), embedding_model=hash_model()) as kb:
        kb.ingest([docs])
    store = chroma_path(home)  # the layout of `chroma run --path`
    backup = tmp_path / "chroma.tgz"
    tar_create = documented("tar")
    assert tar_create == ["-C", "/chroma", "-czf", "/backup/chroma.tgz", "."]
    subprocess.run(["tar", "-C", str(store), "-czf", str(backup), "."], check=True, timeout=120)
    (docs / "later.md").write_text("# Later\n\nWritten after the backup.\n")
    with KnowledgeBase(KBConfig(home=home), embedding_model=hash_model()) as kb:
        kb.ingest([docs])
        assert kb.stats()["documents"] == 2
    assert "tar -C /chroma -xzf /backup/chroma.tgz" in backup_block()
    shutil.rmtree(store)
    store.mkdir()
    subprocess.run(["tar", "-C", str(store), "-xzf", str(backup)], check=True, timeout=120)
    # A new process, as the restarted Chroma server is: chromadb keeps a store it opened
    # in its process's memory.
    check = (
        "from tests.fakes import hash_model\n"
        "from tools.kb.knowledge_base import KBConfig, KnowledgeBase\n"
        f"with KnowledgeBase(KBConfig(home={str(home)!r}), embedding_model=hash_model()) as kb:\n"
        "    print(kb.stats()['documents_list'], kb.search('annual leave', 3)[0].text)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", check], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("['leave.md']") and "18 days" in done.stdout
