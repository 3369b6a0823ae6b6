"""Score normalisation and rank fusion (``tools.kb.search.fusion``)."""

from __future__ import annotations

import itertools
import math

import pytest

from tools.kb.search.fusion import (
    FUSION_METHODS,
    RRF_K,
    FusionMethod,
    cosine_to_relevance,
    fuse,
    minmax,
    rrf_scores,
    weighted_relevance,
    zscore,
)


def test_rrf_scores_formula_and_order() -> None:
    scores = rrf_scores([["a", "b", "c"], ["b", "a", "d"]])
    assert scores["a"] == pytest.approx(1 / (RRF_K + 1) + 1 / (RRF_K + 2))
    assert scores["b"] == pytest.approx(1 / (RRF_K + 2) + 1 / (RRF_K + 1))
    assert scores["c"] == pytest.approx(1 / (RRF_K + 3))
    assert scores["d"] == pytest.approx(1 / (RRF_K + 3))
    order = sorted(scores, key=lambda i: -scores[i])
    assert set(order[:2]) == {"a", "b"}


def test_rrf_rewards_agreement_over_a_single_top_rank() -> None:
    # "x" is first in one ranking only; "y" is second in both.
    scores = rrf_scores([["x", "y"], ["z", "y"]])
    assert scores["y"] > scores["x"]
    assert scores["x"] == pytest.approx(scores["z"])


def test_rrf_ids_in_one_ranking_only() -> None:
    scores = rrf_scores([["a", "b"], []])
    assert scores == pytest.approx({"a": 1 / (RRF_K + 1), "b": 1 / (RRF_K + 2)})
    scores = rrf_scores([["a"], ["b"]])
    assert scores["a"] == pytest.approx(scores["b"])


def test_rrf_custom_k_and_empty() -> None:
    assert rrf_scores([["a", "b"]], k=0) == pytest.approx({"a": 1.0, "b": 0.5})
    assert rrf_scores([]) == {}
    assert rrf_scores([[], []]) == {}


def test_rrf_rank_order_is_monotonic() -> None:
    ranking = [f"d{i}" for i in range(50)]
    scores = rrf_scores([ranking])
    values = [scores[d] for d in ranking]
    assert values == sorted(values, reverse=True)
    assert len(set(values)) == len(values)


@pytest.mark.parametrize(
    ("cosine", "floor", "expected"),
    [
        (1.0, 0.0, 1.0),
        (0.5, 0.0, 0.5),
        (0.0, 0.0, 0.0),
        (-0.3, 0.0, 0.0),  # clamped up
        (0.8, 0.8, 0.0),  # at the floor: unrelated
        (0.7, 0.8, 0.0),  # below the floor: clamped
        (0.9, 0.8, 0.5),
        (1.0, 0.8, 1.0),
        (1.2, 0.5, 1.0),  # clamped down
        (0.5, 1.0, 0.0),  # degenerate floor
        (0.5, 1.5, 0.0),
    ],
)
def test_cosine_to_relevance(cosine: float, floor: float, expected: float) -> None:
    assert cosine_to_relevance(cosine, floor) == pytest.approx(expected)


def test_cosine_to_relevance_is_monotonic() -> None:
    values = [cosine_to_relevance(c / 20, 0.3) for c in range(-20, 21)]
    assert values == sorted(values)
    assert all(0.0 <= v <= 1.0 for v in values)


def test_weighted_relevance_bounds() -> None:
    grid = [-0.5, 0.0, 0.25, 0.5, 1.0, 1.5]
    for v, b, w in itertools.product(grid, grid, [0.0, 0.3, 0.5, 1.0]):
        assert 0.0 <= weighted_relevance(v, b, w) <= 1.0
    assert weighted_relevance(0.8, 0.2, 0.5) == pytest.approx(0.5)
    assert weighted_relevance(0.8, 0.2, 1.0) == pytest.approx(0.8)
    assert weighted_relevance(0.8, 0.2, 0.0) == pytest.approx(0.2)
    assert weighted_relevance(1.0, 1.0, 0.3) == pytest.approx(1.0)


@pytest.mark.parametrize("method", FUSION_METHODS)
def test_every_method_follows_its_weight_and_rewards_agreement(method: FusionMethod) -> None:
    # "a" leads both retrievers, "d" trails both; "b" is the vector side's runner-up and
    # BM25's last, "c" the reverse. (Scores in [0, 1] so "weighted" can read them too.)
    vec = {"a": 0.9, "b": 0.8, "c": 0.3, "d": 0.1}
    bm = {"a": 0.95, "b": 0.05, "c": 0.7, "d": 0.02}

    def order(weight: float) -> list[str]:
        fused = fuse(vec, bm, method=method, vector_weight=weight)
        assert set(fused) == set(vec)
        return sorted(fused, key=lambda c: -fused[c])

    for weight in (0.3, 0.5, 0.7):
        ranked = order(weight)
        assert ranked[0] == "a" and ranked[-1] == "d", (weight, ranked)
    assert order(1.0)[:3] == ["a", "b", "c"]  # the vector side alone
    assert order(0.0)[:3] == ["a", "c", "b"]  # the BM25 side alone


