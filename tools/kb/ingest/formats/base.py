"""What every format loader shares: limits, the failure type, Markdown output helpers.

A loader turns a file's bytes into Markdown (``#`` headings, pipe tables, location
markers from :func:`tools.kb.ingest.chunking.location_marker`) or raises :class:`LoadError`
with a reason a user can act on. Limits keep one hostile or huge file from taking the
machine (or the rest of the folder) down:

* ``max_file_mb`` (``$HYBRID_RAG_MAX_FILE_MB``, default 100): larger files are skipped
  before they are read;
* ``max_unzipped_mb`` (``$HYBRID_RAG_MAX_UNZIPPED_MB``, default 200) and a 100:1
  compression ratio per member of 1 MiB or more: DOCX/XLSX containers beyond either are
  skipped as a possible zip bomb before a library opens them (Python's ``zipfile`` never
  inflates a member past its declared size, so the declared sizes bound the work);
* ``max_sheet_rows`` (``$HYBRID_RAG_MAX_SHEET_ROWS``, default 10,000) rows per sheet or
  CSV file and ``max_columns`` (64) columns: the rest is left out and the document says
  so in its notes;
* ``parse_memory_mb`` (``$HYBRID_RAG_PARSE_MEMORY_MB``, default 2048) and
  ``parse_seconds`` (``$HYBRID_RAG_PARSE_SECONDS``, default 300): a document is parsed
  in a child process with that much address space, stopped after that long
  (``tools.kb.ingest.formats.isolated``); a file over either fails alone with the limit named;
* ``max_upload_mb`` (``$HYBRID_RAG_MAX_UPLOAD_MB``, default 1000): what one upload
  request to the document API may carry, all its files together.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import warnings
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from tools.errors import ConfigError
from tools.kb.ingest.chunking import LOCATION_MARKER_RE
from tools.text import CJK_RE

MB = 1024 * 1024
MAX_COMPRESSION_RATIO = 100  # per ZIP member of at least RATIO_MIN_BYTES
RATIO_MIN_BYTES = MB
MAX_ZIP_MEMBERS = 10_000
# Loggers of the parsing libraries: their warnings ("repaired xref table", "unknown
# style") are about the file, not actionable during an ingest, and would garble progress.
LIBRARY_LOGGERS = ("pypdf", "pdfminer", "pdfplumber", "openpyxl", "docx", "bs4")


class LoadError(Exception):
    """A file cannot be used; the message is the reason shown to the user."""


@dataclass(frozen=True)
class LoadLimits:
    """Bounds on what one file may cost to read (see the module docstring)."""

    max_file_mb: float = 100.0
    max_unzipped_mb: float = 200.0
    max_sheet_rows: int = 10_000
    max_columns: int = 64
    parse_memory_mb: float = 2048.0  # address space of the child process parsing a file
    parse_seconds: float = 300.0  # time the child process may take for one file
    max_upload_mb: float = 1000.0  # bytes one upload request may carry, all files together

    def __post_init__(self) -> None:
        if not 64 <= self.parse_memory_mb <= 1_000_000:
            raise ConfigError(
                f"parse_memory_mb must be between 64 and 1000000 MB, got {self.parse_memory_mb}"
            )
        if not 0.1 <= self.parse_seconds <= 86_400:
            raise ConfigError(
                f"parse_seconds must be between 0.1 and 86400, got {self.parse_seconds}"
            )
        for name in ("max_file_mb", "max_unzipped_mb", "max_upload_mb"):
            value = getattr(self, name)
            if not 0 < value <= 100_000:
                raise ConfigError(f"{name} must be between 0 and 100000 MB, got {value}")
        if not 1 <= self.max_sheet_rows <= 10_000_000:
            raise ConfigError(
                f"max_sheet_rows must be between 1 and 10000000, got {self.max_sheet_rows}"
            )
        if not 1 <= self.max_columns <= 16_384:
            raise ConfigError(f"max_columns must be between 1 and 16384, got {self.max_columns}")

    @property
    def max_file_bytes(self) -> int:
        return int(self.max_file_mb * MB)

    @property
    def max_upload_bytes(self) -> int:
        return int(self.max_upload_mb * MB)

    @property
    def max_unzipped_bytes(self) -> int:
        return int(self.max_unzipped_mb * MB)

    @classmethod
    def from_env(cls, **overrides: float | int | None) -> LoadLimits:
        """Defaults, then ``$HYBRID_RAG_MAX_FILE_MB`` / ``$HYBRID_RAG_MAX_UNZIPPED_MB`` /
        ``$HYBRID_RAG_MAX_SHEET_ROWS`` / ``$HYBRID_RAG_PARSE_MEMORY_MB`` /
        ``$HYBRID_RAG_PARSE_SECONDS`` / ``$HYBRID_RAG_MAX_UPLOAD_MB``, then ``overrides`` that are not None."""
        values: dict[str, float | int] = {}
        for name, raw in (
            ("max_file_mb", os.environ.get("HYBRID_RAG_MAX_FILE_MB")),
            ("max_unzipped_mb", os.environ.get("HYBRID_RAG_MAX_UNZIPPED_MB")),
            ("max_sheet_rows", os.environ.get("HYBRID_RAG_MAX_SHEET_ROWS")),
            ("parse_memory_mb", os.environ.get("HYBRID_RAG_PARSE_MEMORY_MB")),
            ("parse_seconds", os.environ.get("HYBRID_RAG_PARSE_SECONDS")),
            ("max_upload_mb", os.environ.get("HYBRID_RAG_MAX_UPLOAD_MB")),
        ):
            if raw and raw.strip():
                values[name] = _env_value(name, raw.strip())
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)  # type: ignore[arg-type]


def _env_value(name: str, raw: str) -> float | int:
    var = f"$HYBRID_RAG_{name.upper()}"
    try:
        return int(raw) if name == "max_sheet_rows" else float(raw)
    except ValueError as exc:
        raise ConfigError(f"{var} must be a number, got {raw!r}") from exc


@dataclass
class Extraction:
    """A loader's result: Markdown text and notes about what was left out."""

    text: str
    notes: list[str] = field(default_factory=list)
    title: str = ""  # the file's own metadata title (a PDF's /Title, a .docx's core title)


