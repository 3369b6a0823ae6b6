"""A Word (.docx) or Excel (.xlsx) original as a safe HTML fragment for the page's viewer:
its text and tables, nothing else. Every string of the file goes through ``html.escape``
into a fixed set of tags (``h1``-``h3``, ``p``, ``table``, ``tr``, ``th``, ``td``,
``em``), without attributes; nothing of the file's own markup, styles, images, links,
fields or macros is passed through, so a ``<script>`` typed in a cell is text. The page
sanitises the fragment once more (web/sanitize.js) before showing it."""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Sequence
from html import escape
from pathlib import Path, PurePosixPath
from typing import Any

from tools.kb.ingest.formats import LoadLimits
from tools.kb.ingest.formats.base import LoadError, open_zip
from tools.kb.ingest.formats.spreadsheet import bounded_table

PREVIEW_SUFFIXES = frozenset({".docx", ".xlsx"})
MAX_BLOCKS = 20_000  # paragraphs and tables of a Word file shown; the rest is in the file
_HEADING = re.compile(r"^(?:heading|标题)\s*([1-9])$", re.IGNORECASE)


def preview_html(name: str, original: Path | bytes, limits: LoadLimits) -> str:
    """The fragment of the original ``name``: a stored file, or the checked bytes a CLI
    ingest's file was served as (LoadError: not a readable .docx/.xlsx)."""
    suffix = PurePosixPath(name).suffix.lower()
    if suffix not in PREVIEW_SUFFIXES:
        raise LoadError(f"no preview for {suffix or 'this'} files")
    size = len(original) if isinstance(original, bytes) else original.stat().st_size
    if size > limits.max_file_bytes:
        raise LoadError(f"the file is over the {limits.max_file_mb:g} MB limit")
    data = original if isinstance(original, bytes) else original.read_bytes()
    return _word(data, limits) if suffix == ".docx" else _excel(data, limits)


def _table(rows: Iterable[Sequence[str]]) -> str:
    """Rows as a table, the first as its header; each cell escaped."""
    out = []
    for n, row in enumerate(rows):
        tag = "th" if n == 0 else "td"
        out.append("<tr>" + "".join(f"<{tag}>{escape(c)}</{tag}>" for c in row) + "</tr>")
    return f"<table>{''.join(out)}</table>" if out else ""


def _style(paragraph: Any) -> str:
    try:
        return str(paragraph.style.name or "").strip().casefold()
    except (KeyError, AttributeError, ValueError):
        return ""


def _paragraph(paragraph: Any) -> str:
    text = " ".join(paragraph.text.split())
    if not text:
        return ""
    style = _style(paragraph)
    heading = _HEADING.match(style)
    level = 1 if style in ("title", "标题") else min(int(heading.group(1)) + 1, 3) if heading else 0
    return f"<h{level}>{escape(text)}</h{level}>" if level else f"<p>{escape(text)}</p>"


def _word(data: bytes, limits: LoadLimits) -> str:
    open_zip(data, limits, "Word").close()  # the zip-bomb checks first
    import docx
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    try:
        blocks = list(docx.Document(io.BytesIO(data)).iter_inner_content())
    except (KeyError, ValueError, OSError) as exc:
        raise LoadError(f"not a readable Word .docx document ({exc})") from exc
    parts: list[str] = []
    for block in blocks[:MAX_BLOCKS]:
        if isinstance(block, Paragraph):
            parts.append(_paragraph(block))
        elif isinstance(block, Table):
            rows = [
                [" ".join(c.text.split()) for c in r.cells[: limits.max_columns]]
                for r in block.rows
            ]
            parts.append(_table(rows))
    if len(blocks) > MAX_BLOCKS:
        parts.append(f"<p><em>… {len(blocks) - MAX_BLOCKS:,} more parts in the file</em></p>")
    return "\n".join(p for p in parts if p)


def _excel(data: bytes, limits: LoadLimits) -> str:
    open_zip(data, limits, "Excel").close()
    import openpyxl
    from openpyxl.utils.exceptions import InvalidFileException

    try:
        book = openpyxl.load_workbook(
            io.BytesIO(data), read_only=True, data_only=True, keep_links=False
        )
    except (InvalidFileException, KeyError, ValueError, TypeError, OSError) as exc:
        raise LoadError(f"not a readable Excel .xlsx workbook ({exc})") from exc
    parts: list[str] = []
    try:
        for sheet in book.worksheets:
            sheet.reset_dimensions()
            table = bounded_table(sheet.iter_rows(values_only=True), limits)
            parts.append(f"<h2>{escape(str(sheet.title))}</h2>")
            parts.append(_table(table.rows) or "<p><em>(empty)</em></p>")
            if table.truncated:
                parts.append(f"<p><em>… the first {table.kept_rows:,} rows are shown</em></p>")
    finally:
        book.close()
    return "\n".join(parts)
