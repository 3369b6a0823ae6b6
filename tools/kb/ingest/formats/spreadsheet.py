"""Excel (.xlsx, .xlsm): every worksheet as a heading, a sheet marker and a Markdown table.

Read with openpyxl in read-only mode (rows are streamed, so memory does not grow with
the sheet) and ``data_only`` (a formula cell gives the value Excel last calculated; a
file never opened in Excel has none, and the cell stays empty). Per sheet:
``<!-- sheet: "Name" -->``, ``# Name``, then the used rows as a table whose header is the
first non-empty row; the chunker repeats that header in every part of a long table.

Bounded: at most ``max_sheet_rows`` data rows per sheet (default 10,000,
``$HYBRID_RAG_MAX_SHEET_ROWS``) and ``max_columns`` columns (64); what is left out is
reported in the document's notes (``ingest`` prints them), never silently dropped.
Macros are never run; chart sheets and images are not read. The container passes the
zip-bomb checks first (``tools.kb.ingest.formats.base.open_zip``).
"""

from __future__ import annotations

import datetime as dt
import io
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from tools.kb.ingest.chunking import location_marker
from tools.kb.ingest.formats.base import (
    Extraction,
    LoadError,
    LoadLimits,
    heading,
    markdown_table,
    open_zip,
)

REVISION = 1


@dataclass
class BoundedTable:
    """The rows kept (header first) and what the bounds left out."""

    rows: list[list[str]]
    truncated: bool  # more data rows than max_sheet_rows
    kept_rows: int  # data rows kept (the header not counted)
    widest: int  # the widest row seen, in columns


def format_cell(value: object) -> str:
    """A cell value as text: whole floats without ``.0``, dates in ISO form."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return f"{value:.10g}"
    if isinstance(value, dt.datetime):
        if value.time() == dt.time():
            return value.date().isoformat()
        return value.isoformat(sep=" ", timespec="seconds")
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    return str(value)


def bounded_table(rows: Iterable[Sequence[object]], limits: LoadLimits) -> BoundedTable:
    """The first non-empty row as header, then up to ``max_sheet_rows`` non-empty rows,
    cut to ``max_columns`` and to the last column that has text. Stops reading at the
    first row past the bound (``truncated``)."""
    kept: list[list[str]] = []
    widest = 0
    truncated = False
    iterator: Iterator[Sequence[object]] = iter(rows)
    for row in iterator:
        cells = [format_cell(v).strip() for v in row]
        while cells and not cells[-1]:
            cells.pop()
        if not cells:
            continue
        if len(kept) > limits.max_sheet_rows:  # header + max_sheet_rows already kept
            truncated = True
            break
        widest = max(widest, len(cells))
        kept.append(cells[: limits.max_columns])
    return BoundedTable(kept, truncated, max(len(kept) - 1, 0), widest)


def table_notes(name: str, table: BoundedTable, limits: LoadLimits, total: int | None) -> list[str]:
    notes: list[str] = []
    if table.truncated:
        kept = f"{name}: indexed the first {table.kept_rows:,}"
        rows = f" of about {total:,} rows" if total else " rows; later rows were left out"
        notes.append(
            f"{kept}{rows} (max_sheet_rows {limits.max_sheet_rows:,}, $HYBRID_RAG_MAX_SHEET_ROWS)"
        )
    if table.widest > limits.max_columns:
        notes.append(
            f"{name}: indexed the first {limits.max_columns} of {table.widest} columns "
            "(max_columns)"
        )
    return notes


def load_xlsx(data: bytes, limits: LoadLimits) -> Extraction:
    open_zip(data, limits, "Excel").close()
    import openpyxl
    from openpyxl.utils.exceptions import InvalidFileException

    try:
        workbook = openpyxl.load_workbook(
            io.BytesIO(data), read_only=True, data_only=True, keep_links=False
        )
    except (InvalidFileException, KeyError, ValueError, TypeError, OSError) as exc:
        raise LoadError(f"not a readable Excel .xlsx workbook ({exc})") from exc
    parts: list[str] = []
    notes: list[str] = []
    try:
        for sheet in workbook.worksheets:
            declared = sheet.max_row - 1 if isinstance(sheet.max_row, int) else None
            # Read what the sheet holds, not what its (often wrong) dimension claims.
            sheet.reset_dimensions()
            table = bounded_table(sheet.iter_rows(values_only=True), limits)
            body = markdown_table(table.rows)
            if not body:
                continue
            parts.append(f"{location_marker(sheet=sheet.title)}\n{heading(1, sheet.title)}")
            parts.append(body)
            notes.extend(table_notes(f"sheet {sheet.title!r}", table, limits, declared))
    finally:
        workbook.close()
    if not parts:
        raise LoadError("empty workbook (no cell has a value)")
    return Extraction("\n\n".join(parts) + "\n", notes)
