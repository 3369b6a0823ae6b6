"""A document's title, read once at ingest: its metadata title when it has one (a Markdown
file's front matter ``title:``), else its first heading (the loaders turn an HTML
``<title>``, a Word Title paragraph and a PDF's outline into headings), else "" (the
listing then shows the file's name). ``chosen_title`` adds what a document file says of
itself: a PDF's metadata ``/Title`` (else its first heading, else its first line of text),
a Word file's first heading, else its core property title. Only the displayed title:
nothing here changes a chunk's text or what is indexed."""

from __future__ import annotations

import re

MAX_TITLE_CHARS = 200
FIRST_LINE_CHARS = 80  # a first line standing in for a title is cut (at a word) to this
_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?)\n(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.DOTALL)
_TITLE_FIELD = re.compile(r"^title:[ \t]*(.+?)[ \t]*$", re.MULTILINE)
_HEADING = re.compile(r"^[ ]{0,3}#{1,6}[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$", re.MULTILINE)
_FENCE = re.compile(r"^[ ]{0,3}(`{3,}|~{3,}).*?^[ ]{0,3}\1", re.MULTILINE | re.DOTALL)
_SCAN_CHARS = 200_000  # a title is near the top; a giant document is not read through
_MARKER = re.compile(r"^<!--.*-->$")  # a page or sheet location marker
# Metadata a tool wrote instead of a title: a file name, "Untitled", Word's "Microsoft Word - x".
_NOT_A_TITLE = re.compile(
    r"^(?:untitled(?:\s+document)?|\(anonymous\)|anonymous|microsoft word\s*-.*|.*\.(?:docx?|pdf|xlsx?|pptx?|txt|md|rtf|odt))$",
    re.IGNORECASE,
)


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


def chosen_title(text: str, *, markdown: bool, fmt: str = "", metadata: str = "") -> str:
    """The title to show for a document of format ``fmt`` ("pdf", "docx", ... or "" for a
    text file) whose extracted text is ``text`` and whose file names ``metadata`` as its
    title ("" when it has none)."""
    own = _clean(metadata) if metadata.strip() else ""
    if _NOT_A_TITLE.match(own):
        own = ""
    if fmt == "pdf" and own:
        return own
    found = document_title(text, markdown=markdown)
    if found or own:
        return found or own
    return first_line(text) if fmt == "pdf" else ""


def first_line(text: str) -> str:
    """The first line of text that is not a location marker or a table row, or ""."""
    for line in text[:_SCAN_CHARS].splitlines():
        line = line.strip().lstrip("\\")
        if line and not _MARKER.match(line) and not line.startswith("|"):
            line = _clean(line)
            if len(line) <= FIRST_LINE_CHARS:
                return line
            cut = line[: FIRST_LINE_CHARS - 1].rsplit(" ", 1)[0]  # at a word, when there is one
            return (cut or line[: FIRST_LINE_CHARS - 1]) + "…"
    return ""
