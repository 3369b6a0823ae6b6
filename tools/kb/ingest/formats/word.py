"""Word (.docx): body paragraphs and tables in document order, headings from styles.

* Headings: paragraphs styled ``Heading 1``..``Heading 9`` (or a localised ``标题 n``),
  or whose paragraph or style sets an outline level, become ``#`` headings of that level;
  a ``Title`` paragraph is the top heading (the numbered ones then sit one level below).
* Tables become Markdown tables, first row as the header; a merged cell's text is
  written once. List paragraphs become ``- `` items.
* Page headers and footers, comments, footnotes and text boxes are not read (they are
  mostly boilerplate; python-docx does not place text boxes in the body's order).
* Before python-docx opens it, the ZIP container passes the zip-bomb checks of
  ``tools.kb.ingest.formats.base.open_zip``; a password-protected file (not a ZIP) is refused
  with that reason.
"""

from __future__ import annotations

import io
import re
from typing import Any

from tools.kb.ingest.formats.base import (
    Extraction,
    LoadError,
    LoadLimits,
    escape_line,
    group_list_items,
    heading,
    markdown_table,
    open_zip,
)

REVISION = 1
_HEADING_STYLE_RE = re.compile(r"^(?:heading|标题)\s*([1-9])$", re.IGNORECASE)
_TITLE_STYLES = frozenset({"title", "标题"})
_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


def load_docx(data: bytes, limits: LoadLimits) -> Extraction:
    open_zip(data, limits, "Word").close()
    import docx
    from docx.opc.exceptions import PackageNotFoundError
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    try:
        document = docx.Document(io.BytesIO(data))
        blocks = list(document.iter_inner_content())
    except PackageNotFoundError as exc:
        raise LoadError("not a Word document (no word/document.xml part)") from exc
    except (KeyError, ValueError) as exc:
        kind = re.search(r"content type is '([^']+)'", str(exc))
        if kind:  # an .xlsx or .pptx renamed to .docx
            raise LoadError(f"not a Word document (its content type is {kind.group(1)})") from exc
        raise LoadError(f"not a readable Word .docx document ({exc})") from exc
    has_title = any(
        isinstance(b, Paragraph) and _style_name(b) in _TITLE_STYLES and b.text.strip()
        for b in blocks
    )
    parts: list[str] = []
    for block in blocks:
        if isinstance(block, Table):
            table = markdown_table(_table_rows(block, limits.max_columns))
            if table:
                parts.append(table)
            continue
        if not isinstance(block, Paragraph):
            continue
        text = " ".join(block.text.split())
        if not text:
            continue
        level = _heading_level(block)
        if level is not None:
            parts.append(heading(level + 1 if has_title and level > 0 else max(level, 1), text))
        elif _is_list_item(block):
            parts.append(f"- {text}")
        else:
            parts.append(escape_line(text))
    if not parts:
        raise LoadError("no text in the Word document")
    return Extraction("\n\n".join(group_list_items(parts)) + "\n", title=_core_title(document))


def _core_title(document: Any) -> str:
    """The document's core property title (File > Info > Title), or ""."""
    try:
        return str(document.core_properties.title or "")
    except (KeyError, AttributeError, ValueError):
        return ""


def _style_name(paragraph: Any) -> str:
    try:
        return str(paragraph.style.name or "").strip().casefold()
    except (KeyError, AttributeError, ValueError):
        return ""


def _heading_level(paragraph: Any) -> int | None:
    """0 for the title, 1..9 for a heading, None for body text."""
    name = _style_name(paragraph)
    if name in _TITLE_STYLES:
        return 0
    match = _HEADING_STYLE_RE.match(name)
    if match:
        return int(match.group(1))
    level = _outline_level(paragraph._p)
    if level is None:
        try:
            style = paragraph.style
        except (KeyError, AttributeError, ValueError):
            style = None
        for _ in range(10):  # the basedOn chain, bounded (a cycle cannot hang us)
            if style is None or level is not None:
                break
            level = _outline_level(style.element)
            style = style.base_style
    return level + 1 if level is not None and 0 <= level <= 8 else None


def _outline_level(element: Any) -> int | None:
    ppr = element.find(f"{_W}pPr")
    found = ppr.find(f"{_W}outlineLvl") if ppr is not None else None
    if found is None:
        return None
    try:
        return int(found.get(f"{_W}val"))
    except (TypeError, ValueError):
        return None


def _is_list_item(paragraph: Any) -> bool:
    if _style_name(paragraph).startswith(("list", "列表")):
        return True
    ppr = paragraph._p.find(f"{_W}pPr")
    return ppr is not None and ppr.find(f"{_W}numPr") is not None


def _table_rows(table: Any, max_columns: int) -> list[list[str]]:
    rows: list[list[str]] = []
    for row in table.rows:
        cells: list[str] = []
        previous = None
        for cell in row.cells[:max_columns]:
            # A horizontally merged cell comes back once per grid column: write it once.
            cells.append("" if cell._tc is previous else cell.text)
            previous = cell._tc
        rows.append(cells)
    return rows
