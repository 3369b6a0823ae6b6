"""``grade``: how well the evidence supports an answer, and the web fallback.

Knowledge-base confidence is the calibrated answerability of the retrieval
(``tools.kb.answerability``: the probability that the top hits answer the question,
so ``confidence_threshold`` 0.3 means 30 %); for web results, which carry no
score, it is the share of question keywords their title and snippet contain. With a
model, the top internal results are also graded correct / ambiguous / incorrect
(as in Corrective RAG) in one listwise call: incorrect ones are dropped and the grades set
confidence.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

from nodes.common import emit, structured_call, timed
from nodes.models import OFFLINE, fast_model
from prompts.internal import GRADE_SYSTEM
from tools.answer.context_builder import fence
from tools.answer.sources import Source
from tools.policy.offline import text_overlap

if TYPE_CHECKING:  # types only: at run time nodes never import graph/
    from graph.context import Context
    from graph.state import State

TOP_N = 3
KEEP_ON_FALLBACK = 2


Grade = Literal["correct", "ambiguous", "incorrect"]
POINTS: dict[str, float] = {"correct": 1.0, "ambiguous": 0.5, "incorrect": 0.0}


class PassageGrades(BaseModel):
    """One grade per passage, in the order the passages were given."""

    grades: list[Grade] = Field(description="one grade per passage, in order")


def internal_confidence(docs: Sequence[Mapping[str, Any]]) -> float:
    """The calibrated probability that the KB evidence answers (``tools.kb.answerability``):
    the best of the searches that found these documents."""
    return max((float(d.get("answerability") or 0.0) for d in docs), default=0.0)


def web_confidence(question: str, docs: Sequence[Mapping[str, Any]]) -> float:
    top = [
        text_overlap(question, f"{d.get('title', '')} {d.get('text', '')}") for d in docs[:TOP_N]
    ]
    return sum(top) / len(top) if top else 0.0


async def _model_grades(
    spec: str, question: str, docs: Sequence[Source]
) -> tuple[list[Source], float] | None:
    """Grade the top passages in one call; None when the output is unusable.

    Passages graded before (the run came back here after the web fallback) keep their
    grade and are not sent again: when all of the top ones have one, no call is made."""
    top = list(docs[:TOP_N])
    if not top:
        return None
    fresh = [doc for doc in top if "grade" not in doc]
    if fresh:
        passages = "\n\n".join(
            fence(str(doc.get("text", "")), f"Passage {i}") for i, doc in enumerate(fresh, 1)
        )
        out, _ = await structured_call(
            spec, PassageGrades, GRADE_SYSTEM, f"Question: {question}\n\n{passages}"
        )
        if out is None or len(out.grades) != len(fresh):
            return None  # unusable grades: fall back to scores for all
        given = iter(out.grades)
    graded: list[Source] = [doc if "grade" in doc else {**doc, "grade": next(given)} for doc in top]
    kept = [doc for doc in graded if doc["grade"] != "incorrect"]
    points = sum(POINTS[doc["grade"]] for doc in graded)
    return [*kept, *docs[TOP_N:]], points / len(top)


async def grade(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = runtime.context
    question: str = state["question"]
    route = state.get("route", "both")
    internal = list(state.get("internal_docs") or [])
    web = list(state.get("web_docs") or [])
    timings: dict[str, float] = {}
    warnings: list[str] = []
    emit(runtime, "grading")
    with timed("grade", timings):
        internal_conf = internal_confidence(internal)
        spec = fast_model(state, ctx)
        if spec != OFFLINE and internal and state.get("iteration", 0) == 0:
            graded = await _model_grades(spec, question, internal)
            if graded is None:
                warnings.append("document grading output unusable; used relevance scores")
            else:
                internal, internal_conf = graded
        web_conf = web_confidence(question, web)
        update: dict[str, Any] = {"internal_docs": internal}
        searched = bool(state.get("web_searched"))
        if route == "search":
            confidence, strategy = web_conf, "search"
        elif route == "both":
            confidence, strategy = max(internal_conf, web_conf), "both"
        else:
            confidence = internal_conf
            strategy = state.get("strategy") or "vector"
        if route != "search" and internal_conf < ctx.confidence_threshold and not searched:
            # Corrective fallback: keep the two best KB results beside the web results.
            update["internal_docs"] = internal[:KEEP_ON_FALLBACK]
            strategy = "search_fallback"
            update["next_source"] = ""
        elif searched and state.get("strategy") == "search_fallback":
            confidence, strategy = max(internal_conf, web_conf), "search_fallback"
    emit(runtime, "graded", confidence=round(confidence, 3), strategy=strategy)
    return {
        **update,
        "confidence": round(confidence, 4),
        "strategy": strategy,
        "warnings": warnings,
        "timings": timings,
    }


def after_grade(state: Mapping[str, Any]) -> Literal["search_web", "reflect"]:
    """Fall back to the web once, when the KB evidence is weak."""
    if state.get("strategy") == "search_fallback" and not state.get("web_searched"):
        return "search_web"
    return "reflect"
