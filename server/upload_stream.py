"""A multipart upload read as it arrives: each file part streamed to disk, bounded.

Nothing of a file is held in memory: each ``file`` part is written to its own file under
the data home's ``originals/.incoming`` (the originals' file system, so storing it is a
rename) and hashed as it goes. Bounds, each answered with a JSON error naming the sizes:

* the request: ``max_upload_mb`` (``$HYBRID_RAG_MAX_UPLOAD_MB``, default 1000) in all,
  refused from its ``Content-Length`` before a byte is read (413), or once that much has
  arrived when it does not say;
* a file: ``max_file_mb``; a larger part is no longer written and its file is removed at
  once, but its bytes are counted (within the request's bound) so its failure names its
  real size;
* ``MAX_FILES`` file parts and ``MAX_FIELDS`` text fields of ``FIELD_BYTES`` each (400).

A part file left by a killed process is removed when a server next opens the data home
(``tools.kb.documents.originals.Originals.sweep``).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TypeVar

from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import Request

from server.api_caller import Refused
from server.blocking_pools import run_blocking
from tools.errors import InputError
from tools.kb.documents.jobs import Upload
from tools.kb.documents.originals import Originals
from tools.kb.ingest.formats import LoadLimits
from tools.kb.ingest.formats.base import MB

MAX_FILES = 100  # file parts per upload request
MAX_FIELDS = 20
FIELD_BYTES = 64 * 1024
WRITE_BATCH = 1024 * 1024  # bytes received before the parser writes them out
NO_SPACE = (errno.ENOSPC, errno.EDQUOT)
T = TypeVar("T")


def megabytes(size: int) -> str:
    return f"{size / MB:,.1f}"


@dataclass
class _Part:
    name: str = ""
    filename: str | None = None
    out: IO[bytes] | None = None
    path: Path | None = None
    size: int = 0
    digest: hashlib._Hash = field(default_factory=hashlib.sha256)
    blank: bool = True
    value: bytearray = field(default_factory=bytearray)


class Receiver:
    """The callbacks of python-multipart's streaming parser, writing parts to disk."""

    def __init__(self, limits: LoadLimits, originals: Originals) -> None:
        self.limits = limits
        self.originals = originals
        self.uploads: list[Upload] = []
        self.fields: dict[str, str] = {}
        self._part = _Part()
        self._header_field = bytearray()
        self._header_value = bytearray()
        self._headers: dict[str, bytes] = {}

    def callbacks(self) -> dict[str, object]:
        return {
            "on_part_begin": self._begin,
            "on_header_field": lambda d, s, e: self._header_field.extend(d[s:e]),
            "on_header_value": lambda d, s, e: self._header_value.extend(d[s:e]),
            "on_header_end": self._header_end,
            "on_headers_finished": self._headers_finished,
            "on_part_data": self._data,
            "on_part_end": self._end,
        }

    def _begin(self) -> None:
        self._part, self._headers = _Part(), {}

    def _header_end(self) -> None:
        self._headers[self._header_field.decode("latin-1").lower()] = bytes(self._header_value)
        self._header_field.clear()
        self._header_value.clear()

    def _headers_finished(self) -> None:
        _, options = parse_options_header(self._headers.get("content-disposition", b""))
        part = self._part
        part.name = options.get(b"name", b"").decode("utf-8", "replace")
        if b"filename" not in options:
            if len(self.fields) >= MAX_FIELDS:
                raise InputError(f"too many form fields: at most {MAX_FIELDS}")
            return
        part.filename = options[b"filename"].decode("utf-8", "replace")
        if part.name != "file":
            return
        if len(self.uploads) >= MAX_FILES:
            raise InputError(
                f"too many files: at most {MAX_FILES} per request; send the rest in another"
            )
        path = part.path = self.originals.part_path()
        part.out = _guard(lambda: path.open("wb"))

    def _data(self, data: bytes, start: int, end: int) -> None:
        part, chunk = self._part, data[start:end]
        if part.filename is None:
            if len(part.value) + len(chunk) > FIELD_BYTES:
                raise InputError(f"form field {part.name!r} is over {FIELD_BYTES // 1024} KB")
            part.value.extend(chunk)
            return
        if part.name != "file":
            return
        part.size += len(chunk)
        if part.out is None:
            return  # past the file limit: counted, not kept
        if part.size > self.limits.max_file_bytes:
            self._drop(part)  # the rest is only counted, for the reason's real size
            return
        part.digest.update(chunk)
        part.blank = part.blank and not chunk.strip()
        out = part.out
        _guard(lambda: out.write(chunk))

    def _end(self) -> None:
        part = self._part
        if part.filename is None:
            self.fields[part.name] = part.value.decode("utf-8", "replace")
            return
        if part.name != "file":
            return
        if part.out is not None:
            _guard(part.out.close)
        kept = part.path if part.out is not None else None
        self.uploads.append(Upload(part.filename, spooled=kept, size=part.size,
                                   sha256=part.digest.hexdigest(), blank=part.blank))  # fmt: skip
        part.out = None

    def _drop(self, part: _Part) -> None:
        if part.out is not None:
            with contextlib.suppress(OSError):  # a full disk fails the flush again
                part.out.close()
            part.out = None
        if part.path is not None:
            part.path.unlink(missing_ok=True)

    def discard(self) -> None:
        """Remove every part file written (the request failed, or the job is planned)."""
        self._drop(self._part)
        for upload in self.uploads:
            if upload.spooled is not None:
                upload.spooled.unlink(missing_ok=True)


def _guard(write: Callable[[], T]) -> T:
    """Run a disk write; a full disk is 507 naming the problem, not a bare 500."""
    try:
        return write()
    except OSError as exc:
        raise Refused(*disk_error(exc)) from None


def disk_error(exc: OSError | sqlite3.OperationalError) -> tuple[int, str]:
    """The status and message of a failed write to the data home (a file, or the
    catalog's SQLite): 507 for a full disk or quota, 503 otherwise (never a bare 500)."""
    if getattr(exc, "errno", None) in NO_SPACE or "disk is full" in str(exc):
        return 507, "the server's disk is full: nothing was stored (free space in its data home)"
    return 503, f"the server cannot write to its data home: {getattr(exc, 'strerror', '') or exc}"


async def receive(request: Request, limits: LoadLimits, receiver: Receiver) -> None:
    """Read the request's multipart body into ``receiver`` within the bounds above."""
    ctype = request.headers.get("content-type", "")
    if not ctype.startswith("multipart/form-data"):
        raise InputError("send the files as multipart/form-data, one 'file' part each")
    bound = limits.max_upload_bytes
    over = (
        f"over the {limits.max_upload_mb:g} MB limit per upload request "
        "($HYBRID_RAG_MAX_UPLOAD_MB): send fewer or smaller files in several requests"
    )
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > bound:
        raise Refused(413, f"the request is {megabytes(int(declared))} MB, {over}")
    boundary = parse_options_header(ctype)[1].get(b"boundary")
    if not boundary:
        raise InputError("the multipart/form-data request has no boundary")
    parser = MultipartParser(boundary, receiver.callbacks())  # type: ignore[arg-type]
    received, batch = 0, bytearray()
    async for chunk in request.stream():
        received += len(chunk)
        if received > bound:
            raise Refused(413, f"the request is more than {megabytes(bound)} MB, {over}")
        batch += chunk
        if len(batch) >= WRITE_BATCH:  # the disk writes run off the event loop
            await run_blocking("uploads", parser.write, bytes(batch))
            batch.clear()
    await run_blocking("uploads", parser.write, bytes(batch))
    await run_blocking("uploads", parser.finalize)
