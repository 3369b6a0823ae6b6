"""Edits of the users file serialised and atomic (``tools.access.users.editing``).

An exclusive kernel lock (``flock``) on ``.<name>.lock`` beside the file, awaited at most
``LOCK_TIMEOUT_S`` (then an error naming the holder and the file); the new content goes to
a temporary file of its own, synced, then renamed over the file.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import stat
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from tools.errors import ConfigError

try:  # POSIX only; elsewhere edits are not serialised across processes
    import fcntl
except ImportError:  # pragma: no cover - not on Linux/macOS
    fcntl = None  # type: ignore[assignment]

LOCK_TIMEOUT_S = 10.0  # an edit takes milliseconds: a holder past this is stuck
LOCK_POLL_S = 0.01
# Replacements of a users file made by this process: a directory re-reads after one, as a
# file's stat can look unchanged (coarse timestamps, a reused inode, the same size).
_EDITS = [0]
log = logging.getLogger(__name__)


def lock_path(path: Path) -> Path:
    """The lock every edit of the users file ``path`` holds."""
    return path.with_name(f".{path.name}.lock")


def _holder(fd: int) -> str:
    with suppress(OSError):
        text = os.pread(fd, 200, 0).decode("utf-8", "replace").strip()
        if text:
            return text
    return "another process"


def _acquire(fd: int, path: Path, lock: Path) -> bool:
    """Take the lock on ``fd`` within ``LOCK_TIMEOUT_S`` (``ConfigError`` naming the holder
    past it); False when the filesystem has no locks (the edit goes on, with a warning)."""
    deadline = time.monotonic() + LOCK_TIMEOUT_S
    while True:  # bounded by the deadline
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise ConfigError(
                    f"users file {path} is being edited by {_holder(fd)} (lock {lock});"
                    f" waited {LOCK_TIMEOUT_S:g} s: try again when it has finished"
                ) from None
            time.sleep(LOCK_POLL_S)
        except OSError as exc:  # e.g. ENOLCK: a network filesystem without locks
            log.warning("cannot lock %s (%s): edits are not serialised", lock, exc.strerror)
            return False


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the edit lock of ``path``: a kernel lock, released however its holder ends,
    so a killed edit leaves no stale lock; its file names the holder for the waiters."""
    if fcntl is None:  # pragma: no cover - not on Linux/macOS
        yield
        return
    lock = lock_path(path)
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise ConfigError(f"cannot open the users file's lock {lock}: {exc.strerror}") from None
    try:
        if not _acquire(fd, path, lock):
            yield
            return
        note = f"pid {os.getpid()} on {socket.gethostname()} since {time.strftime('%H:%M:%S')}"
        with suppress(OSError):  # only a note for those who wait
            os.ftruncate(fd, 0)
            os.pwrite(fd, note.encode(), 0)
        try:
            yield
        finally:
            with suppress(OSError):
                os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def write_entries(path: Path, entries: list[dict[str, Any]]) -> None:
    """Replace the file atomically (hold ``editing``'s lock: see ``editing``). A new file
    is readable and writable by its owner only; an existing one keeps its mode (a server
    running as another user may have been let read it, e.g. 644 for deploy/compose.yaml),
    never writable by group or others."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode) & ~(stat.S_IWGRP | stat.S_IWOTH)
    except FileNotFoundError:
        mode = 0o600
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps({"users": entries}, indent=2) + "\n")
            f.flush()
            os.fchmod(f.fileno(), mode)
            os.fsync(f.fileno())  # the new content is on disk before its name is
        os.replace(name, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(name)
        raise
    _sync_directory(path.parent)
    _EDITS[0] += 1


def edit_count() -> int:
    """How many times this process replaced a users file."""
    return _EDITS[0]


def _sync_directory(directory: Path) -> None:
    """Make the rename itself durable (a crash could otherwise bring the old file back)."""
    with suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
