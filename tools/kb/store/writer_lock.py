"""One writer per knowledge base at a time, across the processes of this machine.

Two ingests of one collection at once (a scheduled job and a person) would each pick free
doc_id names from the same registry, so two files could get one name and one of them be
lost, and each could prune what the other just added; embedded Chroma is not safe for two
writing processes either. Writers (ingest, delete, drop) therefore hold an exclusive
``fcntl`` lock on ``<home>/locks/<store>-<collection>.lock``. The kernel releases it
when the process ends, however it ends, so a crash never leaves a stale lock. Readers
never take it.

Waiting is bounded (``HYBRID_RAG_WRITE_LOCK_TIMEOUT``, 600 s): past it the writer fails
with a ``StoreError`` naming the process that holds the lock. With a Chroma server the lock
covers the writers that share this data home's machine only.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from tools.errors import StoreError

try:  # POSIX only; elsewhere writers are not serialised across processes
    import fcntl
except ImportError:  # pragma: no cover - not on Linux/macOS
    fcntl = None  # type: ignore[assignment]

POLL_S = 0.2
log = logging.getLogger(__name__)


def lock_path(directory: Path, store: str, collection: str) -> Path:
    """The lock file of ``collection`` in ``store`` (a path or host:port, hashed); an
    empty ``collection`` names the store's own lock (opening it)."""
    tag = hashlib.sha256(store.encode()).hexdigest()[:12]
    if not collection:
        return directory / f"{tag}.open.lock"  # never a collection's ("<tag>-<name>.lock")
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", collection)[:64]
    return directory / f"{tag}-{safe}.lock"


def _holder(path: Path) -> str:
    with contextlib.suppress(OSError):
        text = path.read_text(encoding="utf-8", errors="replace").strip()
        if text:
            return text[:200]
    return "another process"


def _tell_waiting(
    holder: str, what: str, timeout: float, waiting: Callable[[str], None] | None
) -> bool:
    """Say once who is being waited for (the log reaches a terminal whole; progress may
    cut it)."""
    note = f"waiting for {holder} to finish writing {what}"
    log.warning("%s (at most %g s)", note, timeout)
    if waiting:
        waiting(note)
    return True


def _note_holder(fd: int) -> None:
    """Who holds the lock, for the messages of those who wait: a note, so a full disk does
    not stop the holder (a reader opening the store writes nothing else; a writer's own
    writes report the disk)."""
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} since {time.strftime('%H:%M:%S')}".encode(), 0)


@contextlib.contextmanager
def writer_lock(
    path: Path,
    *,
    timeout: float,
    what: str,
    waiting: Callable[[str], None] | None = None,
    best_effort: bool = False,
) -> Iterator[None]:
    """Hold the writer lock at ``path`` for the block; wait at most ``timeout`` seconds,
    calling ``waiting`` once with who holds it. ``what`` names the knowledge base in errors.
    ``best_effort``: when the lock file cannot be made (a read-only data home), go on
    without it instead of failing."""
    if fcntl is None:
        yield
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        if best_effort:
            yield
            return
        raise StoreError(f"cannot open the writer lock {path} of {what}: {exc}") from exc
    try:
        deadline = time.monotonic() + timeout
        told = False
        while True:  # bounded by the deadline
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = _holder(path)
                if time.monotonic() >= deadline:
                    raise StoreError(
                        f"{what} is being written by {holder}; waited {timeout:g} s "
                        "(HYBRID_RAG_WRITE_LOCK_TIMEOUT). Try again when it has finished"
                    ) from None
                if not told:
                    told = _tell_waiting(holder, what, timeout, waiting)
                time.sleep(POLL_S)
            except OSError as exc:  # e.g. ENOLCK: a network filesystem without locks
                log.warning(
                    "cannot lock %s (%s): writes to %s are not serialised across processes",
                    path, exc.strerror or exc, what,
                )  # fmt: skip
                yield
                return
        _note_holder(fd)
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
