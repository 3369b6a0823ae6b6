"""``rewrite``: the original question first, then KB queries and web queries."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

from nodes.common import emit, render_history, structured_call, timed
from nodes.crosslingual import translated_queries
from nodes.models import OFFLINE, fast_model
from prompts.internal import REWRITE_SYSTEM
from tools.kb.tokenizers import keywords
from tools.policy.offline import offline_rewrites

if TYPE_CHECKING:  # types only: at run time nodes never import graph/
    from graph.context import Context
    from graph.state import State


class Rewrites(BaseModel):
    kb_queries: list[str] = Field(description="knowledge-base retrieval queries")
    web_queries: list[str] = Field(description="2-3 web search-engine queries")


def _clean(queries: list[str], first: str, limit: int) -> list[str]:
    out = list(dict.fromkeys(q.strip() for q in [first, *queries] if q and q.strip()))
    return out[:limit]


def _follow_up_query(question: str, history: list[dict[str, str]]) -> str | None:
    """Offline follow-up resolution: add the previous user question's keywords."""
    previous = [h["content"] for h in history if h["role"] == "user"]
    if not previous:
        return None
    return " ".join(dict.fromkeys([*keywords(previous[-1]), *keywords(question)]))


async def rewrite(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = runtime.context
    question: str = state["question"]
    history = state.get("history") or []
    timings: dict[str, float] = {}
    warnings: list[str] = []
    emit(runtime, "rewriting")
    with timed("rewrite", timings):
        kb, web = offline_rewrites(question, ctx.num_rewrites)
        follow_up = _follow_up_query(question, history)
        if follow_up:
            kb.insert(1, follow_up)
            web.insert(1, follow_up)
        spec = fast_model(state, ctx)
        if spec != OFFLINE:
            system = REWRITE_SYSTEM.format(
                today=datetime.now(UTC).date(), num_rewrites=ctx.num_rewrites
            )
            user = (
                f"History:\n{render_history(history)}\n\nQuestion: {question}"
                if history
                else question
            )
            out, error = await structured_call(spec, Rewrites, system, user)
            if out is None:
                warnings.append(f"rewrite output unusable ({error}); used keyword rules")
            else:
                kb, web = out.kb_queries, out.web_queries
        kb_queries = _clean(kb, question, ctx.num_rewrites + 1)
        web_queries = _clean(web, question, 3)
        report: dict[str, Any] = {}
        if ctx.crosslingual:
            extra, report = await translated_queries(ctx, question, spec)
            # Translations come right after the original, so the query limit never drops them.
            kb_queries = _clean(
                [*extra, *kb_queries[1:]], question, ctx.num_rewrites + 1 + len(extra)
            )
            if report.get("note"):
                warnings.append(f"cross-lingual: {report['note']}")
    emit(runtime, "rewritten", kb_queries=kb_queries, web_queries=web_queries)
    return {
        "kb_queries": kb_queries,
        "web_queries": web_queries,
        "crosslingual": report,
        "warnings": warnings,
        "timings": timings,
    }
