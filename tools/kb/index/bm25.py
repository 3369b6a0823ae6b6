"""BM25 over the knowledge-base chunks, built with rank-bm25.

rank-bm25's ``get_scores`` walks every document in Python (about 185 ms per
query at 100k documents). The statistics still come from ``rank_bm25.BM25Okapi``
(term frequencies, document lengths, idf), but scoring goes through an inverted
index: each term's postings hold the document numbers and the query-independent
BM25 term weight ``tf*(k1+1) / (tf + k1*(1-b+b*dl/avgdl))``, so a query touches only
the documents that contain one of its terms and the sum is a NumPy scatter-add.
The result equals ``get_scores`` (tested).

Idf is Lucene's ``log(1 + (N - n + 0.5) / (n + 0.5))``, which stays positive: the
Robertson idf of ``BM25Okapi`` is zero or negative for a term found in half the
documents or more, which on a corpus of 2–4 documents zeroes every score.
"""

from __future__ import annotations

import math
import sys
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from rank_bm25 import BM25Okapi


def clamp01(value: float) -> float:
    return 0.0 if value < 0.0 else 1.0 if value > 1.0 else float(value)


class PositiveIdfBM25(BM25Okapi):
    """``BM25Okapi`` with Lucene's always-positive idf."""

    def _calc_idf(self, nd: dict[str, int]) -> None:
        self.idf = {
            word: math.log(1.0 + (self.corpus_size - freq + 0.5) / (freq + 0.5))
            for word, freq in nd.items()
        }


@dataclass(frozen=True)
class BM25Hit:
    index: int
    score: float
    relevance: float


class BM25Index:
    """Immutable BM25 index over ``texts``; hits refer to positions in ``texts``."""

    def __init__(
        self,
        texts: Sequence[str],
        tokenizer: Callable[[str], list[str]],
        *,
        k1: float = 1.5,
        b: float = 0.75,
    ) -> None:
        self.tokenizer = tokenizer
        self.size = len(texts)
        self._postings: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._idf: dict[str, float] = {}
        # Unknown query terms count as the rarest possible term when normalising:
        # a question word the corpus never uses is a word no chunk covers.
        self._max_idf = math.log(1.0 + (self.size + 0.5) / 0.5)
        if not texts:
            return
        # Memory: the token lists are streamed into rank-bm25 (a generator; it keeps only
        # each document's term counts), the counts are dropped as soon as they are
        # turned into postings, and postings grow in compact typed arrays, not Python
        # lists of int/float objects (3.5 GB -> well under 1 GB at 100k chunks).
        # Interned: every document's term counts share one string per distinct term.
        model = PositiveIdfBM25(
            ([sys.intern(w) for w in tokenizer(t)] or ["\x00empty"] for t in texts), k1=k1, b=b
        )
        self._idf = dict(model.idf)
        doc_ids: dict[str, array[int]] = {}
        weights: dict[str, array[float]] = {}
        for i in range(len(model.doc_freqs)):
            freqs, model.doc_freqs[i] = model.doc_freqs[i], {}
            norm = k1 * (1.0 - b + b * model.doc_len[i] / model.avgdl)
            for term, tf in freqs.items():
                ids = doc_ids.get(term)
                if ids is None:
                    ids = doc_ids[term] = array("i")
                    weights[term] = array("f")
                ids.append(i)
                weights[term].append(tf * (k1 + 1.0) / (tf + norm))
        del model
        self._postings = {
            t: (np.frombuffer(doc_ids.pop(t), dtype=np.int32),
                np.frombuffer(weights.pop(t), dtype=np.float32))
            for t in list(doc_ids)
        }  # fmt: skip

    def idf(self, term: str) -> float:
        return self._idf.get(term, 0.0)

    def term_weights(self, query: str) -> dict[str, float]:
        """Idf of each distinct query term; a term the corpus never uses gets the maximum."""
        return {t: self._idf.get(t, self._max_idf) for t in self._query_terms(query)}

    def _query_terms(self, query: str) -> list[str]:
        return list(dict.fromkeys(self.tokenizer(query)))

    def _normaliser(self, terms: list[str]) -> float:
        return sum(self._idf.get(t, self._max_idf) for t in terms)

    def scores(self, query: str) -> np.ndarray:
        """Raw BM25 scores of every document (dense; for tests and small corpora)."""
        out = np.zeros(self.size, dtype=np.float64)
        for term in self._query_terms(query):
            posting = self._postings.get(term)
            if posting is not None:
                out += np.bincount(
                    posting[0], weights=self._idf[term] * posting[1], minlength=self.size
                )
        return out

    def search(
        self,
        query: str,
        k: int,
        *,
        allowed: Callable[[int], bool] | None = None,
        mask: np.ndarray | None = None,
    ) -> list[BM25Hit]:
        """Top ``k`` documents with a positive score, best first; ``mask`` (one bool per
        document) keeps only those set, vectorised (one language of the corpus)."""
        terms = self._query_terms(query)
        if not terms or self.size == 0 or k <= 0:
            return []
        ids: list[np.ndarray] = []
        weights: list[np.ndarray] = []
        for term in terms:
            posting = self._postings.get(term)
            if posting is not None:
                ids.append(posting[0])
                weights.append(self._idf[term] * posting[1])
        if not ids:
            return []
        # One bincount over all postings: each document appears once per matching term.
        acc = np.bincount(np.concatenate(ids), weights=np.concatenate(weights), minlength=self.size)
        candidates = np.flatnonzero(acc if mask is None else acc * mask)
        cand_scores = acc[candidates]
        if allowed is None and len(candidates) > k:
            # Only the top k need sorting: partition first (O(n)), then sort k.
            top = np.argpartition(-cand_scores, k - 1)[:k]
            order = top[np.argsort(-cand_scores[top], kind="stable")]
        else:
            order = np.argsort(-cand_scores, kind="stable")
        norm = self._normaliser(terms)
        hits: list[BM25Hit] = []
        for pos in order:
            idx = int(candidates[pos])
            if allowed is not None and not allowed(idx):
                continue
            score = float(cand_scores[pos])
            hits.append(BM25Hit(idx, score, clamp01(score / norm) if norm > 0 else 0.0))
            if len(hits) >= k:
                break
        return hits

    def score_indices(self, query: str, indices: Sequence[int]) -> dict[int, BM25Hit]:
        """BM25 score and relevance of specific documents (those the vector side found)."""
        terms = self._query_terms(query)
        if not terms or not indices:
            return {}
        wanted = np.asarray(indices, dtype=np.int32)
        acc = np.zeros(len(wanted), dtype=np.float64)
        for term in terms:
            posting = self._postings.get(term)
            if posting is None:
                continue
            # Postings are sorted by document number, so searchsorted finds members.
            pos = np.searchsorted(posting[0], wanted)
            pos_clipped = np.minimum(pos, len(posting[0]) - 1)
            present = posting[0][pos_clipped] == wanted
            acc[present] += self._idf[term] * posting[1][pos_clipped[present]]
        norm = self._normaliser(terms)
        return {
            int(i): BM25Hit(int(i), float(s), clamp01(float(s) / norm) if norm > 0 else 0.0)
            for i, s in zip(wanted, acc, strict=True)
        }
