"""Find and read knowledge-base files.

Plain text: ``.md``, ``.markdown`` (Markdown) and ``.txt``. A BOM (UTF-8/16/32)
decides the encoding; else strict UTF-8; else UTF-8 with a few broken bytes replaced
(a file cut inside a character); else the most plausible guess of charset-normalizer
(GB18030 for legacy Chinese files, cp1252 for Western ones, ...). The ingest report
notes any decoding but plain UTF-8; without a plausible guess the file is skipped with
the reason. Binary files (a NUL byte in the first 8 KiB and no UTF-16/32
BOM), empty files, unsupported suffixes and bytes that are not what the name says (a
PNG image named ``.html``) are skipped with the reason, never half-read. Their content
hash is over the decoded text.

Documents: ``.pdf``, ``.docx``, ``.html``/``.htm``/``.xhtml``, ``.xlsx``/``.xlsm``,
``.csv``/``.tsv`` are turned into Markdown by ``tools.kb.ingest.formats``; their content hash is
over the file's bytes, and their version also names the loader revision and bounds.

Every file must be at most ``LoadLimits.max_file_mb`` (``$HYBRID_RAG_MAX_FILE_MB``,
default 100 MB). Reading is two steps so an unchanged document is never parsed:
:func:`read_file` reads and hashes the bytes; :meth:`FileBytes.load` extracts the text.
:func:`load_file` does both.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from tools.kb.ingest.formats import FORMATS, LEGACY, LoadError, LoadLimits, extraction_tag
from tools.kb.ingest.formats.base import MB, mismatch
from tools.kb.ingest.formats.isolated import parse
from tools.kb.ingest.formats.text_encodings import decode_bytes, has_bom

MARKDOWN_SUFFIXES = frozenset({".md", ".markdown"})
TEXT_SUFFIXES = frozenset({".txt"})
DOCUMENT_SUFFIXES = frozenset(FORMATS)
SUPPORTED_SUFFIXES = MARKDOWN_SUFFIXES | TEXT_SUFFIXES | DOCUMENT_SUFFIXES


@dataclass(frozen=True)
class SourceDocument:
    """One readable document of the knowledge base (its text is Markdown or plain)."""

    doc_id: str
    source: str
    text: str
    content_hash: str
    is_markdown: bool
    notes: tuple[str, ...] = ()  # what extraction left out (rows past the bound, ...)
    extraction: str = ""  # loader revision and bounds (documents only; see formats)
    via: str = ""  # the symbolic link that reached the file, if any (see tools.kb.ingest.identity)
    acl: tuple[str, ...] = ()  # who may read it (tools.access.acl); () is every reader
    title: str = ""  # the file's own metadata title (documents only; see formats)


@dataclass(frozen=True)
class SkippedFile:
    source: str
    reason: str


@dataclass(frozen=True)
class FileRef:
    """A file to ingest, not yet read."""

    path: Path
    doc_id: str
    limits: LoadLimits = field(default_factory=LoadLimits.from_env)
    via: str = ""
    acl: tuple[str, ...] = ()


@dataclass(frozen=True)
class FileBytes:
    """A document file read and hashed, its text not yet extracted."""

    doc_id: str
    source: str
    data: bytes
    content_hash: str
    extraction: str
    fmt: str
    limits: LoadLimits
    via: str = ""
    acl: tuple[str, ...] = ()

    def load(self) -> SourceDocument | SkippedFile:
        """Extract the Markdown text (in a bounded child process), or say why the file
        cannot be used."""
        try:
            result = parse(self.fmt, self.data, self.limits)
        except LoadError as exc:
            return SkippedFile(self.source, str(exc))
        if not result.text.strip():
            return SkippedFile(self.source, "no text in the document")
        return SourceDocument(
            doc_id=self.doc_id,
            source=self.source,
            text=result.text,
            content_hash=self.content_hash,
            is_markdown=True,
            notes=tuple(result.notes),
            extraction=self.extraction,
            via=self.via,
            acl=self.acl,
            title=result.title,
        )


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def content_hash_of(raw: bytes, suffix: str) -> str | None:
    """The content hash ``read_file`` gives a file of these bytes and suffix (None: not
    text it could decode), so a file can be checked against its indexed version."""
    if suffix.lower() in DOCUMENT_SUFFIXES:
        return hashlib.sha256(raw).hexdigest()
    decoded = decode_bytes(raw)
    return None if decoded is None else content_hash(_one_newline(decoded.text))


def _one_newline(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def read_file(
    path: Path, doc_id: str, limits: LoadLimits | None = None, via: str = ""
) -> SourceDocument | FileBytes | SkippedFile:
    """Read one file: a text file is loaded at once, a document is read and hashed.
    ``limits`` default to ``LoadLimits.from_env()``."""
    limits = limits or LoadLimits.from_env()
    source = str(path.resolve())
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        reason = LEGACY.get(suffix) or f"unsupported file type '{suffix or path.name}'"
        return SkippedFile(source, reason)
    try:
        size = path.stat().st_size
        if size > limits.max_file_bytes:
            return SkippedFile(
                source,
                f"file is {_megabytes(size)} MB, over the {limits.max_file_mb:g} MB limit "
                "(max_file_mb, $HYBRID_RAG_MAX_FILE_MB)",
            )
        raw = path.read_bytes()
    except OSError as exc:
        return SkippedFile(source, f"cannot read: {exc.strerror or exc}")
    problem = mismatch(suffix, raw) if raw.strip() else "empty file"
    if problem:
        return SkippedFile(source, problem)
    if suffix in DOCUMENT_SUFFIXES:
        fmt = FORMATS[suffix]
        return FileBytes(
            doc_id=doc_id,
            source=source,
            data=raw,
            content_hash=hashlib.sha256(raw).hexdigest(),
            extraction=extraction_tag(fmt, limits),
            fmt=fmt,
            limits=limits,
            via=via,
        )
    if b"\x00" in raw[:8192] and not has_bom(raw):
        return SkippedFile(source, "binary file (contains NUL bytes)")
    decoded = decode_bytes(raw)
    if decoded is None:
        return SkippedFile(
            source, "cannot tell the text encoding (not UTF-8, no BOM, no plausible guess)"
        )
    text = decoded.text
    plain = decoded.encoding == "utf-8" and decoded.how in ("BOM", "valid UTF-8")
    notes = () if plain else (f"decoded as {decoded.encoding} ({decoded.how})",)
    text = _one_newline(text)
    if not text.strip():
        return SkippedFile(source, "empty file")
    return SourceDocument(
        doc_id=doc_id,
        source=source,
        text=text,
        content_hash=content_hash(text),
        is_markdown=suffix in MARKDOWN_SUFFIXES,
        notes=notes,
        via=via,
    )


def _megabytes(size: int) -> str:
    mb = size / MB
    return f"{mb:,.1f}" if mb >= 1 else f"{mb:.2g}"


def load_file(
    path: Path, doc_id: str, limits: LoadLimits | None = None
) -> SourceDocument | SkippedFile:
    """Read one file, or say why it cannot be used."""
    read = read_file(path, doc_id, limits)
    return read.load() if isinstance(read, FileBytes) else read
