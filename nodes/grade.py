"""``grade``: how well the evidence supports an answer, and the web fallback.

Knowledge-base confidence is the calibrated answerability of the retrieval
(``tools.kb.search.answerability``: the probability that the top hits answer the question,
so ``confidence_threshold`` 0.3 means 30 %); for web results, which carry no
score, it is the share of question keywords their title and snippet contain. With a
model, the top internal results are also graded correct / ambiguous / incorrect
(as in Corrective RAG) in one listwise call: incorrect ones are dropped and the grades set
confidence.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from prompts.internal import GRADE_SYSTEM
from run.models import OFFLINE
from run.node_helpers import structured_call
from run.run_settings import ModelEnv
from run.run_view import RunView, node
from tools.answer.context_builder import fence
from tools.answer.sources import Source
from tools.policy.decisions import (
    TOP_N,
    Decision,
    Grade,
    decide,
    graded,
    kept_internal,
    record,
    strategy_label,
    turn_evidence,
)

if TYPE_CHECKING:
    from run.state import State


class PassageGrades(BaseModel):
    """One grade per passage, in the order the passages were given."""

    grades: list[Grade] = Field(description="one grade per passage, in order")


async def _model_grades(
    env: ModelEnv, spec: str, question: str, docs: Sequence[Source]
) -> tuple[list[Source], list[Grade]] | None:
    """Grade the top passages in one call: the passages the grades keep (``tools.policy``)
    and the grades; None when the output is unusable.

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
            spec, PassageGrades, GRADE_SYSTEM, f"Question: {question}\n\n{passages}", env
        )
        if out is None or len(out.grades) != len(fresh):
            return None  # unusable grades: fall back to scores for all
        given = iter(out.grades)
    with_grades: list[Source] = [
        doc if "grade" in doc else {**doc, "grade": next(given)} for doc in top
    ]
    grades: list[Grade] = [doc["grade"] for doc in with_grades]  # type: ignore[misc]
    return [*graded(with_grades), *docs[TOP_N:]], grades


@node
async def grade(state: State, run: RunView) -> dict[str, Any]:
    question: str = state["question"]
    internal = list(state.get("internal_docs") or [])
    grades: list[Grade] = []
    run.emit("grading")
    with run.timed("grade"):
        spec = run.fast_model
        # A small local model (Context.small_model) grades no passages: one call saved, and
        # a 1.5B model graded noise passages "correct" (issue 56); the scores decide.
        model_grades = spec != OFFLINE and not run.context.small_model
        if model_grades and internal and state.get("iteration", 0) == 0:
            result = await _model_grades(run.model_env, spec, question, internal)
            if result is None:
                run.warn("document grading output unusable; used relevance scores")
            else:
                internal, grades = result
        evidence = turn_evidence({**state, "internal_docs": internal}, grades=grades)
        decision: Decision = decide(
            evidence, run.context.confidence_threshold, refusal=run.context.refusal_threshold
        )
        update: dict[str, Any] = {"internal_docs": kept_internal(internal, decision)}
        if decision["search_web_now"]:
            update["next_source"] = ""
    strategy = strategy_label(state.get("route"), decision["web_fallback"])
    run.emit("graded", confidence=decision["confidence"], strategy=strategy)
    return {
        **update,
        "evidence": record(evidence),
        "decision": decision,
        "confidence": decision["confidence"],
        "strategy": strategy,
    }


def after_grade(state: Mapping[str, Any]) -> Literal["search_web", "reflect"]:
    """Fall back to the web once, when the KB evidence is weak (``tools.policy``)."""
    if (state.get("decision") or {}).get("search_web_now"):
        return "search_web"
    return "reflect"
