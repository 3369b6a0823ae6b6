"""Original files, stored once by content hash under the data home.

``<home>/originals/<2 hex>/<sha256><suffix>``: the same bytes uploaded twice (or reached
by two sources) are one file, and their text is embedded once (the embedding cache is
keyed by text). A file is written to a temporary name and renamed, so a reader never sees
half of one; the suffix is kept because the loaders choose the format by it.
"""

from __future__ import annotations

import hashlib
import mimetypes
import os
import re
import uuid
from pathlib import Path

from tools.errors import InputError

_SUFFIX = re.compile(r"^\.[A-Za-z0-9]{1,10}$")
_BLOB = re.compile(r"^[0-9a-f]{64}(\.[A-Za-z0-9]{1,10})?$")
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
        tmp = target.with_name(f".{name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
        try:
            tmp.write_bytes(data)
            tmp.replace(target)
        finally:
            tmp.unlink(missing_ok=True)
        return digest, name

    def path(self, name: str) -> Path:
        if not _BLOB.match(name):
            raise InputError(f"not a stored original: {name!r}")
        return self.directory / name[:2] / name

    def remove(self, name: str) -> None:
        self.path(name).unlink(missing_ok=True)


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