def test_minmax_and_zscore_normalise_over_the_pool() -> None:
    assert minmax({"a": 2.0, "b": 4.0, "c": 3.0}) == {"a": 0.0, "b": 1.0, "c": 0.5}
    assert minmax({"a": 5.0, "b": 5.0}) == {"a": 1.0, "b": 1.0}  # no spread: each is the best
    assert minmax({"a": 0.0}) == {"a": 0.0}  # a side that matched nothing: no signal
    assert minmax({}) == {}
    z = zscore({"a": 1.0, "b": 3.0})
    assert z["a"] == pytest.approx(1 / (1 + math.e)) and z["b"] == pytest.approx(
        1 / (1 + 1 / math.e)
    )
    assert zscore({"a": 7.0}) == {"a": 0.5}


def test_convex_fusion_is_scale_free_and_weighted() -> None:
    """BM25 raw scores of 0-30 and cosines of 0.7-0.9 weigh the same after min-max."""
    vec = {"a": 0.90, "b": 0.70, "c": 0.80}
    bm = {"a": 0.0, "b": 30.0, "c": 15.0}
    fused = fuse(vec, bm, method="minmax", vector_weight=0.5)
    assert fused == pytest.approx({"a": 0.5, "b": 0.5, "c": 0.5})
    assert fuse(vec, bm, method="minmax", vector_weight=1.0) == pytest.approx(
        {"a": 1.0, "b": 0.0, "c": 0.5}
    )
    lexical = fuse(vec, bm, method="minmax", vector_weight=0.2)
    assert max(lexical, key=lambda c: lexical[c]) == "b"
    # A candidate one side never scored gets that side's pool minimum, not a free 0.
    partial = fuse(
        {"a": 0.9, "b": 0.8}, {"a": 2.0, "b": 1.0, "c": 3.0}, method="minmax", vector_weight=0.5
    )
    assert partial["c"] == pytest.approx(0.5)


# -- adaptive weight -------------------------------------------------------------------


def test_peak_is_the_best_scores_standard_score() -> None:
    from tools.kb.search.fusion import peak

    assert peak([1.0, 1.0, 1.0]) == 0.0  # a flat pool says nothing
    assert peak([5.0]) == 0.0
    assert peak([0.0, 0.0, 0.0, 3.0]) == pytest.approx(math.sqrt(3.0))
    # Scale-free: cosines and BM25 scores of the same shape peak alike.
    assert peak([0.1, 0.2, 0.9]) == pytest.approx(peak([1.0, 2.0, 9.0]))


def test_adaptive_weight_leans_towards_the_surer_retriever() -> None:
    from tools.kb.search.fusion import adaptive_weight

    crowd = {"a": 0.50, "b": 0.49, "c": 0.48, "d": 0.47}  # no candidate stands out
    stands_out = {"a": 9.0, "b": 1.0, "c": 1.1, "d": 0.9}
    lexical = adaptive_weight(crowd, stands_out, base=0.5)
    dense = adaptive_weight(stands_out, crowd, base=0.5)
    assert lexical < 0.5 < dense
    assert lexical + dense == pytest.approx(1.0)  # symmetric around the base
    same = adaptive_weight(stands_out, stands_out, base=0.5)
    assert same == pytest.approx(0.5)
    assert adaptive_weight({"a": 1.0}, {"a": 2.0}, base=0.45) == 0.45  # no pool, no change
    assert 0.0 <= adaptive_weight(crowd, stands_out, base=0.0, slope=9.0) <= 1.0


def test_adaptive_fusion_orders_by_the_per_query_weight() -> None:
    from tools.kb.search.fusion import adaptive_weight

    vec = {"a": 0.90, "b": 0.60, "c": 0.59, "d": 0.58, "e": 0.57}  # dense sure of a
    bm = {"a": 1.0, "b": 1.3, "c": 1.2, "d": 1.1, "e": 1.0}  # BM25 mildly prefers b
    w = adaptive_weight(vec, bm, base=0.5)
    assert fuse(vec, bm, method="adaptive", vector_weight=0.5) == pytest.approx(
        fuse(vec, bm, method="minmax", vector_weight=w)
    )
    fused = fuse(vec, bm, method="adaptive", vector_weight=0.5)
    assert max(fused, key=fused.__getitem__) == "a"
