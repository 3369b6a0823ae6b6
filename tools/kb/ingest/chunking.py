"""Structure-aware chunking of Markdown and plain text.

Order of operations, each step keeping what the previous one guaranteed:

1. Split at Markdown headings (outside code fences) into sections, each with its
   heading path (``("Annual leave", "Carry-over")``); a heading over
   ``MAX_HEADING_TOKENS`` is cut in the path and kept whole as the section's first block.
2. Split sections into blocks at blank lines; a Markdown table (consecutive lines
   starting with ``|``) and a fenced code block are single blocks.
3. A paragraph larger than ``max_tokens`` is split at sentence boundaries
   (Chinese ``。！？；``, English ``.!?``); a single over-long sentence is cut at
   word or character boundaries. A table larger than ``max_tokens`` is split only
   between rows, with its header rows repeated in every part. Whatever still exceeds
   ``max_tokens`` (one giant row, an unbroken 200,000-character run) is cut to size:
   no chunk is ever larger than the bound.
4. Blocks of one section are merged greedily up to ``target_tokens``.
5. Consecutive prose chunks of one section share ``overlap_tokens`` of trailing
   sentences (never taken from a table).

Sizes are estimated tokens (:func:`tools.text.estimate_tokens`). Empty chunks are
never produced.

Locations: a line that is only a location marker (``<!-- page: 3 -->``,
``<!-- sheet: "Prices" -->``, written by :func:`location_marker`) is not text: it ends
the current block and sets the page or sheet of what follows. The format loaders
(``tools.kb.ingest.formats``) emit one per PDF page and spreadsheet sheet; every chunk records
the pages its blocks came from (``page``..``page_end``) and its sheet. Loaders escape
marker-like lines inside extracted text, so a document cannot forge a location.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from tools.errors import ConfigError
from tools.kb.ingest.splitting import (
    join_sentences,
    split_lines,
    split_long_sentence,
    split_prose,
    split_table,
    tail,
    within,
)
from tools.text import estimate_tokens

# Line patterns run on every line of a file, however long: none may backtrack on a run
# of spaces (the former "(.+?)\s*#*\s*$" took cubic time, minutes for one heading line
# with 10,000 spaces), so the trimming is done in Python.
_HEADING_RE = re.compile(r"^(#{1,6})\s+(.*)$")
_FENCE_RE = re.compile(r"^\s*(```|~~~)")
# group 2 is the value with the spaces around it (_parse_marker strips them)
LOCATION_MARKER_RE = re.compile(r"^<!--\s*+(page|sheet):(.*)-->\s*+$")
# A heading longer than this (estimated tokens) is cut in the heading path, its whole
# text kept as the section's first block (see _heading_title).
MAX_HEADING_TOKENS = 48


def location_marker(*, page: int | None = None, sheet: str | None = None) -> str:
    """The marker line that sets the page (1-based) or sheet of the text after it."""
    if page is not None:
        return f"<!-- page: {int(page)} -->"
    if sheet is None:
        raise ValueError("location_marker needs a page or a sheet")
    # A JSON string, with ">" escaped so a name like "a-->b" cannot end the comment.
    name = json.dumps(sheet, ensure_ascii=False).replace(">", "\\u003e")
    return f"<!-- sheet: {name} -->"


def _parse_marker(match: re.Match[str]) -> tuple[str, int | str] | None:
    kind, raw = match.group(1), match.group(2).strip()
    try:
        value = int(raw) if kind == "page" else json.loads(raw)
    except ValueError:
        return None
    if kind == "page" and isinstance(value, int) and value >= 1:
        return kind, value
    if kind == "sheet" and isinstance(value, str):
        return kind, value
    return None


@dataclass(frozen=True)
class ChunkingOptions:
    target_tokens: int = 300
    max_tokens: int = 480
    overlap_tokens: int = 40

    def __post_init__(self) -> None:
        if self.target_tokens < 20:
            raise ConfigError(f"target_tokens must be at least 20, got {self.target_tokens}")
        if self.max_tokens < self.target_tokens:
            raise ConfigError(
                f"max_tokens ({self.max_tokens}) must be >= target_tokens ({self.target_tokens})"
            )
        if not 0 <= self.overlap_tokens < self.target_tokens // 2:
            raise ConfigError(
                f"overlap_tokens must be in [0, target_tokens/2), got {self.overlap_tokens}"
            )


@dataclass(frozen=True)
class Chunk:
    text: str
    heading_path: tuple[str, ...]
    chunk_index: int
    total_chunks: int
    is_table: bool = False
    page: int | None = None  # first page (1-based) of a PDF chunk
    page_end: int | None = None  # last page (== page on one page)
    sheet: str | None = None  # spreadsheet sheet
    # Where each page begins in ``text`` ((offset, page), first at 0), for a chunk over
    # pages: a citation names the page of the sentence it quotes (issue 56), not the span.
    page_starts: tuple[tuple[int, int], ...] = ()

    @property
    def heading(self) -> str:
        return " > ".join(self.heading_path)

    def location(self) -> dict[str, int | str]:
        """``page``/``page_end``/``sheet``, only those known (store metadata takes no None)."""
        out: dict[str, int | str] = {}
        if self.page is not None:
            out["page"] = self.page
            out["page_end"] = self.page_end if self.page_end is not None else self.page
        if self.sheet is not None:
            out["sheet"] = self.sheet
        if len(self.page_starts) > 1:  # a string: store metadata holds scalars only
            out["page_starts"] = ",".join(f"{o}:{p}" for o, p in self.page_starts)
        return out

    def index_text(self) -> str:
        """Text that is embedded and BM25-indexed: heading path, then body."""
        return f"{self.heading}\n{self.text}" if self.heading_path else self.text


@dataclass(frozen=True)
class _Where:
    """Pages ``first..last`` and sheet of a block or chunk (all None: no location)."""

    first: int | None = None
    last: int | None = None
    sheet: str | None = None

    def __or__(self, other: _Where) -> _Where:
        pages = [p for p in (self.first, self.last, other.first, other.last) if p is not None]
        return _Where(
            min(pages) if pages else None,
            max(pages) if pages else None,
            self.sheet if self.sheet is not None else other.sheet,
        )


_NOWHERE = _Where()
_Starts = tuple[tuple[int, int], ...]  # (offset in the chunk's text, page)


@dataclass
class _Block:
    text: str
    kind: str  # "prose" | "table" | "code"
    where: _Where = _NOWHERE


@dataclass
class _Section:
    path: tuple[str, ...]
    blocks: list[_Block] = field(default_factory=list)


def chunk_document(
    text: str, *, markdown: bool = True, options: ChunkingOptions | None = None
) -> list[Chunk]:
    """Chunk one document; returns chunks numbered ``0..total_chunks-1``."""
    opts = options or ChunkingOptions()
    pieces: list[tuple[str, tuple[str, ...], bool, _Where, _Starts]] = []
    for section in _sections(text, markdown=markdown):
        pieces.extend(
            (body, section.path, is_table, where, starts)
            for body, is_table, where, starts in _chunk_section(section, opts)
        )
    total = len(pieces)
    return [
        Chunk(
            text=body,
            heading_path=path,
            chunk_index=i,
            total_chunks=total,
            is_table=is_table,
            page=where.first,
            page_end=where.last,
            sheet=where.sheet,
            page_starts=starts,
        )
        for i, (body, path, is_table, where, starts) in enumerate(pieces)
    ]


def _sections(text: str, *, markdown: bool) -> list[_Section]:
    sections = [_Section(path=())]
    stack: list[str] = []
    current: list[str] = []
    kind = "prose"
    in_fence = False
    where = _NOWHERE

    def flush() -> None:
        nonlocal current, kind
        body = "\n".join(current).strip("\n")
        if body.strip():
            sections[-1].blocks.append(_Block(body, kind, where))
        current, kind = [], "prose"

    for line in text.split("\n"):
        if markdown and _FENCE_RE.match(line):
            if in_fence:
                current.append(line)
                flush()
                in_fence = False
            else:
                flush()
                current, kind, in_fence = [line], "code", True
            continue
        if in_fence:
            current.append(line)
            continue
        marker = LOCATION_MARKER_RE.match(line) if markdown else None
        location = _parse_marker(marker) if marker else None
        if location:
            flush()
            what, value = location
            if what == "page":
                where = _Where(int(value), int(value), where.sheet)
            else:
                where = _Where(where.first, where.last, str(value))
            continue
        heading = _HEADING_RE.match(line) if markdown else None
        title = _heading_text(heading.group(2)) if heading else ""
        if heading and title:
            flush()
            level = len(heading.group(1))
            short = _heading_title(title)
            stack = [*stack[: level - 1], short]
            sections.append(_Section(path=tuple(stack)))
            if short != title:  # the whole heading stays searchable, as the first block
                sections[-1].blocks.append(_Block(title, "prose", where))
            continue
        is_table_line = markdown and line.lstrip().startswith("|")
        if not line.strip():
            flush()
        elif is_table_line != (kind == "table"):
            flush()
            current, kind = [line], "table" if is_table_line else "prose"
        else:
            current.append(line)
    flush()
    return [s for s in sections if s.blocks]


def _heading_text(rest: str) -> str:
    """The title after a heading's ``#``: without its closing ``#`` run, each run of
    spaces one space (a path label; 100,000 spaces in a heading cost no tokens but would
    still be stored with every chunk)."""
    text = " ".join(rest.split())
    return text.rstrip("#").rstrip() or text


def _heading_title(title: str) -> str:
    """The heading as its section's path shows it: a giant "heading" (a 200,000-character
    line after ``#``) is cut, since the path prefixes every chunk's indexed text."""
    if estimate_tokens(title) <= MAX_HEADING_TOKENS:
        return title
    return split_long_sentence(title, MAX_HEADING_TOKENS - 1)[0].rstrip() + "…"


