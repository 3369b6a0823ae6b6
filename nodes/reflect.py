"""``reflect``: enough evidence, or the next query and the source to ask.

Bounded by ``max_iterations``: the counter is a plain integer in state that this
node overwrites with ``iteration + 1`` each time it asks for another round, and
the router below sends the run to ``generate`` once it reaches the bound.

With a model, reflection costs a call only when the evidence is weak: ``confidence``
(the calibrated answerability, or the model's grades) below :data:`REFLECT_BELOW`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from prompts.internal import REFLECT_SYSTEM, REFLECT_WEB_OFF, REFLECT_WEB_ON
from run.models import OFFLINE
from run.node_helpers import structured_call
from run.run_view import RunView, node
from run.search_setup import web_available
from tools.answer.context_builder import fence
from tools.policy.decisions import (
    REFLECT_BELOW,
    NextStep,
    offline_next_step,
    reflection_call_needed,
    worth_asking,
)

if TYPE_CHECKING:
    from run.state import State


class Reflection(BaseModel):
    sufficient: bool = Field(description="true when the sources answer the question")
    next_query: str = Field(default="", description="follow-up query when not sufficient")
    source: Literal["internal", "web"] = Field(default="internal")


def _evidence(state: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [*(state.get("internal_docs") or []), *(state.get("web_docs") or [])]


def _offline(state: Mapping[str, Any]) -> Reflection:
    texts = [
        f"{d.get('heading', '')} {d.get('title', '')} {d.get('text', '')}" for d in _evidence(state)
    ]
    step = offline_next_step(
        state["question"],
        state.get("route"),
        bool(state.get("web_error") or state.get("web_skipped")),
        texts,
    )
    return Reflection(sufficient=step.sufficient, next_query=step.next_query, source=step.source)


async def _model_reflection(run: RunView, spec: str) -> tuple[Reflection | None, str | None]:
    """The model's verdict on the top sources (None and why, when unusable)."""
    sources = "\n\n".join(
        fence(str(d.get("text", ""))[:500], f"Source {i}")
        for i, d in enumerate(_evidence(run.state)[:8], 1)
    )
    question = f"Question: {run.state['question']}\n\nSources:\n{sources}"
    system = REFLECT_SYSTEM.format(
        web_choice=REFLECT_WEB_ON if web_available(run) else REFLECT_WEB_OFF
    )
    out, error = await structured_call(spec, Reflection, system, question, run.model_env)
    if out is not None and out.source == "web" and not web_available(run):
        out = out.model_copy(update={"source": "internal"})  # a disabled source: the KB
    return out, error


@node
async def reflect(state: State, run: RunView) -> dict[str, Any]:
    iteration = int(state.get("iteration") or 0)
    reasoning = list(state.get("reasoning") or [])
    bound = run.context.max_iterations
    run.emit("reflecting", iteration=iteration)
    with run.timed("reflect"):
        spec = run.fast_model
        confidence = float(state.get("confidence") or 0.0)
        if iteration >= bound:
            decision = Reflection(sufficient=True)
            note = f"iteration bound reached ({bound})"
        elif spec != OFFLINE and not reflection_call_needed(confidence):
            decision = Reflection(sufficient=True)
            note = f"strong evidence (confidence {confidence:.2f} >= {REFLECT_BELOW}): no call"
        else:
            decision, note = _offline(state), "offline coverage rule"
            if spec != OFFLINE and not run.context.small_model:  # small: the rule, no call
                out, error = await _model_reflection(run, spec)
                if out is None:
                    run.warn(f"reflection output unusable ({error}); used coverage rule")
                else:
                    decision, note = out, "model"
            tried = {str(step.get("query")) for step in reasoning}
            step = NextStep(decision.sufficient, decision.next_query, decision.source)
            if not decision.sufficient and not worth_asking(step, tried):
                decision, note = Reflection(sufficient=True), f"{note}; no new query to try"
    if decision.sufficient:
        reasoning.append({"step": iteration, "action": "sufficient", "query": "", "note": note})
        run.emit("reflected", sufficient=True)
        return {"reasoning": reasoning, "next_query": "", "next_source": ""}
    reasoning.append(
        {
            "step": iteration + 1,
            "action": f"retrieve:{decision.source}",
            "query": decision.next_query,
            "note": note,
        }
    )
    run.emit("reflected", sufficient=False, next_query=decision.next_query,
             source=decision.source)  # fmt: skip
    return {
        "iteration": iteration + 1,
        "reasoning": reasoning,
        "next_query": decision.next_query,
        "next_source": decision.source,
    }


def after_reflect(
    state: Mapping[str, Any],
) -> Literal["retrieve_internal", "search_web", "generate"]:
    if not state.get("next_query"):
        return "generate"
    return "search_web" if state.get("next_source") == "web" else "retrieve_internal"