# -- Markdown output ------------------------------------------------------------------------

_MARKUP_LINE_RE = re.compile(r"^\s*(#{1,6}\s|\||```|~~~)")


def escape_line(line: str) -> str:
    """Keep extracted text from reading as Markdown structure or a location marker: a
    line that would start a heading, a table, a code fence or be a marker gets a
    backslash in front (Markdown's escape)."""
    if _MARKUP_LINE_RE.match(line) or LOCATION_MARKER_RE.match(line.strip()):
        return "\\" + line.lstrip()
    return line


def heading(level: int, text: str) -> str:
    """A Markdown heading line (level clamped to 1..6, text on one line)."""
    title = " ".join(text.split())
    return f"{'#' * max(1, min(level, 6))} {title}" if title else ""


def clean_cell(value: object) -> str:
    """One table cell as one line of Markdown (pipes escaped, whitespace collapsed)."""
    if value is None:
        return ""
    return " ".join(str(value).split()).replace("|", "\\|")


def markdown_table(rows: Sequence[Sequence[object]]) -> str:
    """A pipe table, the first row as its header; rows are padded to the widest.
    Returns "" when no cell has text."""
    cleaned = [[clean_cell(c) for c in row] for row in rows]
    cleaned = [row for row in cleaned if any(row)]
    if not cleaned:
        return ""
    width = max(len(row) for row in cleaned)
    padded = [row + [""] * (width - len(row)) for row in cleaned]
    lines = ["| " + " | ".join(padded[0]) + " |", "|" + " --- |" * width]
    lines.extend("| " + " | ".join(row) + " |" for row in padded[1:])
    return "\n".join(lines)


