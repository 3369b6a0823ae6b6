"""What the knowledge base's registry does not say about a document: who added it, its
original file, where it came from; and the jobs that add documents.

One SQLite file per collection under the data home (``catalog/<collection>.sqlite``), so
the server, a worker and the CLI share it. The registry (``tools.kb.store.chroma.chroma_registry``) stays the
truth of what is searchable: a catalog row without a registry record is not listed, and a
document without a row (ingested by ``hybrid-rag ingest``) is listed with what the
registry knows. Rows are written after the registry commit, so a crash between the two
leaves a row to rewrite on the next run, never a listed document that is not there.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tools.errors import InputError
from tools.kb.documents.originals import process_alive

SCHEMA = """
CREATE TABLE IF NOT EXISTS documents (
    doc_id TEXT PRIMARY KEY, path TEXT NOT NULL, format TEXT NOT NULL, owner TEXT NOT NULL,
    sha256 TEXT NOT NULL, blob TEXT NOT NULL, bytes INTEGER NOT NULL, origin TEXT NOT NULL,
    acl TEXT NOT NULL, updated_at TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS documents_origin ON documents(origin);
CREATE TABLE IF NOT EXISTS changes (what TEXT PRIMARY KEY, n INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (
    job_id TEXT PRIMARY KEY, kind TEXT NOT NULL, owner TEXT NOT NULL, state TEXT NOT NULL,
    created REAL NOT NULL, files TEXT NOT NULL, error TEXT NOT NULL DEFAULT '',
    pid INTEGER NOT NULL DEFAULT 0);
"""
# Added later: who runs a job (host, this process's start) and until when that holds
# unless renewed. A catalog without them gets them when it is opened.
LEASE_COLUMNS = {
    "host": "TEXT NOT NULL DEFAULT ''",
    "instance": "TEXT NOT NULL DEFAULT ''",
    "lease": "REAL NOT NULL DEFAULT 0",
}
LEASE_S = 60.0  # a job's runner renews its lease every LEASE_S / 4; past it, others take over
HOST = socket.gethostname()
INSTANCE = uuid.uuid4().hex  # this process (a restarted process with the same pid is another)
TERMINAL_JOB = frozenset({"done", "failed", "interrupted"})
TERMINAL_FILE = frozenset({"done", "skipped", "failed"})
FILE_STATES = ("queued", "parsing", "embedding", "done", "skipped", "failed")


@dataclass(frozen=True)
class DocumentRow:
    """A document's catalog entry (its original is the blob named ``sha256``)."""

    doc_id: str
    path: str  # the name people know it by: "hr/policy.pdf", a URL, s3://bucket/key
    format: str  # the file's suffix without the dot
    owner: str  # who added it ("" for a source or the CLI)
    sha256: str
    blob: str  # the original's file name in the blob store
    bytes: int
    origin: str  # "upload", or "source:<id>"
    acl: str  # "group:hr,user:alice"; "" is public
    updated_at: str


HIDDEN = frozenset({"blob", "sha256", "size", "acl", "expected_owner"})  # never shown


@dataclass
class JobFile:
    """One file of a job, as the API shows it."""

    name: str
    path: str
    doc_id: str
    status: str = "queued"
    reason: str = ""
    chunks: int = 0
    progress: float = 0.0
    # Not shown: what resuming the file after a restart needs (its stored original, and
    # the document's content hash, size and access list, and the owner its name had when
    # the upload was checked: ``Item.expected_owner``).
    blob: str = ""
    sha256: str = ""
    size: int = 0
    acl: list[str] = field(default_factory=list)
    expected_owner: str | None = None


@dataclass
class Job:
    job_id: str
    kind: str  # "upload", "replace", "sync"
    owner: str
    state: str = "queued"
    files: list[JobFile] = field(default_factory=list)
    error: str = ""

    def view(self) -> dict[str, Any]:
        """The job as the API answers it (``GET /kb/jobs/{id}``)."""
        files = [{k: v for k, v in asdict(f).items() if k not in HIDDEN} for f in self.files]
        done = sum(1.0 if f.status in TERMINAL_FILE else f.progress for f in self.files)
        progress = 1.0 if self.state in TERMINAL_JOB else done / max(len(self.files), 1)
        out: dict[str, Any] = {
            "job_id": self.job_id,
            "kind": self.kind,
            "state": self.state,
            "progress": round(progress, 3),
            "files": files,
        }
        if self.error:
            out["error"] = self.error
        return out


class SharedFile:
    """A SQLite file several threads and processes use: one connection behind a lock,
    write-ahead log, ``schema`` created when missing."""

    def __init__(self, path: Path, schema: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        # Autocommit; transactions are explicit. 30 s: another process's write is short.
        self._db = sqlite3.connect(
            path, timeout=30.0, check_same_thread=False, isolation_level=None
        )
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(schema)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")


class Catalog(SharedFile):
    """The catalog of one collection (thread-safe; several processes share the file)."""

    def __init__(self, path: Path, lease_s: float = LEASE_S) -> None:
        super().__init__(path, SCHEMA)
        self.lease_s = lease_s
        with self._lock:
            have = {row[1] for row in self._db.execute("PRAGMA table_info(jobs)")}
            for name, kind in LEASE_COLUMNS.items():
                if name not in have:
                    with contextlib.suppress(sqlite3.OperationalError):  # another process did
                        self._db.execute(f"ALTER TABLE jobs ADD COLUMN {name} {kind}")

    # -- documents -------------------------------------------------------------------------

    def put(self, row: DocumentRow) -> None:
        values = asdict(row)
        names = ", ".join(values)
        marks = ", ".join(f":{k}" for k in values)
        with self._tx() as db:
            db.execute(f"INSERT OR REPLACE INTO documents ({names}) VALUES ({marks})", values)
            _changed(db)

    def get(self, doc_id: str) -> DocumentRow | None:
        with self._lock:
            row = self._db.execute("SELECT * FROM documents WHERE doc_id = ?", (doc_id,)).fetchone()
        return DocumentRow(*row) if row else None

    def rows(self, origin: str | None = None) -> dict[str, DocumentRow]:
        query, args = "SELECT * FROM documents", ()  # type: tuple[str, tuple[str, ...]]
        if origin is not None:
            query, args = query + " WHERE origin = ?", (origin,)
        with self._lock:
            return {r[0]: DocumentRow(*r) for r in self._db.execute(query, args)}

    def forget(self, doc_id: str) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM documents WHERE doc_id = ?", (doc_id,))
            _changed(db)

    def version(self) -> int:
        """A number that changes with every write to the documents table, in any process
        (one row counted in the same transaction): what a cached listing is keyed on."""
        with self._lock:
            row = self._db.execute("SELECT n FROM changes WHERE what = 'documents'").fetchone()
        return int(row[0]) if row else 0

    def blob_used(self, blob: str) -> bool:
        """Whether a document, or an unfinished file of a job not ended, uses the stored
        original ``blob`` (same bytes are one original: another job may still need it)."""
        with self._lock:
            hit = self._db.execute("SELECT 1 FROM documents WHERE blob = ?", (blob,)).fetchone()
            pending = self._db.execute(
                "SELECT files FROM jobs WHERE state IN ('queued', 'running') AND instr(files, ?)",
                (json.dumps(blob),),
            ).fetchall()
        return hit is not None or any(
            f.get("blob") == blob and f.get("status") not in TERMINAL_FILE
            for (files,) in pending
            for f in json.loads(files)
        )

    # -- jobs ------------------------------------------------------------------------------

    def new_job(self, kind: str, owner: str, files: list[JobFile]) -> Job:
        job = Job(uuid.uuid4().hex, kind, owner, files=files)
        if files and all(f.status in TERMINAL_FILE for f in files):
            job.state = "done" if any(f.status == "done" for f in files) else "failed"
        with self._tx() as db:
            db.execute(
                "INSERT INTO jobs (job_id, kind, owner, state, created, files, pid, host, "
                "instance, lease) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (job.job_id, kind, owner, job.state, time.time(), _files_json(files),
                 os.getpid(), HOST, INSTANCE, time.time() + self.lease_s),
            )  # fmt: skip
        return job

    def save_job(self, job: Job) -> None:
        with self._tx() as db:
            db.execute(
                "UPDATE jobs SET state = ?, files = ?, error = ? WHERE job_id = ?",
                (job.state, _files_json(job.files), job.error, job.job_id),
            )

    def job(self, job_id: str) -> Job:
        with self._lock:
            row = self._db.execute(
                "SELECT job_id, kind, owner, state, files, error FROM jobs WHERE job_id = ?",
                (job_id,),
            ).fetchone()
        if row is None:
            raise InputError(f"no job {job_id!r}")
        files = [JobFile(**f) for f in json.loads(row[4])]
        return Job(row[0], row[1], row[2], row[3], files, row[5])

    def recent_jobs(self, limit: int = 50) -> list[tuple[Job, float]]:
        """The newest jobs first, with when each was created (the admin view's list)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT job_id, created FROM jobs ORDER BY created DESC LIMIT ?", (limit,)
            ).fetchall()
        return [(self.job(job_id), created) for job_id, created in rows]

    def claim_unfinished(self) -> list[Job]:
        """The unfinished jobs whose runner is gone, now this process's: a process of
        this host that is no longer running, or any runner (another host's, a hung one)
        that let its lease expire. A job is claimed by compare-and-set on its runner, so
        when several replicas look at once each job has one claimant."""
        with self._lock:
            rows = self._db.execute(
                "SELECT job_id, pid, host, instance, lease FROM jobs "
                "WHERE state IN ('queued', 'running') AND instance != ?",
                (INSTANCE,),
            ).fetchall()
        claimed = []
        for job_id, pid, host, instance, lease in rows:
            if not _orphaned(pid, host, lease):
                continue
            with self._tx() as db:
                took = db.execute(
                    "UPDATE jobs SET pid = ?, host = ?, instance = ?, lease = ? "
                    "WHERE job_id = ? AND pid = ? AND instance = ?",
                    (os.getpid(), HOST, INSTANCE, time.time() + self.lease_s, job_id, pid,
                     instance),
                ).rowcount  # fmt: skip
            if took == 1:
                claimed.append(self.job(job_id))
        return claimed

    def renew_leases(self) -> int:
        """Extend the leases of this process's unfinished jobs; returns how many."""
        with self._tx() as db:
            return db.execute(
                "UPDATE jobs SET lease = ? WHERE instance = ? AND state IN ('queued', 'running')",
                (time.time() + self.lease_s, INSTANCE),
            ).rowcount

    def interrupt(self, job: Job) -> None:
        """Report a claimed job as interrupted (its finished files stay done: each
        document was committed whole or not at all)."""
        for f in job.files:
            if f.status not in TERMINAL_FILE:
                f.status, f.reason = "failed", "interrupted by a server restart: send it again"
        job.state = "interrupted"
        self.save_job(job)


def _changed(db: sqlite3.Connection) -> None:
    db.execute(
        "INSERT INTO changes VALUES ('documents', 1) ON CONFLICT(what) DO UPDATE SET n = n + 1"
    )


def _orphaned(pid: int, host: str, lease: float) -> bool:
    """Whether a job run by another process start has lost its runner."""
    if host in (HOST, "") and (pid == os.getpid() or not process_alive(pid)):
        return True  # gone from this host (the same pid: this process restarted)
    return lease < time.time()


def _files_json(files: list[JobFile]) -> str:
    return json.dumps([asdict(f) for f in files])
