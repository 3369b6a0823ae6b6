"""The persistent embedding cache: vectors kept in SQLite by model and text, so a rerun
(or the commit after ``Ingester.warm``) embeds only what it has not seen. The cache only
saves work: a damaged file is moved aside, and a run whose cache fails goes on without it.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from tools.kb.embed.embeddings import EmbeddingModel

log = logging.getLogger(__name__)


# SQLite's primary result codes for a damaged file: SQLITE_CORRUPT, SQLITE_NOTADB.
_CORRUPT_CODES = frozenset({11, 26})
ASIDE_ATTEMPTS = 100  # distinct names tried for a corrupt file moved aside


def _sqlite_code(exc: sqlite3.Error) -> int:
    return int(getattr(exc, "sqlite_errorcode", -1)) & 0xFF


def _move_aside(path: Path) -> Path:
    """Rename a damaged file to ``<name>.corrupt-<UTC time>[-n]`` (kept for inspection,
    never overwriting an earlier one), its WAL side files with it; returns the new path."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    for n in range(ASIDE_ATTEMPTS):
        aside = path.with_name(f"{path.name}.corrupt-{stamp}{f'-{n}' if n else ''}")
        if not aside.exists():
            break
    else:
        raise FileExistsError(f"{ASIDE_ATTEMPTS} files named {path.name}.corrupt-{stamp}*")
    path.replace(aside)
    for suffix in ("-wal", "-shm"):  # they belong to the damaged file: they go with it
        side = Path(f"{path}{suffix}")
        if side.exists():
            side.replace(f"{aside}{suffix}")
    return aside


class EmbeddingCache:
    """SQLite cache of vectors keyed by (model id, SHA-256 of the text)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self.broken = False  # set when the file fails mid-run: the run goes on uncached
        self.hits = 0
        self.misses = 0
        try:
            self._conn = self._open()
            return
        except sqlite3.DatabaseError as exc:
            problem: Exception = exc
            # Only a damaged file is moved aside: a locked, unopenable or read-only one
            # may be healthy (another process holds it), so it is left alone.
            if _sqlite_code(exc) in _CORRUPT_CODES:
                try:
                    aside = _move_aside(path)
                    log.warning(
                        "embedding cache %s is corrupt (%s): moved to %s, starting a new one",
                        path,
                        exc,
                        aside,
                    )
                    self._conn = self._open()
                    return
                except (OSError, sqlite3.DatabaseError) as again:
                    problem = again
        # The cache only saves work: go on without it rather than fail the run.
        self.broken = True
        self._conn = sqlite3.connect(":memory:", check_same_thread=False)
        log.warning("embedding cache %s cannot be used (%s): going on without it", path, problem)

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(str(self.path), check_same_thread=False)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS embeddings ("
                " model TEXT NOT NULL, text_hash TEXT NOT NULL, vector BLOB NOT NULL,"
                " PRIMARY KEY (model, text_hash))"
            )
            conn.execute("SELECT count(*) FROM (SELECT 1 FROM embeddings LIMIT 1)").fetchone()
            conn.commit()
        except sqlite3.DatabaseError:
            conn.close()
            raise
        return conn

    def _failed(self, exc: sqlite3.DatabaseError) -> None:
        if not self.broken:
            self.broken = True
            log.warning(
                "embedding cache %s failed (%s): going on without it; delete the file to "
                "rebuild it",
                self.path,
                exc,
            )

    @staticmethod
    def key(text: str) -> str:
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def get_many(self, model_id: str, texts: Sequence[str]) -> list[list[float] | None]:
        keys = [self.key(t) for t in texts]
        found: dict[str, list[float]] = {}
        with self._lock:
            try:
                for start in range(0, len(keys) if not self.broken else 0, 500):
                    batch = keys[start : start + 500]
                    marks = ",".join("?" * len(batch))
                    rows = self._conn.execute(
                        "SELECT text_hash, vector FROM embeddings"
                        f" WHERE model=? AND text_hash IN ({marks})",
                        [model_id, *batch],
                    ).fetchall()
                    for text_hash, blob in rows:
                        found[text_hash] = np.frombuffer(blob, dtype=np.float32).tolist()
            except sqlite3.DatabaseError as exc:
                self._failed(exc)
        out = [found.get(k) for k in keys]
        hits = sum(v is not None for v in out)
        self.hits += hits
        self.misses += len(out) - hits
        return out

    def put_many(
        self, model_id: str, texts: Sequence[str], vectors: Sequence[Sequence[float]]
    ) -> None:
        rows = [
            (model_id, self.key(t), np.asarray(v, dtype=np.float32).tobytes())
            for t, v in zip(texts, vectors, strict=True)
        ]
        with self._lock:
            if self.broken:
                return
            try:
                self._conn.executemany("INSERT OR REPLACE INTO embeddings VALUES (?, ?, ?)", rows)
                self._conn.commit()
            except sqlite3.DatabaseError as exc:
                self._failed(exc)

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def embed_with_cache(
    model: EmbeddingModel, texts: Sequence[str], cache: EmbeddingCache | None
) -> list[list[float]]:
    """Embed passages, computing only the ones the cache does not hold, each distinct
    text once (a giant file repeats boilerplate chunks); what is computed is cached at
    once, so a caller embedding slice by slice loses at most one slice to an interruption."""
    if cache is None:
        return model.embed_documents(texts)
    cached = cache.get_many(model.model_id, texts)
    missing = [i for i, v in enumerate(cached) if v is None]
    if missing:
        distinct = list(dict.fromkeys(texts[i] for i in missing))
        fresh = model.embed_documents(distinct)
        cache.put_many(model.model_id, distinct, fresh)
        by_text = dict(zip(distinct, fresh, strict=True))
        for i in missing:
            cached[i] = list(by_text[texts[i]])
    return [v for v in cached if v is not None]
