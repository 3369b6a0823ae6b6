"""The lexical (BM25) index of a knowledge base: tantivy, on disk, kept in step by version.

tantivy (PyPI ``tantivy``, the Rust engine's bindings) holds one document per active chunk:
its id, document, language, access list and the project's own tokens (jieba for Chinese,
Snowball for English, ``tools.kb.index.tokenizers``) pre-tokenised into a whitespace field. It
is updated incrementally: :meth:`LexicalIndex.sync` compares the registry's active versions
with the ones the index was last synced to (``lexical.json`` beside it) and deletes and
adds only the documents whose version moved; nothing is rebuilt from a full scan.

Filters are the engine's: a search is restricted to one language and to the access lists
the reader may read (terms of the ``lang`` and ``acl`` fields) inside tantivy's query, so
the restricted user's search costs what an unrestricted one does.

Scores are the project's BM25 (k1 1.5, b 0.75, Lucene's always-positive idf), exact:
tantivy's own scoring counts deleted documents in its statistics until segments merge
(and fixes k1 at 1.2), so it only proposes candidates (``CANDIDATE_FACTOR`` times as many
as asked), which are then scored from their stored tokens with statistics of the live
documents alone: the document frequency is a count of live matches, the average length
a sum over the live documents' ``length`` column. After any sequence of incremental
updates the scores equal a full rebuild's (tested).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import shutil
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tantivy

from tools.kb.index.bm25 import clamp01
from tools.kb.store.writer_lock import writer_lock

Tokenizer = Callable[[str], list[str]]
META_FILE = "lexical.json"
ANALYZER = "ws"  # a whitespace split: the tokens are the project's, made before indexing
PUBLIC = "-"  # the ``acl`` term of a chunk every reader may read (an empty access list)
EMPTY = "\x00empty"  # the one token of a chunk with no words (as rank-bm25 needs one)
CANDIDATE_FACTOR = 2  # tantivy's candidates per result, rescored exactly
CANDIDATE_SLACK = 20
WRITER_HEAP = 64_000_000
LOCK_TIMEOUT_S = 600.0
DF_KEPT = 100_000  # terms whose document frequency is kept between reloads
log = logging.getLogger("hybrid_rag.kb")


@dataclass(frozen=True)
class LexicalHit:
    chunk_id: str
    score: float  # the BM25 score
    relevance: float  # score / the query's best attainable (sum of its terms' idf), in [0, 1]


@dataclass(frozen=True)
class LexicalFilter:
    """Which chunks a lexical search may return (all given restrictions apply)."""

    language: str | None = None
    acls: Collection[str] | None = None  # the access lists the reader may read; None: all
    doc_ids: Collection[str] | None = None
    sources: Collection[str] | None = None
    excluded: Collection[str] = ()


@dataclass(frozen=True)
class IndexedChunk:
    """What the index needs of one chunk."""

    chunk_id: str
    doc_id: str
    text: str  # the indexed text (heading and body)
    metadata: dict[str, Any]


ChunksOf = Callable[[Sequence[str]], Iterable[IndexedChunk]]  # the active chunks of documents


def _schema() -> tantivy.Schema:
    b = tantivy.SchemaBuilder()
    b.add_text_field("chunk_id", stored=True, tokenizer_name="raw", index_option="basic")
    for name in ("doc_id", "lang", "acl", "source"):
        b.add_text_field(name, tokenizer_name="raw", index_option="basic")
    b.add_text_field("tokens", stored=True, tokenizer_name=ANALYZER, index_option="freq")
    b.add_unsigned_field("length", stored=True, fast=True)
    return b.build()


def _clean(token: str) -> str:
    return "_".join(token.split()) if any(c.isspace() for c in token) else token


class LexicalIndex:
    """BM25 over the active chunks, in a tantivy index under ``directory``."""

    def __init__(
        self, directory: Path, tokenizer: Tokenizer, tag: str, *, k1: float = 1.5, b: float = 0.75
    ) -> None:
        self.directory = directory
        self.tokenizer = tokenizer
        self.tag = tag  # the tokenizer's name: an index made by another is rebuilt
        self.k1, self.b = k1, b
        self._schema = _schema()
        self._memory: dict[str, Any] | None = None  # the meta of an index kept in memory
        try:
            directory.mkdir(parents=True, exist_ok=True)
            self._index = tantivy.Index(self._schema, path=str(directory), reuse=True)
        except (OSError, ValueError) as exc:  # damaged, or another layout: derived, so rebuilt
            log.warning("rebuilding the lexical index %s: %s", directory, exc)
            shutil.rmtree(directory, ignore_errors=True)
            try:
                directory.mkdir(parents=True, exist_ok=True)
                self._index = tantivy.Index(self._schema, path=str(directory), reuse=False)
            except (OSError, ValueError) as again:  # a full disk, a read-only home
                self._in_memory(again)
        self._register()
        self._stats: tuple[int, float] | None = None  # (live documents, average length)
        self._df: dict[str, int] = {}  # live document frequency per term, until a reload

    def _register(self) -> None:
        self._index.register_tokenizer(
            ANALYZER, tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()).build()
        )

    def _in_memory(self, exc: Exception) -> None:
        """Keep the index in this process's memory: the data home cannot take it (a full
        disk, a read-only home); searches go on, each new process builds its own."""
        log.warning(
            "the lexical index cannot be written under %s (%s): kept in memory for this process",
            self.directory,
            str(exc)[:160],
        )
        self._index = tantivy.Index(self._schema)
        self._memory = {}
        self._register()

    # -- keeping in step -----------------------------------------------------------------

    def meta(self) -> dict[str, Any]:
        if self._memory is not None:
            return self._memory
        with contextlib.suppress(OSError, ValueError):
            data = json.loads((self.directory / META_FILE).read_text(encoding="utf-8"))
            if isinstance(data, dict) and data.get("tag") == self.tag:
                return data
        return {}

    @property
    def generation(self) -> str:
        return str(self.meta().get("generation", ""))

    def sync(self, generation: str, active: dict[str, str], chunks_of: ChunksOf) -> tuple[int, int]:
        """Bring the index to ``active`` (doc id -> version, the registry at
        ``generation``): delete and add only the documents whose version changed since
        the last sync. ``chunks_of`` gives the active chunks of some documents. Returns
        (documents removed, documents added). One process at a time (a lock file)."""
        lock = (
            writer_lock(self.directory / "sync.lock", timeout=LOCK_TIMEOUT_S,
                        what="the lexical index", best_effort=True)
            if self._memory is None
            else contextlib.nullcontext()
        )  # fmt: skip
        with lock:
            try:
                return self._apply(generation, active, chunks_of)
            except (OSError, ValueError) as exc:
                if self._memory is not None:
                    raise
                self._in_memory(exc)
        return self._apply(generation, active, chunks_of)

    def _apply(
        self, generation: str, active: dict[str, str], chunks_of: ChunksOf
    ) -> tuple[int, int]:
        meta = self.meta()
        if meta.get("generation") == generation and generation:
            self.reload()
            return 0, 0
        known: dict[str, str] = dict(meta.get("active") or {})
        gone = [d for d, v in known.items() if active.get(d) != v]
        new = [d for d, v in active.items() if known.get(d) != v]
        writer = self._index.writer(WRITER_HEAP, 1)
        if not meta:  # never synced, or by another tokenizer: start empty
            writer.delete_all_documents()
        for doc_id in gone:
            writer.delete_documents_by_term("doc_id", doc_id)
        for start in range(0, len(new), 200):
            for chunk in chunks_of(new[start : start + 200]):
                writer.add_document(self._document(chunk))
        writer.commit()
        writer.wait_merging_threads()
        self._write_meta({"tag": self.tag, "generation": generation, "active": active})
        self.reload()
        return len(gone), len(new)

    def _document(self, chunk: IndexedChunk) -> tantivy.Document:
        tokens = [_clean(t) for t in self.tokenizer(chunk.text)] or [EMPTY]
        m = chunk.metadata
        doc = tantivy.Document(
            chunk_id=chunk.chunk_id,
            doc_id=chunk.doc_id,
            lang=str(m.get("lang", "?")),
            acl=str(m.get("acl") or "") or PUBLIC,
            source=str(m.get("source", "")),
            tokens=" ".join(tokens),
        )
        doc.add_unsigned("length", len(tokens))  # a Python int would be typed signed
        return doc

    def _write_meta(self, data: dict[str, Any]) -> None:
        if self._memory is not None:
            self._memory = data
            return
        target = self.directory / META_FILE
        tmp = target.with_suffix(f".tmp-{os.getpid()}")
        tmp.write_text(json.dumps(data), encoding="utf-8")
        tmp.replace(target)  # atomic: the index is ahead of it at worst, and a sync redoes it

    def reload(self) -> None:
        self._index.reload()
        self._stats = None
        self._df = {}

    # -- statistics ----------------------------------------------------------------------

    def _live(self) -> tuple[int, float]:
        """Live documents and their average length (deleted ones excluded)."""
        if self._stats is None:
            searcher = self._index.searcher()
            n = int(searcher.num_docs)
            total = 0.0
            if n:
                agg = searcher.aggregate(
                    tantivy.Query.all_query(), {"t": {"sum": {"field": "length"}}}
                )
                total = float(agg["t"]["value"])
            self._stats = (n, total / n if n else 0.0)
        return self._stats

    @property
    def size(self) -> int:
        return self._live()[0]

    def _idf(self, searcher: tantivy.Searcher, term: str, n: int) -> float:
        df = self._df.get(term)
        if df is None:  # live matches (tantivy's own doc_freq counts deleted ones too)
            df = searcher.search(self._term(term), 1, count=True).count  # type: ignore[attr-defined]
            if len(self._df) > DF_KEPT:
                self._df.clear()
            self._df[term] = df
        return math.log(1.0 + (n - df + 0.5) / (df + 0.5)) if df else 0.0

    def _term(self, term: str) -> tantivy.Query:
        return tantivy.Query.term_query(self._schema, "tokens", term)

    def query_terms(self, query: str) -> list[str]:
        return list(dict.fromkeys(_clean(t) for t in self.tokenizer(query)))

    def term_weights(self, query: str) -> dict[str, float]:
        """Idf of each distinct query term; a term no chunk uses gets the maximum."""
        n = self.size
        searcher = self._index.searcher()
        top = math.log(1.0 + (n + 0.5) / 0.5)
        return {t: self._idf(searcher, t, n) or top for t in self.query_terms(query)}

    # -- searching -----------------------------------------------------------------------

    def search(self, query: str, k: int, where: LexicalFilter | None = None) -> list[LexicalHit]:
        """The top ``k`` chunks with a positive BM25 score, best first."""
        terms = self.query_terms(query)
        n, _ = self._live()
        if not terms or not n or k <= 0:
            return []
        searcher = self._index.searcher()
        idf = {t: self._idf(searcher, t, n) for t in terms}
        present = [self._term(t) for t in terms if idf[t] > 0]
        if not present:
            return []
        clauses = [(tantivy.Occur.Must, tantivy.Query.boolean_query(
            [(tantivy.Occur.Should, q) for q in present]
        ))]  # fmt: skip
        clauses += self._filters(where or LexicalFilter())
        found = searcher.search(
            tantivy.Query.boolean_query(clauses), k * CANDIDATE_FACTOR + CANDIDATE_SLACK
        ).hits
        hits = self._exact(searcher, [a for _, a in found], terms, idf)
        hits = [h for h in hits if h.score > 0]
        return sorted(hits, key=lambda h: (-h.score, h.chunk_id))[:k]

    def score_ids(self, query: str, chunk_ids: Sequence[str]) -> dict[str, LexicalHit]:
        """The BM25 score of given chunks (those the vector side found)."""
        terms = self.query_terms(query)
        n, _ = self._live()
        if not terms or not chunk_ids or not n:
            return {}
        searcher = self._index.searcher()
        idf = {t: self._idf(searcher, t, n) for t in terms}
        found = searcher.search(
            tantivy.Query.term_set_query(self._schema, "chunk_id", list(chunk_ids)),
            len(chunk_ids),
        ).hits
        return {h.chunk_id: h for h in self._exact(searcher, [a for _, a in found], terms, idf)}

    def _exact(
        self,
        searcher: tantivy.Searcher,
        addresses: Sequence[tantivy.DocAddress],
        terms: Sequence[str],
        idf: dict[str, float],
    ) -> list[LexicalHit]:
        n, avgdl = self._live()
        top = math.log(1.0 + (n + 0.5) / 0.5)
        norm = sum(idf[t] or top for t in terms)
        out: list[LexicalHit] = []
        for address in addresses:
            doc = searcher.doc(address)
            tokens = str(doc.get_first("tokens") or "").split(" ")
            length = len(tokens)
            scale = self.k1 * (1.0 - self.b + self.b * length / avgdl) if avgdl else self.k1
            score = 0.0
            for term in terms:
                if idf[term] > 0 and (tf := tokens.count(term)):
                    score += idf[term] * tf * (self.k1 + 1.0) / (tf + scale)
            rel = clamp01(score / norm) if norm > 0 else 0.0
            out.append(LexicalHit(str(doc.get_first("chunk_id")), score, rel))
        return out

    def _filters(self, where: LexicalFilter) -> list[tuple[tantivy.Occur, tantivy.Query]]:
        """The filter clauses (no score) of ``where``."""
        schema, q = self._schema, tantivy.Query

        def one_of(field: str, values: Collection[str]) -> tantivy.Query:
            return q.const_score_query(q.term_set_query(schema, field, sorted(values)), 0.0)

        out: list[tuple[tantivy.Occur, tantivy.Query]] = []
        if where.language is not None:
            out.append((tantivy.Occur.Must, one_of("lang", [where.language])))
        if where.acls is not None:
            out.append((tantivy.Occur.Must, one_of("acl", {a or PUBLIC for a in where.acls})))
        if where.doc_ids is not None:
            out.append((tantivy.Occur.Must, one_of("doc_id", where.doc_ids)))
        if where.sources is not None:
            out.append((tantivy.Occur.Must, one_of("source", where.sources)))
        if where.excluded:
            out.append((tantivy.Occur.MustNot, one_of("doc_id", where.excluded)))
        return out
