"""Which searches count as evidence for the question (tools/policy/confidence.py), and
the merge of one chunk found by several searches (nodes/retrieve.merge_sources)."""

from __future__ import annotations

from typing import Any

from nodes.retrieve import merge_sources
from tools.policy.confidence import is_keyword_selection, search_answerability

QUESTION = "北京冬奥会双人滑金牌得主是谁？"


def test_keyword_selections_are_recognised() -> None:
    assert is_keyword_selection("北京 冬奥会 双人滑", QUESTION)
    assert not is_keyword_selection(QUESTION, QUESTION)
    assert not is_keyword_selection("Who won the pairs figure skating gold?", QUESTION)


def test_a_keyword_selection_never_claims_more_than_the_question() -> None:
    # Dropping the words no passage holds made the subset look fully covered (0.73 for a
    # question whose own search gives 0.26): its hits carry the question's probability.
    assert search_answerability("北京 冬奥会 双人滑", QUESTION, 0.73, 0.26) == 0.26
    assert search_answerability("北京 冬奥会 双人滑", QUESTION, 0.1, 0.26) == 0.1


def test_paraphrases_and_the_question_count_as_they_are() -> None:
    assert search_answerability(QUESTION, QUESTION, 0.26, 0.26) == 0.26
    paraphrase = "Which pair won figure skating gold at Beijing 2022?"
    assert search_answerability(paraphrase, QUESTION, 0.6, 0.26) == 0.6


def chunk(cid: str, relevance: float, answerability: float) -> dict[str, Any]:
    return {"id": cid, "kind": "internal", "relevance": relevance, "answerability": answerability}


def test_merge_keeps_the_best_answerability_of_any_copy() -> None:
    # The copy with the higher relevance used to be kept whole, losing the other copy's
    # (higher) answerability: confidence then depended on which search ranked it higher.
    first = [chunk("a", 1.0, 0.2)]
    second = [chunk("a", 0.5, 0.7), chunk("b", 0.9, 0.1)]
    merged = merge_sources(first, second)
    assert [s["id"] for s in merged] == ["a", "b"]
    assert merged[0]["relevance"] == 1.0 and merged[0]["answerability"] == 0.7
    again = merge_sources(second, first)
    assert again[0]["relevance"] == 1.0 and again[0]["answerability"] == 0.7
