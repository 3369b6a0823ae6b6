"""CSV and TSV: one Markdown table, the first non-empty row as its header.

Read with the standard library's ``csv`` module (the format's reference reader; quoting
and embedded newlines handled). Text is decoded like ``.txt`` (a UTF-8/16/32 BOM
decides; else UTF-8; else the most plausible legacy encoding, GB18030 for Chinese); the
delimiter is sniffed among ``, ; \\t |`` (``.tsv`` is tab-separated).
The same bounds as a spreadsheet sheet apply (``max_sheet_rows``, ``max_columns``) and
are reported in the notes with the file's real row count.
"""

from __future__ import annotations

import csv
import io

from tools.kb.ingest.formats.base import Extraction, LoadError, LoadLimits, markdown_table
from tools.kb.ingest.formats.spreadsheet import bounded_table, table_notes
from tools.kb.ingest.formats.text_encodings import decode_text, has_bom

REVISION = 1
SNIFF_BYTES = 64 * 1024


def load_delimited(data: bytes, limits: LoadLimits, *, tab: bool = False) -> Extraction:
    if b"\x00" in data[:8192] and not has_bom(data):  # UTF-16/32 text has NULs, and a BOM
        raise LoadError("binary file (contains NUL bytes)")
    text = decode_text(data)
    if text is None:
        raise LoadError("not valid UTF-8 or GB18030 text")
    if not text.strip():
        raise LoadError("empty file")
    delimiter = "\t" if tab else _sniff(text[:SNIFF_BYTES])
    try:
        reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
        table = bounded_table(reader, limits)
        # The row that showed the bound was passed is consumed: count it, then the rest.
        rest = sum(1 for row in reader if any(c.strip() for c in row))
        total = table.kept_rows + (1 + rest if table.truncated else 0)
    except csv.Error as exc:  # e.g. a field over csv's 131,072-character limit
        raise LoadError(f"malformed CSV ({exc})") from exc
    body = markdown_table(table.rows)
    if not body:
        raise LoadError("no values in the file")
    return Extraction(body + "\n", table_notes("table", table, limits, total))


def _sniff(sample: str) -> str:
    try:
        return csv.Sniffer().sniff(sample, delimiters=",;\t|").delimiter
    except csv.Error:
        return ","
