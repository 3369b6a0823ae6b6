"""Which searches are evidence that the knowledge base answers the question.

The KB confidence of a turn is the best calibrated answerability (``tools.kb.answerability``)
among the searches that found its sources. The calibration was fitted on searches of the
question itself; a query made only of some of the question's words (an offline keyword
variant, the coverage rule's "missing terms" query) is a retrieval aid, not such a
search: its term-coverage features measure the words it kept, so dropping the words no
passage holds ("金牌 得主") made it look fully covered (answerability 0.73 where the
question's own search gives 0.26) and the max over queries refused or answered by which
variant happened to run. Its hits carry the question's own answerability instead (never
more than their own). Paraphrases and translations (a model's rewrites) are searches of
the question's meaning and count as they are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar, cast

from tools.kb.tokenizers import words_of


def is_keyword_selection(query: str, question: str) -> bool:
    """A query made only of the question's words, other than the question itself."""
    return query.strip() != question.strip() and words_of(query, question)


def search_answerability(
    query: str, question: str, answerability: float, question_answerability: float
) -> float:
    """The answerability a search's hits carry as evidence for ``question``."""
    if is_keyword_selection(query, question):
        return min(answerability, question_answerability)
    return answerability


S = TypeVar("S", bound=Mapping[str, Any])


def as_question_evidence(
    question: str,
    queries: Sequence[str],
    hits_per_query: Sequence[int],
    sources: Sequence[S],
    question_answerability: float,
) -> list[S]:
    """``sources`` (the hits of ``queries`` in order, ``hits_per_query`` each) with the
    answerability each carries as evidence for ``question`` (:func:`search_answerability`)."""
    out: list[S] = []
    it = iter(sources)
    for query, n in zip(queries, hits_per_query, strict=True):
        for _ in range(n):
            src = next(it)
            value = search_answerability(
                query, question, float(src.get("answerability") or 0.0), question_answerability
            )
            out.append(cast(S, {**src, "answerability": value}))
    return out
