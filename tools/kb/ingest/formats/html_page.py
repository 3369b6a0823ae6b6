"""HTML: the page's main content as Markdown, boilerplate dropped.

Parsed by BeautifulSoup with Python's own ``html.parser`` (no native dependency; the
encoding comes from a BOM, ``<meta charset>`` or detection).

* Never knowledge: ``script``, ``style``, ``noscript``, ``template``, ``nav``,
  ``footer``, ``aside``, forms and embedded media, elements with the ``hidden``
  attribute, ``aria-hidden="true"`` or ``display:none``, the ARIA landmarks
  ``navigation``/``banner``/``contentinfo``/``complementary``/``search``, and a page-level
  ``header`` (a ``header`` inside ``article``/``main``/``section`` is the article's own
  and is kept).
* Main content: ``<main>`` (or ``role="main"``) when present, else the only
  ``<article>``, else ``<body>``.
* ``h1``–``h6`` become headings (the ``<title>`` is the top heading when the content
  has no ``h1``); ``table`` becomes a Markdown table (a one-row or one-column layout
  table stays text); ``li`` becomes a ``- `` item; ``pre`` keeps its lines.
"""

from __future__ import annotations

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
)

REVISION = 1
DROP_TAGS = frozenset(
    {
        "script", "style", "noscript", "template", "nav", "footer", "aside", "form",
        "iframe", "object", "embed", "svg", "canvas", "button", "select", "input",
        "textarea", "dialog", "head", "link", "meta",
    }
)  # fmt: skip
DROP_ROLES = frozenset({"navigation", "banner", "contentinfo", "complementary", "search"})
BLOCK_TAGS = frozenset(
    {
        "p", "div", "section", "article", "main", "header", "blockquote", "ul", "ol", "dl",
        "dt", "dd", "figure", "figcaption", "address", "details", "summary", "hr", "body",
        "html", "caption", "center", "table", "thead", "tbody", "tfoot", "tr", "td", "th",
    }
)  # fmt: skip
_HEADING_TAGS = {f"h{n}": n for n in range(1, 7)}
_HIDDEN_STYLE_RE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.I)


def load_html(data: bytes, limits: LoadLimits) -> Extraction:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(data, "html.parser")
    title_tag = (soup.head or soup).find("title")  # not an <svg>'s title in the body
    title = " ".join(title_tag.get_text(" ").split()) if title_tag else ""
    root = _main_content(soup)
    out = _Writer(limits.max_columns)
    out.walk(root)
    parts = group_list_items(out.finish())
    if not any(p.strip() for p in parts):
        raise LoadError("no text in the page's main content")
    if title and not any(p.startswith("# ") for p in parts):
        parts.insert(0, heading(1, title))
    return Extraction("\n\n".join(parts) + "\n")


def _main_content(soup: Any) -> Any:
    main = soup.find("main") or soup.find(attrs={"role": "main"})
    if main is None:
        articles = soup.find_all("article")
        main = articles[0] if len(articles) == 1 else None
    return main or soup.body or soup


def _dropped(tag: Any) -> bool:
    name = tag.name
    if name in DROP_TAGS:
        return True
    attrs = tag.attrs or {}
    if str(attrs.get("role", "")).lower() in DROP_ROLES:
        return True
    if "hidden" in attrs or str(attrs.get("aria-hidden", "")).lower() == "true":
        return True
    if _HIDDEN_STYLE_RE.search(str(attrs.get("style", ""))):
        return True
    # A page header (logo, menu) is boilerplate; an article's own header holds its title.
    return name == "header" and tag.find_parent(["article", "main", "section"]) is None


class _Writer:
    """Walks the tree once, collecting Markdown blocks."""

    def __init__(self, max_columns: int) -> None:
        self.parts: list[str] = []
        self.inline: list[str] = []
        self.max_columns = max_columns

    def flush(self, prefix: str = "") -> None:
        text = " ".join("".join(self.inline).split())
        self.inline = []
        if text:
            self.parts.append(prefix + text if prefix else escape_line(text))

    def walk(self, node: Any) -> None:
        from bs4 import NavigableString, Tag
        from bs4.element import PreformattedString

        for child in node.children:
            if isinstance(child, PreformattedString):  # comments, CDATA, doctype
                continue
            if isinstance(child, NavigableString):
                self.inline.append(str(child))
                continue
            if not isinstance(child, Tag) or _dropped(child):
                continue
            name = child.name
            if name in _HEADING_TAGS:
                self.flush()
                self.parts.append(heading(_HEADING_TAGS[name], child.get_text(" ")))
            elif name == "table":
                self.flush()
                self.table(child)
            elif name == "br":
                self.inline.append(" ")
            elif name == "pre":
                self.flush()
                lines = [escape_line(line.rstrip()) for line in child.get_text().split("\n")]
                body = "\n".join(line for line in lines if line.strip())
                if body:
                    self.parts.append(body)
            elif name == "li":
                self.flush()
                self.walk(child)
                self.flush(prefix="- ")
            elif name in BLOCK_TAGS:
                self.flush()
                self.walk(child)
                self.flush()
            else:
                self.walk(child)

    def table(self, table: Any) -> None:
        rows: list[list[str]] = []
        for tr in table.find_all("tr"):
            if tr.find_parent("table") is not table:  # a nested table's rows
                continue
            cells = tr.find_all(["th", "td"], recursive=False)
            rows.append([c.get_text(" ") for c in cells[: self.max_columns]])
        rows = [r for r in rows if any(c.strip() for c in r)]
        width = max((len(r) for r in rows), default=0)
        if len(rows) < 2 or width < 2:  # a layout box, not a table: keep its text
            for cell in table.find_all(["th", "td"]):
                self.walk(cell)
                self.flush()
            return
        markdown = markdown_table(rows)
        if markdown:
            self.parts.append(markdown)

    def finish(self) -> list[str]:
        self.flush()
        return self.parts
