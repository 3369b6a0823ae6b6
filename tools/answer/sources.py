"""The source record shared by both graphs: one dict per KB chunk or web hit.

Plain dicts (not objects) so checkpoints, the server and traces serialise them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import PurePosixPath, PureWindowsPath
from typing import Any

from typing_extensions import TypedDict

from tools.kb.knowledge_base import RetrievedChunk
from tools.websearch import WebResult


class Source(TypedDict, total=False):
    """One KB chunk (``kind`` "internal") or web hit (``kind`` "web"), as the graphs pass
    it around; ``label``/``number`` are set when the answer's sources are chosen."""

    id: str
    kind: str
    title: str
    text: str
    source: str | None
    relevance: float
    answerability: float
    label: str
    number: int
    grade: str  # the model grader's verdict, when a model graded the source
    # knowledge-base chunks
    heading: str
    doc_id: str
    chunk_id: str
    vector_score: float | None
    bm25_score: float
    ingested_at: Any
    lang: Any
    # where in the file (PDF pages, spreadsheet sheet), only when known
    page: int
    page_end: int
    sheet: str
    page_starts: str  # "offset:page,…" of a chunk over pages (tools.answer.cited_pages)
    location: str  # "p. 3", "pp. 3–4", "sheet Prices" (Chinese: "第 3 页", "工作表 Prices")
    # web results
    url: str
    published_at: str | None
    provider: str
    rank: int
    result_kind: str
    fetched_at: Any
    snippet: str  # the search result's own snippet, when ``text`` holds the page's passages
    page_read: bool  # ``text`` is the best passages of the fetched page


def describe_location(where: Mapping[str, Any], language: str = "en") -> str:
    """The page (range) or sheet of a chunk for people: ``p. 3``, ``pp. 3–4``,
    ``sheet Prices``; in Chinese ``第 3 页``, ``第 3–4 页``, ``工作表 Prices``; "" if unknown."""
    zh = language == "zh"
    page, end, sheet = where.get("page"), where.get("page_end"), where.get("sheet")
    if isinstance(page, int) and not isinstance(page, bool):
        last = end if isinstance(end, int) and not isinstance(end, bool) and end > page else None
        if zh:
            return f"第 {page}–{last} 页" if last else f"第 {page} 页"
        return f"pp. {page}–{last}" if last else f"p. {page}"
    if isinstance(sheet, str) and sheet:
        return f"工作表 {sheet}" if zh else f"sheet {sheet}"
    return ""


def location_fields(metadata: Mapping[str, Any], language: str = "en") -> dict[str, Any]:
    """``page``/``page_end``/``sheet`` and their ``location`` text, only those known."""
    out: dict[str, Any] = {k: metadata[k] for k in ("page", "page_end", "sheet") if k in metadata}
    where = describe_location(metadata, language)
    if where:
        out["location"] = where
    return out


def display_path(source: str, doc_id: str) -> str:
    """Where a chunk comes from, as answers, citations and thread state show it: the path
    relative to the folder that was ingested (the doc_id), never the server's absolute
    path; a non-file source (an evaluation corpus, an API) as it is."""
    if source.startswith("/") or PureWindowsPath(source).drive:
        return doc_id or PurePosixPath(source).name
    return source


def chunk_title(hit: RetrievedChunk) -> str:
    """The title a citation shows: the document's own (read at ingest, tools.kb.ingest.titles),
    else the chunk's top heading, else the file's name (without ``upload:``/``src:<id>:``)."""
    own = hit.metadata.get("doc_title")
    if isinstance(own, str) and own:
        return own
    if hit.heading:
        return hit.heading.split(" > ")[0]
    key = re.sub(r"^(?:upload:|src:[^:]+:)", "", hit.doc_id)
    if "://" in key:  # a URL source's page: its address says more than its last part
        return key
    return PurePosixPath(key).name or hit.doc_id


def chunk_to_source(hit: RetrievedChunk, answerability: float = 0.0) -> Source:
    """``answerability``: the calibrated probability of the search that found the chunk."""
    source: Source = {
        "id": hit.chunk_id,
        "kind": "internal",
        "title": chunk_title(hit),
        "heading": hit.heading,
        "text": hit.text,
        "doc_id": hit.doc_id,
        "chunk_id": hit.chunk_id,
        "source": display_path(hit.source, hit.doc_id),
        "relevance": round(hit.relevance, 4),
        "answerability": round(answerability, 4),
        "vector_score": hit.vector_score,
        "bm25_score": round(hit.bm25_score, 4),
        "ingested_at": hit.metadata.get("ingested_at"),
        "lang": hit.metadata.get("lang"),
    }
    meta = hit.metadata
    if isinstance(meta.get("page"), int):
        source["page"] = int(meta["page"])
        source["page_end"] = int(meta.get("page_end", meta["page"]))
        if isinstance(meta.get("page_starts"), str):
            source["page_starts"] = str(meta["page_starts"])
    if isinstance(meta.get("sheet"), str):
        source["sheet"] = str(meta["sheet"])
    where = describe_location(meta)
    if where:
        source["location"] = where
    return source


def web_to_source(result: WebResult) -> Source:
    return {
        "id": result.url,
        "kind": "web",
        "title": result.title,
        "text": result.snippet,
        "url": result.url,
        "published_at": result.published_at,
        "source": result.source,
        "provider": result.provider,
        "rank": result.rank,
        "result_kind": result.kind,
        "fetched_at": result.fetched_at,
    }
