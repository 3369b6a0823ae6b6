"""PDF: text per page with page markers, outline headings, ruled tables as Markdown.

* Text comes from pypdf, page by page; every page starts with a ``<!-- page: n -->``
  marker, so each chunk knows its pages. Lines wrapped by the layout are joined back into
  paragraphs (no space between CJK characters), a paragraph ending where a short line
  ends a sentence.
* Headings come from the outline (bookmarks) where the PDF has one: each entry becomes a
  heading of its level, placed at the line of its page that carries its title (or at the
  top of the page). PDFs without an outline have no headings (font sizes are not guessed).
* Tables: pages whose content draws ruling lines or rectangles go through pdfplumber,
  whose table finder turns ruled tables into Markdown tables in reading order (text
  outside the tables from pdfplumber too); other pages never pay for it.
* Refused with a reason: not a PDF, truncated (no ``%%EOF`` near the end), encrypted
  with a user password, unreadable, or no text layer on any page ("no text layer; OCR
  is not supported"). Pages without text in an otherwise readable PDF are noted.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from typing import Any

from tools.kb.ingest.chunking import location_marker
from tools.kb.ingest.formats.base import (
    Extraction,
    LoadError,
    LoadLimits,
    escape_line,
    heading,
    join_wrapped,
    markdown_table,
)

REVISION = 1  # bump when the extraction changes: files are re-extracted on the next ingest
_RECT_RE = re.compile(rb"(?:-?[\d.]+\s+){4}re\b")
_LINE_RE = re.compile(rb"(?:-?[\d.]+\s+){2}l\b")
_SENTENCE_END = tuple("。！？；：.!?;:")
_LIST_ITEM_RE = re.compile(r"^([•◦▪‣·\-–*]|\(?\d{1,3}[.)]|\(?[a-zA-Z][.)])\s")
MAX_OUTLINE_ENTRIES = 5000


@dataclass(frozen=True)
class OutlineEntry:
    page: int  # 0-based
    level: int  # 1-based
    title: str


def load_pdf(data: bytes, limits: LoadLimits) -> Extraction:
    from pypdf import PdfReader
    from pypdf.errors import FileNotDecryptedError, PdfReadError

    if b"%PDF-" not in data[:1024]:
        raise LoadError("not a PDF file (no %PDF header)")
    if b"%%EOF" not in data[-2048:]:
        raise LoadError("truncated or corrupt PDF (no end-of-file marker)")
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise LoadError("encrypted PDF: it needs a password to open (remove it and re-ingest)")
        pages = list(reader.pages)
    except LoadError:
        raise
    except FileNotDecryptedError as exc:
        raise LoadError(f"encrypted PDF: {exc}") from exc
    except (PdfReadError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise LoadError(f"corrupt or unreadable PDF ({type(exc).__name__}: {exc})") from exc
    if not pages:
        raise LoadError("PDF has no pages")
    outline = _outline(reader)
    notes: list[str] = []
    tables = _TableReader(data)
    out: list[str] = []
    empty: list[int] = []
    failed: list[int] = []
    try:
        for index, page in enumerate(pages):
            blocks = tables.page_blocks(index) if _draws_rulings(page) else None
            if blocks is None:
                try:
                    blocks = [("lines", page.extract_text() or "")]
                except MemoryError:
                    raise  # the parse memory limit: the document fails, named
                except Exception:  # one bad page never costs the document
                    failed.append(index + 1)
                    continue
            body = _render_page(blocks, [e for e in outline if e.page == index])
            if not body.strip():
                empty.append(index + 1)
                continue
            out.append(f"{location_marker(page=index + 1)}\n{body}")
    finally:
        tables.close()
    if not out:
        if failed:
            raise LoadError(f"no page of the PDF could be read ({len(failed)} failed)")
        raise LoadError("no text layer; OCR is not supported (scanned PDF?)")
    if empty:
        notes.append(
            f"{len(empty)} of {len(pages)} pages have no text layer (OCR is not supported): "
            f"{_page_list(empty)}"
        )
    if failed:
        notes.append(f"{len(failed)} pages could not be read: {_page_list(failed)}")
    return Extraction("\n\n".join(out) + "\n", notes, _metadata_title(reader))


def _metadata_title(reader: Any) -> str:
    """The PDF's ``/Title`` (its document information), or "" (none, or unreadable)."""
    try:
        meta = reader.metadata
        return str(meta.title or "") if meta is not None else ""
    except Exception:  # a damaged info dictionary only loses the title
        return ""


def _page_list(pages: list[int], limit: int = 10) -> str:
    shown = ", ".join(f"p. {p}" for p in pages[:limit])
    return shown + (f" and {len(pages) - limit} more" if len(pages) > limit else "")


