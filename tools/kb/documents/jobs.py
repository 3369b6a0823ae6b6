"""Jobs that add documents: an upload's files checked and stored at once, then parsed,
embedded and committed one file at a time by one worker thread.

A job's state lives in the catalog (``tools.kb.documents.catalog``), so any request (or process)
can follow it. A bad file (unsupported type, over the size limit, unreadable by its
loader) fails alone with the reason; the others go on. Each file is committed whole or
not at all (the registry protocol), so a job stopped by a restart leaves every document
as it was before or as it is after that file. A running server keeps a lease on its jobs;
when it dies (or stops renewing), a live replica, or the next server started, claims such
jobs (``Catalog.claim_unfinished``, ``JobRunner.watch``) and finishes them from the stored
originals (``resume_items``); one it cannot resume is reported interrupted.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, replace
from pathlib import Path

from tools.access.acl import ACL
from tools.errors import HybridRagError, InputError
from tools.kb.documents.catalog import TERMINAL_FILE, Catalog, Job, JobFile
from tools.kb.documents.library import Item, Library
from tools.kb.documents.originals import suffix_of
from tools.kb.documents.scheduler import FairPool
from tools.kb.ingest.formats import LoadLimits
from tools.kb.ingest.formats.base import MB
from tools.kb.ingest.loaders import SUPPORTED_SUFFIXES
from tools.settings import job_workers

UPLOAD_PREFIX = "upload:"  # uploaded documents' doc_ids: "upload:hr/policy.pdf"
SAVE_EVERY_S = 0.25  # progress inside a file is saved at most this often
MAX_NAME = 255
RESUMABLE = ("upload", "replace")  # job kinds whose files are stored originals
log = logging.getLogger("hybrid_rag.kb")


@dataclass(frozen=True)
class Upload:
    """One file of a request: its bytes, or the file it was streamed to on arrival
    (``server/upload_stream.py``: ``spooled`` is None when it was over the size limit and
    not kept; ``size`` is then its real size)."""

    name: str
    data: bytes = b""
    spooled: Path | None = None
    size: int = -1  # set when streamed: all its bytes, kept or not
    sha256: str = ""  # set when streamed
    blank: bool = False  # set when streamed: nothing but whitespace

    @property
    def length(self) -> int:
        return self.size if self.size >= 0 else len(self.data)

    @property
    def empty(self) -> bool:
        return self.blank if self.size >= 0 else not self.data.strip()


def clean_path(folder: str, name: str) -> str:
    """``folder/name`` as a relative POSIX path, the folders in ``name`` kept
    (``sub/a.md``); raises ``InputError`` naming the problem."""
    parts = [p.strip() for p in name.replace("\\", "/").split("/") if p.strip()]
    if not parts or name.replace("\\", "/").rstrip().endswith("/"):
        raise InputError(f"file name {name!r} is not usable: give the file a name")
    if any(p in (".", "..") or len(p) > MAX_NAME for p in parts):
        raise InputError(f"file name {name!r} is not usable: no '.' or '..' parts")
    folders = [p for p in folder.replace("\\", "/").split("/") if p.strip()]
    if any(p in (".", "..") or len(p) > MAX_NAME for p in folders):
        raise InputError(f"folder {folder!r} is not usable: no '.' or '..' parts")
    return "/".join([*folders, *parts])


def upload_id(path: str) -> str:
    """The doc_id of an uploaded document at ``path``."""
    return f"{UPLOAD_PREFIX}{path}"


def owned_by_others(
    library: Library, uploads: Sequence[Upload], folder: str, may_change: Callable[[str], bool]
) -> list[str]:
    """The paths of ``uploads`` that name a document whose owner ``may_change`` does not
    allow: an upload never replaces a document its sender may not change (the rule of
    the document API's PUT)."""
    taken = []
    for upload in uploads:
        try:
            path = clean_path(folder, upload.name)
        except InputError:
            continue  # refused on its own by plan()
        row = library.catalog.get(upload_id(path))
        if row is not None and not may_change(row.owner):
            taken.append(path)
    return taken


def _check(upload: Upload, limits: LoadLimits) -> str:
    """Why ``upload`` cannot be a document, or ""."""
    suffix = suffix_of(upload.name)
    if suffix not in SUPPORTED_SUFFIXES:
        kinds = ", ".join(sorted(SUPPORTED_SUFFIXES))
        return f"unsupported file type {suffix or 'without a suffix'!r}: use one of {kinds}"
    if upload.length > limits.max_file_bytes:
        size = upload.length / MB
        return f"file is {size:,.1f} MB, over the {limits.max_file_mb:g} MB limit ($HYBRID_RAG_MAX_FILE_MB)"
    if upload.empty:
        return "empty file"
    return ""


def plan(
    library: Library,
    uploads: Sequence[Upload],
    *,
    owner: str,
    acl: ACL,
    folder: str = "",
    doc_ids: Sequence[str] | None = None,
    limits: LoadLimits | None = None,
) -> tuple[list[JobFile], list[Item | None]]:
    """Check and store each upload's original; a file that cannot be a document gets
    its reason now (its item is ``None``). ``doc_ids`` replace named documents."""
    limits = limits or LoadLimits.from_env()
    files: list[JobFile] = []
    items: list[Item | None] = []
    first: dict[str, str] = {}  # path -> the name of the file of this request that has it
    for n, upload in enumerate(uploads):
        try:
            path = clean_path(folder, upload.name)
        except InputError as exc:
            files.append(JobFile(upload.name, "", "", "failed", str(exc)))
            items.append(None)
            continue
        doc_id = doc_ids[n] if doc_ids else upload_id(path)
        if path in first:  # two files of one request never become one document
            reason = f"{path} is already a file of this upload ({first[path]!r}): rename one"
            files.append(JobFile(upload.name, path, doc_id, "failed", reason))
            items.append(None)
            continue
        first[path] = upload.name
        problem = _check(upload, limits)
        if problem:
            files.append(JobFile(upload.name, path, doc_id, "failed", problem))
            items.append(None)
            continue
        if upload.spooled is not None:
            sha, blob = library.originals.adopt(
                upload.spooled, upload.sha256, suffix_of(upload.name)
            )
        else:
            sha, blob = library.originals.put(upload.data, suffix_of(upload.name))
        size = upload.length
        row = None if doc_ids else library.catalog.get(doc_id)
        expected = None if doc_ids else (row.owner if row else "")
        files.append(JobFile(upload.name, path, doc_id, blob=blob, sha256=sha, size=size,
                             acl=list(acl), expected_owner=expected))  # fmt: skip
        items.append(Item(doc_id, path, blob, sha, size, acl, "upload", owner, expected))
    return files, items


def resume_items(library: Library, job: Job) -> list[Item | None] | None:
    """The items that finish ``job``, which a stopped process left unfinished: each file
    not yet finished from its stored original, again from the start (a document is
    committed whole or not at all). None when the job cannot be resumed: a source's
    sync (its next sync does the work) or a file recorded without what resuming needs."""
    if job.kind not in RESUMABLE:
        return None
    items: list[Item | None] = []
    for f in job.files:
        if f.status in TERMINAL_FILE:
            items.append(None)
        elif not (f.blob and f.sha256):
            return None
        elif not library.originals.path(f.blob).is_file():
            f.status, f.reason = "failed", "its stored original is gone: send it again"
            items.append(None)
        else:
            f.status, f.progress, f.reason = "queued", 0.0, ""
            items.append(Item(f.doc_id, f.path, f.blob, f.sha256, f.size, tuple(f.acl),
                              "upload", job.owner, _expected(job, f)))  # fmt: skip
    return items


def _expected(job: Job, file: JobFile) -> str | None:
    """A resumed file's owner check, as its fresh upload had it: resumed without one, a
    dead server's job replaced a document another user uploaded to that name meanwhile.
    A file recorded without it (by an older version): no other owner ("")."""
    if job.kind != "upload":
        return None  # a replace: its sender's right was checked by the request
    return file.expected_owner or ""


class JobRunner:
    """Runs jobs on ``workers`` threads (default ``$HYBRID_RAG_JOB_WORKERS``), fairly
    between their owners (``tools.kb.documents.scheduler``): files are parsed side by side, each in
    its bounded child process, and committed one at a time by the knowledge base's writer."""

    def __init__(
        self, library: Library, limits: LoadLimits | None = None, workers: int | None = None
    ) -> None:
        self.library = library
        self.limits = limits
        self._pool = FairPool(workers or job_workers())
        self._stopped = threading.Event()
        self._watcher: threading.Thread | None = None

    def submit(self, job: Job, items: Sequence[Item | None]) -> Future[None]:
        return self._pool.submit(job.owner, lambda: run_job(self.library, job, items, self.limits))

    def call(self, work: Callable[[], None], owner: str = "sync") -> Future[None]:
        """Run other knowledge-base work (a source's sync) in the same queue."""
        return self._pool.submit(owner, work)

    def watch(self, every: float | None = None) -> None:
        """Keep this process's jobs leased, and every ``every`` seconds (a quarter of the
        lease) take over the jobs whose runner died (``resume_unfinished``), so a live
        replica finishes a killed server's job, not only the next server started."""
        if self._watcher is None:
            period = every or self.library.catalog.lease_s / 4
            self._watcher = threading.Thread(
                target=self._watch, args=(period,), name="kb-job-leases", daemon=True
            )
            self._watcher.start()

    def _watch(self, period: float) -> None:
        while not self._stopped.wait(period):
            try:
                self.library.catalog.renew_leases()
                resume_unfinished(self.library, self)
            except Exception:  # the next round tries again
                log.exception("job leases: renewing or taking over failed")

    def close(self) -> None:
        self._stopped.set()
        self._pool.close()


def resume_unfinished(library: Library, runner: JobRunner) -> list[str]:
    """Claim the jobs that stopped processes left unfinished: queue again those that can
    be resumed, report the others interrupted. Returns the resumed jobs' ids."""
    resumed = []
    for job in library.catalog.claim_unfinished():
        items = resume_items(library, job)
        if items is None:
            library.catalog.interrupt(job)
            continue
        job.state = "queued"
        library.catalog.save_job(job)
        runner.submit(job, items)
        resumed.append(job.job_id)
        log.info("job %s: taken over from a stopped server", job.job_id)
    return resumed


def _saver(catalog: Catalog, job: Job, file: JobFile) -> Callable[[str, float], None]:
    """A file's status callback: saved at each change of state, progress at most every
    ``SAVE_EVERY_S``."""
    saved_at, saved_state = 0.0, ""

    def status(state: str, progress: float) -> None:
        nonlocal saved_at, saved_state
        file.status, file.progress = state, round(progress, 3)
        if state != saved_state or time.monotonic() - saved_at >= SAVE_EVERY_S:
            catalog.save_job(job)
            saved_at, saved_state = time.monotonic(), state

    return status


def _still_expected(catalog: Catalog, item: Item) -> None:
    """Raise ``InputError`` when another user's document took the item's name after the
    upload was checked (two uploads of one new name at once): it is not replaced."""
    if item.expected_owner is None:
        return
    row = catalog.get(item.doc_id)
    if row is not None and row.owner not in (item.expected_owner, item.owner):
        raise InputError(f"{item.path}: another user's document of that name was added "
                         "meanwhile; only its owner or an admin may replace it")  # fmt: skip


def _current_access(catalog: Catalog, job: Job, item: Item) -> Item:
    """A replacement keeps the access list the document has when it is ingested, not the
    one it had when the request came: a share or a revocation made while it waited in the
    queue is kept (it was undone, a revoked reader reading the new version)."""
    row = catalog.get(item.doc_id) if job.kind == "replace" else None
    if row is None:
        return item
    return replace(item, acl=tuple(p for p in row.acl.split(",") if p))


def run_job(
    library: Library, job: Job, items: Sequence[Item | None], limits: LoadLimits | None = None
) -> None:
    """Ingest each file of ``job`` in turn, saving its status as it moves."""
    catalog = library.catalog
    job.state = "running"
    catalog.save_job(job)
    for file, item in zip(job.files, items, strict=True):
        if item is None:
            continue
        try:
            _still_expected(catalog, item)
            item = _current_access(catalog, job, item)
            outcome = library.ingest(item, limits, _saver(catalog, job, file))
        except HybridRagError as exc:
            file.status, file.reason = "failed", str(exc)
        except Exception as exc:  # one file's surprise must not stop the others
            log.exception("job %s: %s failed", job.job_id, file.name)
            file.status, file.reason = "failed", f"{type(exc).__name__}: {exc}"
        else:
            file.status, file.reason, file.chunks = outcome.status, outcome.reason, outcome.chunks
        file.progress = 1.0
        catalog.save_job(job)  # first: this file no longer holds its original
        if file.status != "done":
            library.discard(item.blob)  # unless a document or another job's file uses it
    ok = any(f.status == "done" for f in job.files)
    job.state = "done" if ok or not job.files else "failed"
    catalog.save_job(job)
