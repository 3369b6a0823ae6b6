"""Original files, stored once by content hash under the data home.

``<home>/originals/<2 hex>/<sha256><suffix>``: the same bytes uploaded twice (or reached
by two sources) are one file, and their text is embedded once (the embedding cache is
keyed by text). A file is written to a temporary name and renamed, so a reader never sees
half of one; the suffix is kept because the loaders choose the format by it.
"""

from __future__ import annotations

import contextlib
import hashlib
import mimetypes
import os
import re
import socket
import stat
import time
import uuid
from pathlib import Path

from tools.errors import InputError

_SUFFIX = re.compile(r"^\.[A-Za-z0-9]{1,10}$")
_BLOB = re.compile(r"^[0-9a-f]{64}(\.[A-Za-z0-9]{1,10})?$")
# A file being written: "<pid>~<host>~<8 hex>" then ".tmp" (an original being stored) or
# ".part" (an upload's file part arriving, under INCOMING).
_WRITING = re.compile(r"(\d+)~([^~/]+)~[0-9a-f]{8}\.(?:tmp|part)$")
INCOMING = ".incoming"
FOREIGN_STALE_S = 86_400.0  # another host's leftover is removed after a day
CONTENT_TYPES = {
    ".md": "text/markdown; charset=utf-8",
    ".markdown": "text/markdown; charset=utf-8",
    ".txt": "text/plain; charset=utf-8",
    ".csv": "text/csv; charset=utf-8",
    ".tsv": "text/tab-separated-values; charset=utf-8",
}
# Shown by a browser without running anything of theirs (and served sandboxed anyway):
# a PDF in its viewer, plain text as text. Any other original (HTML, SVG, XML, XHTML,
# office files ...) is served as an attachment: a browser may render it actively.
INLINE = frozenset({".pdf", ".txt", ".md", ".markdown", ".csv", ".tsv"})


def suffix_of(name: str) -> str:
    """The lower-case suffix of a file name, "" when it has none usable."""
    suffix = os.path.splitext(name)[1].lower()  # not Path: called per file of a sync
    return suffix if _SUFFIX.match(suffix) else ""


class Originals:
    """The original files of one data home."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def put(self, data: bytes, suffix: str) -> tuple[str, str]:
        """Store ``data``; returns ``(sha256, blob name)``. Already stored: nothing written."""
        digest = hashlib.sha256(data).hexdigest()
        name = f"{digest}{suffix if _SUFFIX.match(suffix) else ''}"
        target = self.path(name)
        if target.exists() and target.stat().st_size == len(data):
            return digest, name
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{name}.{_writer()}.tmp")
        try:
            tmp.write_bytes(data)
            tmp.replace(target)
        finally:
            tmp.unlink(missing_ok=True)
        return digest, name

    def part_path(self) -> Path:
        """A new file for an upload's part to arrive in (see ``adopt``)."""
        incoming = self.directory / INCOMING
        incoming.mkdir(parents=True, exist_ok=True)
        return incoming / f"{_writer()}.part"

    def adopt(self, part: Path, digest: str, suffix: str) -> tuple[str, str]:
        """Store a received file whose SHA-256 is ``digest`` by renaming it (same file
        system); returns ``(sha256, blob name)``. Already stored: the part is removed."""
        name = f"{digest}{suffix if _SUFFIX.match(suffix) else ''}"
        target = self.path(name)
        if target.exists() and target.stat().st_size == part.stat().st_size:
            part.unlink(missing_ok=True)
            return digest, name
        target.parent.mkdir(parents=True, exist_ok=True)
        part.replace(target)
        return digest, name

    def sweep(self) -> list[Path]:
        """Remove what a killed process was writing (a half-stored original, an upload's
        part): files of this host whose process is gone, another host's after a day."""
        removed: list[Path] = []
        if not self.directory.is_dir():
            return removed
        host = socket.gethostname()
        for folder in self.directory.iterdir():
            if not folder.is_dir():
                continue
            for entry in os.scandir(folder):
                match = _WRITING.search(entry.name)
                if match is None or not entry.is_file():
                    continue
                pid, where = int(match.group(1)), match.group(2)
                mine = where == host
                if (mine and not process_alive(pid)) or (
                    not mine and time.time() - entry.stat().st_mtime > FOREIGN_STALE_S
                ):
                    with contextlib.suppress(OSError):
                        os.unlink(entry.path)
                        removed.append(Path(entry.path))
        return removed

    def path(self, name: str) -> Path:
        if not _BLOB.match(name):
            raise InputError(f"not a stored original: {name!r}")
        return self.directory / name[:2] / name

    def remove(self, name: str) -> None:
        self.path(name).unlink(missing_ok=True)


def read_no_links(path: Path, limit: int) -> bytes | str:
    """The bytes of the regular file at ``path``, or why they are not read: a path that
    is not absolute, whose any part is a symbolic link (the final one refused by
    ``O_NOFOLLOW`` at the open, so no swap between a check and the open), that is not a
    regular file, or over ``limit`` bytes. Read through the one descriptor opened."""
    if not path.is_absolute() or os.path.realpath(path) != str(path):
        return "the file's path is not its real path (a symbolic link on the way)"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        return f"cannot open the file: {exc.strerror or exc}"
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            return "not a regular file"
        data = file.read(limit + 1)  # bounded: a file grown past the limit is not held
    return data if len(data) <= limit else f"the file is over {limit:,} bytes"


def content_type(name: str) -> str:
    """The Content-Type an original is served with."""
    suffix = suffix_of(name)
    if suffix in CONTENT_TYPES:
        return CONTENT_TYPES[suffix]
    guessed, _ = mimetypes.guess_type(f"x{suffix}")
    return guessed or "application/octet-stream"


def serving(name: str) -> tuple[str, str]:
    """How an original named ``name`` is served: (Content-Type, "inline" | "attachment")."""
    return content_type(name), "inline" if suffix_of(name) in INLINE else "attachment"


def _writer() -> str:
    """The name part saying who writes a file: process, host, and a random tag."""
    return f"{os.getpid()}~{socket.gethostname().replace('~', '-')}~{uuid.uuid4().hex[:8]}"


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` of this host is running."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return pid > 0
