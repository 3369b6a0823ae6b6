"""The PostgreSQL side of ``bench_scale.py`` (``--backend postgres``): the cluster a size
runs against, filled by ingest or by ``hybrid-rag kb migrate`` from a kept home, and its
memory."""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.harness import REPO
from tools.kb.knowledge_base import KBConfig


@contextmanager
def store(
    backend: str, home: Path, replicas: int, from_home: Path | None = None, cold: bool = False
) -> Iterator[tuple[KBConfig, Any, dict[str, Any]]]:
    """The knowledge base's configuration for ``backend``, the PostgreSQL cluster behind
    it (None when embedded) and the figures of filling it from ``from_home``."""
    if backend == "embedded":
        yield KBConfig(home=home, collection="scale"), None, {}
        return
    from tests.pg_cluster import pg_cluster  # the dev extra's PostgreSQL; bench-only

    moved: dict[str, Any] = {}
    prepare = None
    if from_home is not None:
        if not cold:  # the lexical index and snapshot a server of that home would keep
            shutil.copytree(from_home / "bm25", home / "bm25")

        def prepare(url: str) -> None:
            moved.update(migrate_home(from_home, url))

    with pg_cluster(home / "pg-logs", replicas, prepare=prepare) as cluster:
        config = KBConfig(home=home, collection="scale", database_url=cluster.primary_url,
                          read_urls=tuple(cluster.replica_urls))  # fmt: skip
        yield config, cluster, moved


def migrate_home(home: Path, url: str) -> dict[str, Any]:
    """``hybrid-rag kb migrate`` of ``home``'s knowledge base into ``url``, in its own
    process (the embedded store it opens is not the serving process's memory), timed, and
    the database's size after it (one node's disk)."""
    import psycopg
    from psycopg import sql

    from tools.kb.store.postgres.pg_schema import schema_name

    started = time.perf_counter()
    cmd = [sys.executable, "-m", "cli.main", "--home", str(home), "kb", "migrate",
           "--to", url, "--collection", "scale"]  # fmt: skip
    done = subprocess.run(cmd, cwd=REPO, check=True, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    said = done.stdout.strip().splitlines()[-1]
    print(f"  {said} ({seconds:.0f} s)", flush=True)
    built = re.search(r"vector index built in ([0-9.]+) s", said)
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
        table = sql.SQL("SELECT count(*) FROM {}.chunks").format(
            sql.Identifier(schema_name("scale"))
        )
        chunks = conn.execute(table).fetchone()
    return {
        "migrate_s": round(seconds, 1),
        "migrate_chunks_per_s": round(int(chunks[0]) / seconds, 1) if chunks else None,
        "migrate_index_build_s": float(built.group(1)) if built else None,
        "postgres_database_mb": round(int(row[0]) / 2**20) if row else None,
    }


def cluster_pss_mb(cluster: Any) -> int:
    """Proportional memory of every process of the cluster (shared buffers counted once);
    a backend that exits while it is read (a connection closed) counts nothing."""
    import psutil

    total = 0
    for proc in cluster.processes():
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            total += proc.memory_full_info().pss
    return round(total / 2**20)
