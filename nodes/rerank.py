"""``rerank``: second-stage ordering between retrieval and grading.

Internal candidates are reranked by ``Context.reranker``; with ``joint_ranking`` on
and both kinds present, KB and web candidates are scored together and the best
``rerank_top_n`` overall are kept (the answer still shows them in their own
labelled sections). Scores stay in [0, 1] (see ``tools.kb.search.rerankers``), so the grader's
threshold keeps its meaning. An unusable ``llm`` ordering falls back to the
first-stage order with a warning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from prompts.internal import RERANK_SYSTEM
from run.models import OFFLINE, effective_reranker
from run.node_helpers import structured_call
from run.run_settings import ModelEnv
from run.run_view import RunView, node
from tools.answer.context_builder import fence
from tools.kb.search.rerankers import Candidate, make_reranker, reorder
from tools.policy.offline import text_overlap

if TYPE_CHECKING:
    from run.state import State


class Ordering(BaseModel):
    ids: list[str] = Field(description="candidate ids, most relevant first")


def to_candidates(question: str, docs: Sequence[Mapping[str, Any]]) -> list[Candidate]:
    out = []
    for d in docs:
        text = f"{d.get('heading') or d.get('title') or ''}\n{d.get('text') or ''}"
        # Web hits carry no retrieval score: their first-stage relevance is keyword overlap.
        rel = d.get("relevance")
        relevance = float(rel) if rel is not None else text_overlap(question, text)
        out.append(Candidate(str(d["id"]), text, relevance, payload=d))
    return out


async def _llm_order(
    spec: str, question: str, cands: list[Candidate], top_n: int, env: ModelEnv
) -> tuple[list[Candidate], str | None]:
    listing = "\n".join(fence(c.text[:300], c.id) for c in cands)
    out, error = await structured_call(
        spec, Ordering, RERANK_SYSTEM, f"Question: {question}\n\nCandidates:\n{listing}", env
    )
    if out is None or not set(out.ids) & {c.id for c in cands}:
        return cands[:top_n], error or "no known ids in the ordering"
    return reorder(cands, out.ids, top_n), None


@node
async def rerank(state: State, run: RunView) -> dict[str, Any]:
    question: str = state["question"]
    internal = list(state.get("internal_docs") or [])
    web = list(state.get("web_docs") or [])
    joint = bool(run.context.joint_ranking and internal and web)
    name = effective_reranker(run.context, state.get("mode"))
    if name == "none" and not joint:
        return {}
    run.emit("reranking", reranker=name, joint=joint)
    with run.timed("rerank"):
        pool = to_candidates(question, internal + web if joint else internal)
        top_n = run.context.rerank_top_n
        top_n = top_n if joint else max(top_n, len(pool))
        error: str | None = None
        if name == "llm":
            spec = run.fast_model
            if spec == OFFLINE:
                ranked, error = pool[:top_n], "no model configured (offline)"
            else:
                ranked, error = await _llm_order(spec, question, pool, top_n, run.model_env)
            if error:
                run.warn(f"llm reranking unusable ({error}); kept first-stage order")
        else:
            ranked = make_reranker(name).rerank(question, pool, top_n)
    docs = [{**c.payload, "relevance": round(c.relevance, 4)} for c in ranked]
    update: dict[str, Any] = {"internal_docs": [d for d in docs if d.get("kind") != "web"]}
    if joint:
        update["web_docs"] = [d for d in docs if d.get("kind") == "web"]
    return update
