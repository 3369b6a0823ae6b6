"""Snippet cleaning and query-parameter validation."""

from __future__ import annotations

import html
import re

from tools.errors import InputError
from tools.text import CJK_WIDE_RE

from .types import SearchParams

DEFAULT_SNIPPET_CHARS = 280
ELLIPSIS = "…"

_TAG = re.compile(r"<[^>]*>")
_WS = re.compile(r"\s+")
# Search locale codes; run.context accepts these or "auto".
HL_RE = re.compile(r"^[a-z]{2,3}(?:-[A-Za-z]{2,4})?$")
GL_RE = re.compile(r"^[A-Za-z]{2}$")
_TRAILING_PUNCT = " \t,;:.-–—·|/…"


def contains_cjk(text: str) -> bool:
    return CJK_WIDE_RE.search(text) is not None


def clean_html(text: str | None) -> str:
    """Strip tags, decode entities and collapse whitespace."""
    if not text:
        return ""
    # Tags first, then entities, then tags again for double-escaped markup
    # ("&lt;b&gt;") — but only real tag shapes, so "a < b" survives.
    out = html.unescape(_TAG.sub(" ", text))
    out = re.sub(r"</?[A-Za-z][A-Za-z0-9]*(?:\s[^<>]*)?/?>", " ", out)
    return _WS.sub(" ", out).strip()


def cut(text: str, limit: int = DEFAULT_SNIPPET_CHARS) -> str:
    """Cut ``text`` to at most ``limit`` characters (ellipsis included).

    Latin text is cut at a word boundary; CJK text, which has no spaces, at a
    character boundary.
    """
    if limit <= 0:
        return ""
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    boundary_char = text[limit - 1]
    if not (contains_cjk(head[-1:]) or contains_cjk(boundary_char)) and not boundary_char.isspace():
        space = head.rfind(" ")
        # Fall back to a hard cut for one enormous "word" (URLs, hashes).
        if space >= limit // 2:
            head = head[:space]
    return head.rstrip(_TRAILING_PUNCT) + ELLIPSIS


def clean_snippet(text: str | None, limit: int = DEFAULT_SNIPPET_CHARS) -> str:
    return cut(clean_html(text), limit)


def default_locale(query: str) -> tuple[str, str]:
    """(hl, gl) guessed from the query: CJK text → zh-CN/cn, anything else → en/us."""
    return ("zh-CN", "cn") if contains_cjk(query) else ("en", "us")


def search_locale(query: str, hl: str | None = None, gl: str | None = None) -> tuple[str, str]:
    """The one rule for a search's ``(hl, gl)``: the ones given, else by the query's
    language (:func:`default_locale`); both graphs and the agent's tool follow it."""
    default_hl, default_gl = default_locale(query)
    return (default_hl if hl is None else hl.strip(), default_gl if gl is None else gl.strip())


def normalize_query(query: str) -> str:
    """Whitespace collapsed and case folded: the form used in cache keys."""
    return " ".join(query.split()).casefold()


def build_params(
    query: str,
    *,
    hl: str | None = None,
    gl: str | None = None,
    page: int = 1,
    num: int = 10,
    news: bool = False,
) -> SearchParams:
    """Validate and complete request parameters; raise :class:`InputError` if unusable."""
    if not isinstance(query, str) or not query.strip():
        raise InputError("web search query is empty")
    query = " ".join(query.split())
    if len(query) > 2048:
        raise InputError(f"web search query is too long ({len(query)} characters, max 2048)")
    hl, gl = search_locale(query, hl, gl)
    if not HL_RE.match(hl):
        raise InputError(f"invalid hl {hl!r}: expected a language code like 'en' or 'zh-CN'")
    if not GL_RE.match(gl):
        raise InputError(f"invalid gl {gl!r}: expected a two-letter country code like 'us'")
    if isinstance(page, bool) or not isinstance(page, int) or page < 1 or page > 100:
        raise InputError(f"invalid page {page!r}: expected an integer from 1 to 100")
    if isinstance(num, bool) or not isinstance(num, int) or num < 1 or num > 100:
        raise InputError(f"invalid num {num!r}: expected an integer from 1 to 100")
    lang, _, region = hl.partition("-")
    hl = lang.lower() + (f"-{region.upper()}" if region else "")
    return SearchParams(query=query, hl=hl, gl=gl.lower(), page=page, num=num, news=news)
