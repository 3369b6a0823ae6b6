"""Loaders of documents that are not plain text: PDF, Word, HTML, Excel, CSV/TSV.

One module per format, each turning a file's bytes into Markdown that the chunker
(``tools.kb.ingest.chunking``) understands: ``#`` headings, pipe tables (so table-aware
chunking keeps rows with their header) and location markers (PDF pages, sheets):

* ``pdf``          — pypdf text per page, outline headings, pdfplumber for ruled tables;
* ``word``         — python-docx paragraphs, heading styles, tables;
* ``html_page``    — BeautifulSoup main content, boilerplate dropped;
* ``spreadsheet``  — openpyxl (read-only) sheets as tables, bounded rows;
* ``delimited``    — the standard library's csv, bounded rows;
* ``base``         — limits (size, zip bombs, rows), the failure type, Markdown helpers;
* ``text_encodings`` — a text file's encoding and text (CSV/TSV here, plain text files
  in ``tools.kb.ingest.loaders``).

A loader raises ``base.LoadError`` with the reason a file cannot be used; ``extract``
also turns any other failure of a parsing library into a reason, so one bad file is
reported and skipped and never stops the rest of the folder. Each module has a
``REVISION``: it is part of the document's version (``extraction_tag``), so improving a
loader (or raising the row bound) re-extracts files on the next ingest even though their
bytes did not change. The parsing libraries are imported on first use.
"""

from __future__ import annotations

from collections.abc import Callable

from tools.kb.ingest.formats import delimited, html_page, pdf, spreadsheet, word
from tools.kb.ingest.formats.base import Extraction, LoadError, LoadLimits, quiet_libraries

# suffix -> format name
FORMATS: dict[str, str] = {
    ".pdf": "pdf",
    ".docx": "docx",
    ".html": "html",
    ".htm": "html",
    ".xhtml": "html",
    ".xlsx": "xlsx",
    ".xlsm": "xlsx",
    ".csv": "csv",
    ".tsv": "tsv",
}
# Formats a user may expect, with what to do instead.
LEGACY: dict[str, str] = {
    ".doc": "legacy Word .doc is not supported (save it as .docx)",
    ".xls": "legacy Excel .xls is not supported (save it as .xlsx)",
    ".ppt": "PowerPoint is not supported",
    ".pptx": "PowerPoint is not supported",
    ".rtf": "RTF is not supported (save it as .docx)",
}

_LOADERS: dict[str, tuple[Callable[[bytes, LoadLimits], Extraction], int, str]] = {
    "pdf": (pdf.load_pdf, pdf.REVISION, "PDF"),
    "docx": (word.load_docx, word.REVISION, "Word document"),
    "html": (html_page.load_html, html_page.REVISION, "HTML page"),
    "xlsx": (spreadsheet.load_xlsx, spreadsheet.REVISION, "Excel workbook"),
    "csv": (delimited.load_delimited, delimited.REVISION, "CSV file"),
    "tsv": (
        lambda data, limits: delimited.load_delimited(data, limits, tab=True),
        delimited.REVISION,
        "TSV file",
    ),
}
_TABULAR = frozenset({"xlsx", "csv", "tsv"})


def extraction_tag(fmt: str, limits: LoadLimits) -> str:
    """What, besides the bytes, decides the extracted text: loader revision and bounds."""
    tag = f"{fmt}:{_LOADERS[fmt][1]}"
    if fmt in _TABULAR:
        tag += f";rows={limits.max_sheet_rows};cols={limits.max_columns}"
    return tag


def extract(fmt: str, data: bytes, limits: LoadLimits) -> Extraction:
    """Markdown of the file, or LoadError with the reason it cannot be used."""
    load, _, what = _LOADERS[fmt]
    try:
        with quiet_libraries():
            return load(data, limits)
    except LoadError:
        raise
    except RecursionError as exc:
        raise LoadError(f"{what} is nested too deeply to read") from exc
    except MemoryError as exc:
        raise LoadError(f"{what} needs more memory than is available") from exc
    except Exception as exc:  # a parser's own error on a damaged file
        detail = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        raise LoadError(
            f"corrupt or unreadable {what} ({type(exc).__name__}{': ' + detail if detail else ''})"
        ) from exc


__all__ = [
    "FORMATS",
    "LEGACY",
    "Extraction",
    "LoadError",
    "LoadLimits",
    "extract",
    "extraction_tag",
]