def _units(section: _Section, opts: ChunkingOptions) -> list[tuple[str, str, _Where]]:
    """The section's blocks, oversized ones split: (text, kind, where)."""
    units: list[tuple[str, str, _Where]] = []
    for block in section.blocks:
        if estimate_tokens(block.text) <= opts.max_tokens:
            parts = [block.text]
        elif block.kind == "table":
            parts = split_table(block.text, opts.max_tokens)
        elif block.kind == "code":
            parts = split_lines(block.text, opts.max_tokens)
        else:
            parts = split_prose(block.text, opts.max_tokens, opts.target_tokens)
        # The hard bound: whatever survived the structural split (a giant table row, a
        # 200,000-character "word", a long code line) is cut to size.
        parts = [piece for part in parts for piece in within(part, opts.max_tokens)]
        units.extend((part, block.kind, block.where) for part in parts)
    return units


def _chunk_section(
    section: _Section, opts: ChunkingOptions
) -> list[tuple[str, bool, _Where, _Starts]]:
    """Split oversized blocks, merge small ones, add overlap; returns (text, is_table,
    where, page starts), ``where`` spanning the locations of the blocks merged into the
    chunk."""
    units = _units(section, opts)
    # (text, table, ends_with_prose, where, page starts)
    merged: list[tuple[str, bool, bool, _Where, _Starts]] = []
    buf: list[str] = []
    buf_tokens = 0
    buf_table = False
    buf_where = _NOWHERE
    starts: list[tuple[int, int]] = []
    last_kind = "prose"
    for text, kind, where in units:
        tokens = estimate_tokens(text)
        if buf and buf_tokens + tokens > opts.target_tokens:
            merged.append(
                ("\n\n".join(buf), buf_table, last_kind == "prose", buf_where, tuple(starts))
            )
            buf, buf_tokens, buf_table, starts = [], 0, False, []
        buf_where = where if not buf else buf_where | where
        if where.first is not None and (not starts or starts[-1][1] != where.first):
            offset = sum(len(b) + 2 for b in buf)  # blocks are joined by a blank line
            starts.append((offset, where.first))
        buf.append(text)
        buf_tokens += tokens
        buf_table = buf_table or kind == "table"
        last_kind = kind
    if buf:
        merged.append(("\n\n".join(buf), buf_table, last_kind == "prose", buf_where, tuple(starts)))

    out: list[tuple[str, bool, _Where, _Starts]] = []
    previous_tail = ""
    for text, has_table, ends_with_prose, where, page_starts in merged:
        starts_with_prose = not text.lstrip().startswith(("|", "```", "~~~"))
        body = text
        if previous_tail and starts_with_prose:
            candidate = join_sentences([previous_tail, text])
            # Overlap is a courtesy: never let it push a chunk over the hard limit.
            if estimate_tokens(candidate) <= opts.max_tokens:
                body = candidate
        # The overlap prepended (it ends with ``text``) moves every start but the first.
        shift = len(body) - len(text)
        moved = tuple((o + shift if o else 0, p) for o, p in page_starts)
        out.append((body, has_table, where, moved))
        previous_tail = tail(text, opts.overlap_tokens) if ends_with_prose else ""
    return out
