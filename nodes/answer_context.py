"""The sources as a model reads them: fenced, focused on the lines that match the
question, within the run's token budget. One builder for the answer step
(``nodes.generate.build_prompt``) and its sufficiency check (``nodes.sufficiency_check``),
so both read the same text (and a server caching the prompt's prefix reads it once)."""

from __future__ import annotations

from typing import Any

from run.run_view import RunView
from tools.answer.context_builder import BuiltContext, build_context
from tools.text import estimate_tokens


def answer_context(
    run: RunView,
    sources: list[dict[str, Any]],
    system: str,
    *,
    reserve_tokens: int,
    history: list[dict[str, str]] | None = None,
) -> BuiltContext:
    """``sources`` (and ``history``) fitted beside ``system`` and the question, leaving
    ``reserve_tokens`` for the reply."""
    state, ctx = run.state, run.context
    return build_context(
        sources,
        snippet_chars=ctx.snippet_chars,
        budget_tokens=ctx.context_token_budget,
        system_tokens=estimate_tokens(system) + estimate_tokens(state["question"]) + 20,
        reserve_tokens=reserve_tokens,
        history=history,
        web_fetched_at=state.get("web_fetched_at"),
        language=str(state.get("language") or "en"),
        question=state["question"],
        passage_chars=ctx.answer_source_chars,
    )
