"""Which searches are evidence that the knowledge base answers the question.

The KB confidence of a turn is the best calibrated answerability (``tools.kb.search.answerability``)
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
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from tools.kb.index.tokenizers import words_of


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


@dataclass(frozen=True)
class KBSearch:
    """One knowledge-base search as evidence: its query, its calibrated answerability and
    the passages it found (none for a search of the question run only for its value)."""

    query: str
    answerability: float
    sources: Sequence[Mapping[str, Any]] = ()


def evidence_from(searches: Sequence[KBSearch], question: str) -> list[S]:
    """The passages of ``searches`` (in order), each carrying the answerability it is
    evidence of for ``question`` (:func:`search_answerability`): a keyword selection's hits
    carry the question's own search's value, which must then be among ``searches``
    (``SearchService.search_kb(question=...)`` adds it; 0.0 when it is not). Both graphs'
    knowledge-base searches pass here."""
    own = next((s.answerability for s in searches if s.query.strip() == question.strip()), 0.0)
    out: list[S] = []
    for search in searches:
        for src in search.sources:
            value = search_answerability(search.query, question, search.answerability, own)
            out.append(cast(S, {**src, "answerability": value}))
    return out
