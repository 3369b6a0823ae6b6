"""A document's title, read once at ingest: its metadata title when it has one (a Markdown
file's front matter ``title:``), else its first heading (the loaders turn an HTML
``<title>``, a Word Title paragraph and a PDF's outline into headings), else "" (the
listing then shows the file's name)."""

from __future__ import annotations

import re

MAX_TITLE_CHARS = 200
_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?)\n(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.DOTALL)
_TITLE_FIELD = re.compile(r"^title:[ \t]*(.+?)[ \t]*$", re.MULTILINE)
_HEADING = re.compile(r"^[ ]{0,3}#{1,6}[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$", re.MULTILINE)
_FENCE = re.compile(r"^[ ]{0,3}(`{3,}|~{3,}).*?^[ ]{0,3}\1", re.MULTILINE | re.DOTALL)
_SCAN_CHARS = 200_000  # a title is near the top; a giant document is not read through


def document_title(text: str, *, markdown: bool = True) -> str:
    """The title of a document whose extracted text is ``text`` ("" when it has none);
    ``markdown``: its ``#`` lines are headings (a plain-text file's are not)."""
    if not markdown:
        return ""
    head = text[:_SCAN_CHARS].lstrip("\ufeff")
    front = _FRONT_MATTER.match(head)
    if front:
        field = _TITLE_FIELD.search(front.group(1))
        if field:
            return _clean(field.group(1).strip("'\""))
        head = head[front.end() :]
    heading = _HEADING.search(_FENCE.sub("", head))  # a "#" line in code is no heading
    return _clean(heading.group(1)) if heading else ""


def _clean(title: str) -> str:
    """One line, Markdown's emphasis and escapes off, bounded."""
    line = " ".join(re.sub(r"\\([\\`*_{}\[\]()#+\-.!])|[*_`]", r"\1", title).split())
    return line if len(line) <= MAX_TITLE_CHARS else line[: MAX_TITLE_CHARS - 1] + "…"
