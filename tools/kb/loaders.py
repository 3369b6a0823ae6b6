"""Find and read knowledge-base files.

Supported: ``.md``, ``.markdown`` (Markdown) and ``.txt`` (plain text). Text is
decoded as UTF-8 (a BOM is dropped); if that fails, as GB18030 (the superset of
GBK/GB2312 that most non-UTF-8 Chinese files use); if both fail the file is
skipped with the reason. Binary files (a NUL byte in the first 8 KiB), empty
files and unsupported suffixes are skipped with the reason, never half-read.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tools.errors import InputError

MARKDOWN_SUFFIXES = frozenset({".md", ".markdown"})
TEXT_SUFFIXES = frozenset({".txt"})
SUPPORTED_SUFFIXES = MARKDOWN_SUFFIXES | TEXT_SUFFIXES
FALLBACK_ENCODING = "gb18030"


@dataclass(frozen=True)
class SourceDocument:
    """One readable file of the knowledge base."""

    doc_id: str
    source: str
    text: str
    content_hash: str
    is_markdown: bool


@dataclass(frozen=True)
class SkippedFile:
    source: str
    reason: str


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def discover(paths: Iterable[str | os.PathLike[str]]) -> Iterator[tuple[Path, str]]:
    """Yield ``(file, doc_id)`` for every file under ``paths``.

    The doc_id is the file's path relative to the directory that was named (or
    the bare file name for a file named directly), in POSIX form, so it is stable
    across machines and re-ingests. Hidden files and folders are ignored.
    """
    for raw in paths:
        root = Path(raw)
        if not root.exists():
            raise InputError(f"path does not exist: {raw}")
        if root.is_file():
            yield root, root.name
            continue
        for file in sorted(root.rglob("*")):
            rel = file.relative_to(root)
            if any(part.startswith(".") for part in rel.parts) or not file.is_file():
                continue
            yield file, rel.as_posix()


def load_file(path: Path, doc_id: str) -> SourceDocument | SkippedFile:
    """Read one file, or say why it cannot be used."""
    source = str(path.resolve())
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        return SkippedFile(source, f"unsupported file type '{suffix or path.name}'")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        return SkippedFile(source, f"cannot read: {exc.strerror or exc}")
    if b"\x00" in raw[:8192]:
        return SkippedFile(source, "binary file (contains NUL bytes)")
    text = _decode(raw)
    if text is None:
        return SkippedFile(source, f"not valid UTF-8 or {FALLBACK_ENCODING} text")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not text.strip():
        return SkippedFile(source, "empty file")
    return SourceDocument(
        doc_id=doc_id,
        source=source,
        text=text,
        content_hash=content_hash(text),
        is_markdown=suffix in MARKDOWN_SUFFIXES,
    )


def _decode(raw: bytes) -> str | None:
    for encoding in ("utf-8-sig", FALLBACK_ENCODING):
        try:
            return raw.decode(encoding)
        except UnicodeDecodeError:
            continue
    return None