def group_list_items(parts: list[str]) -> list[str]:
    """Consecutive ``- `` items form one block, one item per line."""
    out: list[str] = []
    for part in parts:
        if part.startswith("- ") and out and out[-1].startswith("- "):
            out[-1] = f"{out[-1]}\n{part}"
        else:
            out.append(part)
    return out


def join_wrapped(left: str, right: str) -> str:
    """Join two pieces of one wrapped line: no space between CJK characters or after a
    hyphen, one space otherwise."""
    if not left:
        return right
    if not right:
        return left
    if (CJK_RE.match(left[-1]) and CJK_RE.match(right[0])) or left.endswith("-"):
        return left + right
    return f"{left} {right}"


# -- what the bytes are ---------------------------------------------------------------------

OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
# Leading bytes of common binary files, with the suffixes whose files may start so.
_MAGIC: tuple[tuple[bytes, str, frozenset[str]], ...] = (
    (b"\x89PNG\r\n\x1a\n", "PNG image", frozenset()),
    (b"\xff\xd8\xff", "JPEG image", frozenset()),
    (b"GIF87a", "GIF image", frozenset()),
    (b"GIF89a", "GIF image", frozenset()),
    (b"%PDF-", "PDF file", frozenset({".pdf"})),
    (b"PK\x03\x04", "ZIP archive", frozenset({".docx", ".xlsx", ".xlsm"})),
    (OLE_MAGIC, "legacy Office file", frozenset({".docx", ".xlsx", ".xlsm"})),
    (b"\x1f\x8b", "gzip archive", frozenset()),
    (b"\x7fELF", "program (ELF)", frozenset()),
    (b"MZ", "Windows program", frozenset()),
    (b"7z\xbc\xaf\x27\x1c", "7-Zip archive", frozenset()),
    (b"Rar!\x1a\x07", "RAR archive", frozenset()),
)


def mismatch(suffix: str, raw: bytes) -> str:
    """Why bytes are not what a file's name says (a PNG image named ``.html``), or "".
    Only unmistakable signatures count: text files start with anything else."""
    for magic, kind, allowed in _MAGIC:
        if raw.startswith(magic) and suffix not in allowed:
            if magic == b"MZ" and b"This program" not in raw[:512]:
                continue  # "MZ" alone begins ordinary text too
            return f"the file is a {kind}, not the {suffix} its name says: rename or convert it"
    return ""


# -- containers -----------------------------------------------------------------------------


def open_zip(data: bytes, limits: LoadLimits, kind: str) -> zipfile.ZipFile:
    """The ZIP container of a DOCX/XLSX after the zip-bomb checks (LoadError if not)."""
    if data.startswith(OLE_MAGIC):
        raise LoadError(
            f"password-protected or legacy binary Office file, not a {kind} ZIP container "
            "(remove the password or save it as a current Office file)"
        )
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        members = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise LoadError(
            f"corrupt or truncated {kind} file (not a valid ZIP container: {exc})"
        ) from exc
    if len(members) > MAX_ZIP_MEMBERS:
        raise LoadError(f"{kind} container has {len(members)} parts (limit {MAX_ZIP_MEMBERS})")
    total = sum(m.file_size for m in members)
    if total > limits.max_unzipped_bytes:
        raise LoadError(
            f"decompressed size {total / MB:,.0f} MB exceeds the limit of "
            f"{limits.max_unzipped_mb:g} MB (zip bomb?)"
        )
    for m in members:
        if m.file_size >= RATIO_MIN_BYTES and m.file_size > MAX_COMPRESSION_RATIO * max(
            m.compress_size, 1
        ):
            ratio = m.file_size / max(m.compress_size, 1)
            raise LoadError(
                f"part {m.filename!r} expands {ratio:,.0f}:1 (limit {MAX_COMPRESSION_RATIO}:1; "
                "zip bomb?)"
            )
    return archive


@contextlib.contextmanager
def quiet_libraries() -> Iterator[None]:
    """Silence the parsing libraries' warnings (logging and ``warnings``) for a load."""
    loggers = [logging.getLogger(name) for name in LIBRARY_LOGGERS]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR + 1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)
