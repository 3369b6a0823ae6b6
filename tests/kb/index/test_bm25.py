"""BM25 index (``tools.kb.index.bm25``): inverted-index scoring, positive idf, relevance."""

from __future__ import annotations

import random
from collections.abc import Callable

import numpy as np
import pytest

from tools.kb.index.bm25 import BM25Index, PositiveIdfBM25, clamp01
from tools.kb.index.tokenizers import make_tokenizer

Tokenizer = Callable[[str], list[str]]

EN_WORDS = [
    "leave",
    "annual",
    "policy",
    "robot",
    "battery",
    "charge",
    "warehouse",
    "expense",
    "receipt",
    "hotel",
    "taxi",
    "manager",
    "approval",
    "incident",
    "severity",
    "outage",
    "network",
    "server",
    "office",
    "salary",
    "contract",
    "holiday",
    "training",
    "security",
    "password",
    "invoice",
    "supplier",
    "quotation",
    "delivery",
    "maintenance",
]
ZH_WORDS = ["年假", "报销", "机器人", "电池", "审批", "发票", "酒店", "出差", "合同", "培训"]


def _split(text: str) -> list[str]:
    return text.split()


def _corpus(n: int = 200, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    vocab = EN_WORDS + ZH_WORDS
    docs: list[str] = []
    for _ in range(n):
        # Zipf-ish: early words are frequent, later ones rare; lengths vary 3..60.
        length = rng.randint(3, 60)
        words = [vocab[min(int(rng.expovariate(0.12)), len(vocab) - 1)] for _ in range(length)]
        docs.append(" ".join(words))
    return docs


QUERIES = [
    "leave",
    "annual leave policy",
    "robot battery charge warehouse",
    "maintenance quotation",  # rare terms
    "年假 报销",
    "unknownterm leave",
    "expense receipt hotel taxi manager approval incident",
]


@pytest.mark.parametrize("k1,b", [(1.5, 0.75), (1.2, 0.0), (2.0, 1.0)])
def test_inverted_index_scores_equal_get_scores(k1: float, b: float) -> None:
    docs = _corpus()
    index = BM25Index(docs, _split, k1=k1, b=b)
    reference = PositiveIdfBM25([d.split() for d in docs], k1=k1, b=b)
    for query in QUERIES:
        expected = reference.get_scores(query.split())
        got = index.scores(query)
        assert got.shape == (len(docs),)
        assert np.allclose(got, expected, rtol=1e-5, atol=1e-6), query
        # search() returns exactly the documents with a positive score, best first.
        hits = index.search(query, k=len(docs))
        assert {h.index for h in hits} == set(np.flatnonzero(expected > 0).tolist())
        scores = [h.score for h in hits]
        assert scores == sorted(scores, reverse=True)
        assert np.allclose([h.score for h in hits], expected[[h.index for h in hits]], rtol=1e-5)


def test_inverted_index_with_real_tokenizer_equals_get_scores() -> None:
    tok = make_tokenizer("bigram", stem=True)
    docs = [d.replace(" ", " the ") + " policies" * (i % 3) for i, d in enumerate(_corpus(60, 3))]
    index = BM25Index(docs, tok)
    reference = PositiveIdfBM25([tok(d) for d in docs])
    for query in ["annual policies", "年假报销", "Robot batteries in the warehouse"]:
        terms = list(dict.fromkeys(tok(query)))
        assert np.allclose(index.scores(query), reference.get_scores(terms), rtol=1e-5)


@pytest.mark.parametrize("n_docs", [2, 3, 4])
def test_idf_positive_on_tiny_corpora(n_docs: int) -> None:
    docs = [f"common word{i}" for i in range(n_docs)]
    index = BM25Index(docs, _split)
    assert index.idf("common") > 0
    assert all(index.idf(f"word{i}") > index.idf("common") for i in range(n_docs))
    scores = index.scores("common")
    assert (scores > 0).all()
    hits = index.search("common", k=10)
    assert len(hits) == n_docs
    assert all(h.score > 0 and 0 < h.relevance <= 1 for h in hits)


def test_idf_of_unknown_term_is_zero() -> None:
    assert BM25Index(["a b", "c d"], _split).idf("zzz") == 0.0


def _small_index() -> BM25Index:
    docs = [
        "annual leave policy days",
        "robot battery charge",
        "annual leave annual leave carry over",
        "expense receipt taxi hotel",
        "leave",
        "hotel booking policy",
    ]
    return BM25Index(docs, _split)


def test_search_top_k_order() -> None:
    index = _small_index()
    hits = index.search("annual leave", k=2)
    assert len(hits) == 2
    assert hits[0].score >= hits[1].score
    assert {h.index for h in hits} <= {0, 2, 4}
    all_hits = index.search("annual leave", k=10)
    assert {h.index for h in all_hits} == {0, 2, 4}
    scores = [h.score for h in all_hits]
    assert scores == sorted(scores, reverse=True)
    assert index.search("annual leave", k=0) == []


def test_search_allowed_filter() -> None:
    index = _small_index()
    hits = index.search("annual leave policy", k=10, allowed=lambda i: i % 2 == 0)
    assert hits and all(h.index % 2 == 0 for h in hits)
    assert 5 not in {h.index for h in hits}
    # The filter does not shrink k below the available allowed hits.
    assert len(index.search("leave policy", k=2, allowed=lambda i: i in {4, 5})) == 2
    assert index.search("leave", k=5, allowed=lambda i: False) == []


def test_relevance_bounds_and_strong_match() -> None:
    docs = ["filler text " * 3 + str(i) for i in range(20)]
    docs.append("quantum gravity " * 30)
    index = BM25Index(docs, _split)
    hits = index.search("quantum gravity", k=5)
    assert hits[0].index == 20
    assert hits[0].relevance == pytest.approx(1.0, abs=0.05)
    for query in ["quantum", "filler text 3", "gravity filler"]:
        for h in index.search(query, k=30):
            assert 0.0 <= h.relevance <= 1.0


def test_partial_match_has_lower_relevance() -> None:
    index = _small_index()
    full = {h.index: h.relevance for h in index.search("robot battery", k=10)}
    half = {h.index: h.relevance for h in index.search("robot", k=10)}
    partial = {h.index: h.relevance for h in index.search("robot hotel", k=10)}
    assert full[1] > partial[1]
    assert half[1] == pytest.approx(full[1], rel=0.3)


def test_unknown_query_terms_lower_relevance() -> None:
    index = _small_index()
    known = index.search("robot battery", k=1)[0]
    with_unknown = index.search("robot battery xylophone", k=1)[0]
    assert with_unknown.index == known.index == 1
    assert with_unknown.score == pytest.approx(known.score)
    assert with_unknown.relevance < known.relevance
    assert index.search("xylophone", k=5) == []


def test_duplicate_query_terms_are_counted_once() -> None:
    index = _small_index()
    assert np.allclose(index.scores("leave leave leave"), index.scores("leave"))


def test_score_indices_equals_dense_scores() -> None:
    docs = _corpus(120, seed=11)
    index = BM25Index(docs, _split)
    rng = random.Random(5)
    for query in QUERIES:
        dense = index.scores(query)
        wanted = rng.sample(range(len(docs)), 25)
        got = index.score_indices(query, wanted)
        assert set(got) == set(wanted)
        for i in wanted:
            assert got[i].index == i
            assert got[i].score == pytest.approx(dense[i], rel=1e-5, abs=1e-6)
            assert 0.0 <= got[i].relevance <= 1.0
        # Relevance agrees with search() for the same document.
        for hit in index.search(query, k=10):
            if hit.index in got:
                assert got[hit.index].relevance == pytest.approx(hit.relevance, rel=1e-6)


def test_score_indices_edges() -> None:
    index = _small_index()
    last = index.size - 1
    got = index.score_indices("hotel policy", [0, last, 1])
    assert got[1].score == 0.0 and got[1].relevance == 0.0
    assert got[last].score > 0 and got[0].score > 0
    assert index.score_indices("hotel", []) == {}
    assert index.score_indices("", [0, 1]) == {}


def test_empty_corpus_and_empty_query() -> None:
    empty = BM25Index([], _split)
    assert empty.size == 0
    assert empty.search("anything", k=5) == []
    assert empty.scores("anything").shape == (0,)
    assert empty.score_indices("anything", []) == {}
    index = _small_index()
    assert index.search("", k=5) == []
    assert index.search("   ", k=5) == []
    tok = make_tokenizer("bigram")
    stop_index = BM25Index(["the annual leave", "robot"], tok)
    assert stop_index.search("the of and", k=5) == []  # stopwords only


def test_document_without_tokens_is_never_returned() -> None:
    tok = make_tokenizer("bigram")
    index = BM25Index(["the and of", "annual leave", "robot leave"], tok)
    assert index.size == 3
    hits = index.search("leave annual robot", k=10)
    assert {h.index for h in hits} == {1, 2}
    assert index.scores("leave")[0] == 0.0


def test_clamp01() -> None:
    assert clamp01(-1e-9) == 0.0
    assert clamp01(1 + 1e-9) == 1.0
    assert clamp01(0.42) == 0.42
    assert isinstance(clamp01(1), float)
