"""Web results read beyond their snippets: the top results' pages fetched
(``tools.websearch.pages``), their main text extracted by the knowledge base's HTML
loader, chunked by its chunker and ranked against the question by its own lexical
ranking (BM25 over the page's chunks, then the lexical reranker: coverage and proximity
of the question's keywords). No vector store: a page's chunks live only in memory.

The result's text becomes the page's best passages followed by its snippet
(:func:`page_text`): the passages add what the snippet lacks, and the snippet, often the
article's opening where the answer is, is not lost. Passages first: a model's context
shows each source's first ``snippet_chars``, and those should be the best passage. A page that cannot be read keeps its
snippet and is reported with the reason.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import httpx

from tools.kb.index.bm25 import BM25Index
from tools.kb.index.tokenizers import make_tokenizer
from tools.kb.ingest.chunking import ChunkingOptions, chunk_document
from tools.kb.ingest.formats import LoadError, LoadLimits, extract
from tools.kb.search.rerankers import Candidate, LexicalReranker

from .pages import PageCache, PageError, PageSettings, default_page_cache, fetch_page

# Passages short enough to cite, long enough to hold an answer with its context.
PAGE_CHUNKS = ChunkingOptions(target_tokens=160, max_tokens=260, overlap_tokens=30)
PASSAGES_PER_PAGE = 2
FIRST_STAGE = 12  # BM25 candidates the lexical reranker orders
MAX_PAGES = 5  # bound on pages read per search, whatever the caller asks
BOMS = (codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
# Browsers read these labels as windows-1252 (WHATWG Encoding): Latin-1 proper has
# control codes where such pages have curly quotes and dashes.
WHATWG_LABELS = dict.fromkeys(("iso-8859-1", "latin1", "latin-1", "us-ascii", "ascii"), "cp1252")


@dataclass(frozen=True)
class Passage:
    text: str
    heading: str
    relevance: float


@dataclass
class PageRead:
    """What reading one result's page gave: passages (best first; none when no passage
    matches the question) or the failure."""

    url: str
    passages: list[Passage] = field(default_factory=list)
    error: str = ""
    cached: bool = False


def rank_passages(markdown: str, question: str, k: int = PASSAGES_PER_PAGE) -> list[Passage]:
    """The ``k`` chunks of ``markdown`` that best answer ``question`` (none that share no
    word with it)."""
    chunks = chunk_document(markdown, options=PAGE_CHUNKS)
    if not chunks:
        return []
    tokenize = make_tokenizer()
    index = BM25Index([c.index_text() for c in chunks], tokenize)
    asked = set(tokenize(question))
    first = [
        Candidate(str(h.index), chunks[h.index].index_text(), h.relevance, chunks[h.index])
        for h in index.search(question, FIRST_STAGE)
        # Matched by its heading alone ("Loading..." under the page title of a
        # script-rendered page): no evidence in the passage itself.
        if asked & set(tokenize(chunks[h.index].text))
    ]
    best = LexicalReranker().rerank(question, first, k)
    return [Passage(c.payload.text, c.payload.heading, round(c.relevance, 4)) for c in best]


def page_text(snippet: str, passages: Sequence[Passage]) -> str:
    """A read result's text: the passages, then the snippet (left out when a passage
    already holds it)."""
    parts = [p.text for p in passages]
    bare = " ".join(snippet.replace("…", " ").split()).removesuffix("...").strip()
    if bare and not any(bare in " ".join(p.split()) for p in parts):
        parts.append(snippet.strip())
    return "\n\n[…]\n\n".join(parts)


def page_markdown(html: bytes, charset: str = "") -> str:
    """The page's main content as Markdown (the KB's HTML loader), or PageError.

    The encoding the server declared (``charset``) outranks the page's ``<meta>`` and
    detection, and a byte order mark outranks both (the HTML standard's order): the
    body is re-encoded as UTF-8 behind a BOM, which the loader honours first."""
    if charset and not html.startswith(BOMS):
        with contextlib.suppress(LookupError):  # an unknown label: the loader decides
            text = html.decode(WHATWG_LABELS.get(charset, charset), "replace")
            html = codecs.BOM_UTF8 + text.encode("utf-8")
    try:
        return extract("html", html, LoadLimits()).text
    except LoadError as exc:
        raise PageError(str(exc)) from exc


async def read_page(
    client: httpx.AsyncClient, url: str, question: str, settings: PageSettings, cache: PageCache
) -> PageRead:
    try:
        page, cached = await fetch_page(client, url, settings, cache)
        # Parsing and ranking are CPU work: off the event loop.
        passages = await asyncio.to_thread(
            lambda: rank_passages(page_markdown(page.html, page.charset), question)
        )
    except PageError as exc:
        return PageRead(url, error=str(exc))
    # No passage shares a word with the question: read, but the snippet stays (not a failure).
    return PageRead(url, passages, cached=cached)


async def read_pages(
    urls: Sequence[str],
    question: str,
    *,
    settings: PageSettings | None = None,
    cache: PageCache | None = None,
) -> list[PageRead]:
    """Read the pages at ``urls`` (at most ``MAX_PAGES``) concurrently, in order."""
    settings = settings or PageSettings.from_env()
    cache = cache or default_page_cache()
    timeout = httpx.Timeout(settings.timeout_s)
    async with httpx.AsyncClient(timeout=timeout, trust_env=False) as client:
        return list(
            await asyncio.gather(
                *(read_page(client, u, question, settings, cache) for u in urls[:MAX_PAGES])
            )
        )