def _outline(reader: Any) -> list[OutlineEntry]:
    """Outline entries with resolvable pages, in document order (empty when none)."""
    try:
        raw = reader.outline
    except Exception:
        return []
    entries: list[OutlineEntry] = []

    def walk(items: list[Any], level: int) -> None:
        for item in items:
            if len(entries) >= MAX_OUTLINE_ENTRIES:
                return
            if isinstance(item, list):
                walk(item, level + 1)
                continue
            try:
                page = reader.get_destination_page_number(item)
                title = str(item.title or "")
            except Exception:
                continue
            if page is not None and page >= 0 and title.strip():
                entries.append(OutlineEntry(page, level, " ".join(title.split())))

    walk(list(raw or []), 1)
    return entries


def _draws_rulings(page: Any) -> bool:
    """Whether the page's content draws rectangles or several lines (a table's rulings)."""
    try:
        contents = page.get_contents()
        data = contents.get_data() if contents is not None else b""
    except Exception:
        return False
    return len(_RECT_RE.findall(data)) >= 2 or len(_LINE_RE.findall(data)) >= 4


class _TableReader:
    """pdfplumber over the same bytes, opened on the first page that needs it."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pdf: Any = None

    def page_blocks(self, index: int) -> list[tuple[str, str]] | None:
        """``[("lines", text) | ("table", markdown), ...]`` top to bottom, or None when
        pdfplumber finds no table on the page or cannot read it (the caller keeps
        pypdf's text)."""
        try:
            return self._blocks(index)
        except MemoryError:
            raise
        except Exception:  # pdfminer gave up on this page: pypdf's text is still there
            return None

    def _blocks(self, index: int) -> list[tuple[str, str]] | None:
        if self._pdf is None:
            import pdfplumber

            self._pdf = pdfplumber.open(io.BytesIO(self._data))
        page = self._pdf.pages[index]
        found = [(t.bbox, rows) for t in page.find_tables() if _is_real_table(rows := t.extract())]
        if not found:
            return None
        boxes = [bbox for bbox, _ in found]

        def outside(obj: dict[str, Any]) -> bool:
            if obj.get("object_type") != "char":
                return True
            x = (obj["x0"] + obj["x1"]) / 2
            y = (obj["top"] + obj["bottom"]) / 2
            return not any(x0 <= x <= x1 and top <= y <= bottom for x0, top, x1, bottom in boxes)

        items: list[tuple[float, str, str]] = [
            (line["top"], "lines", line["text"])
            for line in page.filter(outside).extract_text_lines()
        ]
        items.extend((bbox[1], "table", markdown_table(rows)) for bbox, rows in found)
        items.sort(key=lambda item: item[0])
        blocks: list[tuple[str, str]] = []
        for _, kind, text in items:
            if kind == "lines" and blocks and blocks[-1][0] == "lines":
                blocks[-1] = ("lines", f"{blocks[-1][1]}\n{text}")
            else:
                blocks.append((kind, text))
        return blocks

    def close(self) -> None:
        if self._pdf is not None:
            self._pdf.close()


def _is_real_table(rows: list[list[str | None]]) -> bool:
    """At least two rows and two columns with text (a ruled box of prose is not a table)."""
    filled = [row for row in rows if any(cell and cell.strip() for cell in row)]
    width = max((sum(1 for c in row if c and c.strip()) for row in filled), default=0)
    return len(filled) >= 2 and width >= 2


def _render_page(blocks: list[tuple[str, str]], entries: list[OutlineEntry]) -> str:
    """Markdown of one page: outline headings placed, wrapped lines joined, tables kept."""
    pending = list(entries)
    parts: list[str] = []
    for kind, text in blocks:
        if kind == "table":
            if text:
                parts.append(text)
            continue
        lines = [line.strip() for line in text.split("\n")]
        widest = max((len(line) for line in lines), default=0)
        paragraph = ""
        for line in lines:
            match = _take_heading(line, pending)
            if match is not None:
                if paragraph:
                    parts.append(escape_line(paragraph))
                    paragraph = ""
                parts.append(heading(match.level, match.title))
                continue
            if not line:
                if paragraph:
                    parts.append(escape_line(paragraph))
                paragraph = ""
                continue
            if paragraph and _LIST_ITEM_RE.match(line):
                parts.append(escape_line(paragraph))
                paragraph = ""
            paragraph = join_wrapped(paragraph, line)
            if line.endswith(_SENTENCE_END) and len(line) < 0.8 * widest:
                parts.append(escape_line(paragraph))
                paragraph = ""
        if paragraph:
            parts.append(escape_line(paragraph))
    # Entries whose title was not found on the page open it (before any text).
    top = [heading(e.level, e.title) for e in pending]
    return "\n\n".join([*top, *parts])


def _squash(text: str) -> str:
    return "".join(text.split()).casefold()


def _take_heading(line: str, pending: list[OutlineEntry]) -> OutlineEntry | None:
    """The first pending outline entry whose title is this line (removed from pending)."""
    if not line or not pending:
        return None
    squashed = _squash(line)
    for i, entry in enumerate(pending):
        if squashed == _squash(entry.title):
            return pending.pop(i)
    return None
