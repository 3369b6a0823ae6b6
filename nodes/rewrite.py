"""``rewrite``: the original question first, then KB queries and web queries.

With a model the queries come from the router's plan (one call for both); without one,
or when the plan was unusable, from the offline keyword rules.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.messages import HumanMessage, SystemMessage

from prompts.internal import TRANSLATE_SYSTEM
from run.models import NOSTREAM, OFFLINE, load_chat_model
from run.run_view import RunView, node
from tools.answer.crosslingual import (
    Translate,
    other_languages,
    planned_translations,
    translated_queries,
)
from tools.kb.index.tokenizers import keywords
from tools.policy.offline import offline_rewrites

if TYPE_CHECKING:
    from run.state import State


def _clean(queries: list[str], first: str, limit: int) -> list[str]:
    out = list(dict.fromkeys(q.strip() for q in [first, *queries] if q and q.strip()))
    return out[:limit]


def _follow_up_query(question: str, history: list[dict[str, str]]) -> str | None:
    """Offline follow-up resolution: add the previous user question's keywords."""
    previous = [h["content"] for h in history if h["role"] == "user"]
    if not previous:
        return None
    return " ".join(dict.fromkeys([*keywords(previous[-1]), *keywords(question)]))


def model_translator(run: RunView, spec: str, question: str) -> Callable[[], Translate] | None:
    """The question's translation by ``spec`` (one call per target language; None
    offline): the model is loaded once, when a translation is first needed."""
    if spec == OFFLINE:
        return None

    def translator() -> Translate:
        model = load_chat_model(spec, run.model_env)

        async def translate(target: str) -> str:
            system = SystemMessage(TRANSLATE_SYSTEM.format(target=target))
            reply = await model.ainvoke([system, HumanMessage(question)], config=NOSTREAM)
            return str(reply.content)

        return translate

    return translator


@node
async def rewrite(state: State, run: RunView) -> dict[str, Any]:
    question: str = state["question"]
    history = state.get("history") or []
    limit = run.context.num_rewrites + 1  # the question and its rewrites
    run.emit("rewriting")
    with run.timed("rewrite"):
        kb, web = offline_rewrites(question, run.context.num_rewrites)
        follow_up = _follow_up_query(question, history)
        if follow_up:
            kb.insert(1, follow_up)
            web.insert(1, follow_up)
        spec = run.fast_model
        planned = state.get("planned") or {}
        if spec != OFFLINE and planned:
            kb, web = list(planned.get("kb") or []), list(planned.get("web") or [])
        kb_queries = _clean(kb, question, limit)
        web_queries = _clean(web, question, 3)
        report: dict[str, Any] = {}
        if run.context.crosslingual and spec != OFFLINE and planned:
            _, base = await other_languages(run.kb, question)
            extra, report = planned_translations(
                question, list(planned.get("languages") or []),
                list(planned.get("translations") or []), base,
            )  # fmt: skip
        elif run.context.crosslingual:
            translator = model_translator(run, spec, question)
            extra, report = await translated_queries(run.kb, question, translator)
        else:
            extra = []
        if run.context.crosslingual:
            # Translations come right after the original, so the query limit never drops them.
            kb_queries = _clean([*extra, *kb_queries[1:]], question, limit + len(extra))
    run.emit("rewritten", kb_queries=kb_queries, web_queries=web_queries)
    return {"kb_queries": kb_queries, "web_queries": web_queries, "crosslingual": report}


def after_rewrite(state: Mapping[str, Any]) -> list[Literal["retrieve_internal", "search_web"]]:
    """Fan out by route; ``both`` runs the two branches in the same step, in parallel."""
    chosen = state.get("route", "both")
    if chosen == "knowledge":
        return ["retrieve_internal"]
    if chosen == "search":
        return ["search_web"]
    return ["retrieve_internal", "search_web"]
