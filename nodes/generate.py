"""``generate`` and ``cite``: the answer with labelled sources, then citation checking."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from nodes.answer_context import answer_context
from nodes.sufficiency_check import sources_state_answer
from prompts import answer as P
from run.localize import localize
from run.models import OFFLINE, load_chat_model
from run.reader import run_operator
from run.run_view import RunView, node
from tools.answer.attribution import attach_labels
from tools.answer.citations import assign_labels, validate_citations
from tools.answer.context_builder import BuiltContext
from tools.answer.crosslingual import source_similarity
from tools.answer.sources_block import with_sources
from tools.policy.decisions import web_unavailable
from tools.policy.disclosure import WEB_NOT_AVAILABLE, web_reason_for
from tools.policy.offline import Similarity, extractive_answer, no_information
from tools.policy.refusal import check_answer, refusal_text
from tools.policy.relevance import quotable_sources

if TYPE_CHECKING:
    from run.state import State

log = logging.getLogger("hybrid_rag.nodes")


def refuses(state: Mapping[str, Any]) -> bool:
    """The offline answer's refusal, as the turn's ``tools.policy.decide`` concluded (no
    decision yet means no evidence: refuse)."""
    return bool((state.get("decision") or {}).get("refuse", True))


def select_sources(run: RunView) -> list[dict[str, Any]]:
    state, ctx = run.state, run.context
    internal = list(state.get("internal_docs") or [])[: ctx.top_k_internal]
    web = list(state.get("web_docs") or [])[: ctx.top_k_web]
    return assign_labels([*internal, *web], state.get("language", "en"))


def system_prompt(language: str, web_failure: str | None) -> str:
    zh = language == "zh"
    note = ""
    if web_failure:
        note = (P.WEB_UNAVAILABLE_ZH if zh else P.WEB_UNAVAILABLE_EN).format(reason=web_failure)
    template = P.ANSWER_SYSTEM_ZH if zh else P.ANSWER_SYSTEM_EN
    return template.format(web_note=note, today=datetime.now(UTC).date())


def build_prompt(run: RunView, sources: list[dict[str, Any]]) -> tuple[list[Any], BuiltContext]:
    state = run.state
    language = state.get("language", "en")
    system = system_prompt(language, web_reason(state))
    built = answer_context(
        run,
        sources,
        system,
        reserve_tokens=run.context.answer_reserve_tokens,
        history=state.get("history") or [],
    )
    messages: list[Any] = [SystemMessage(system)]
    for turn in built.history:
        messages.append(
            HumanMessage(turn["content"]) if turn["role"] == "user" else AIMessage(turn["content"])
        )
    template = P.USER_TEMPLATE_ZH if language == "zh" else P.USER_TEMPLATE_EN
    # Model mode: the lines the offline answer would quote, after the sources and before
    # the question (last, so the model answers it rather than echo the lines).
    lines = (
        key_lines(state["question"], built.included, language)
        if state.get("mode", OFFLINE) != OFFLINE
        else ""
    )
    user = template.format(context=built.text, key_lines=lines, question=state["question"])
    messages.append(HumanMessage(user))
    return messages, built


def key_lines(question: str, sources: list[dict[str, Any]], language: str) -> str:
    """The lines the offline answer would quote (``tools.policy.offline.extractive_answer``
    over the passages that mention the question's key terms), as a pointer for the model;
    '' when none does."""
    quotable, missing = quotable_sources(question, sources)
    if missing or not quotable:
        return ""
    lines = extractive_answer(question, quotable, language)
    if lines.strip() == no_information(language).strip():
        return ""
    return (P.KEY_LINES_ZH if language == "zh" else P.KEY_LINES_EN).format(lines=lines)


def web_reason(state: Mapping[str, Any]) -> str | None:
    """Why the answer must say the web was unavailable (``tools.policy.web_unavailable``),
    as the run's caller may read it (``tools.policy.disclosure``), or None."""
    reason = web_unavailable(state)
    return web_reason_for(reason, operator=run_operator()) if reason else None


def web_note(state: Mapping[str, Any], language: str) -> str:
    """The answer's closing "live web results were unavailable" sentence, when
    ``tools.policy.web_unavailable`` says it applies ('' otherwise); both graphs."""
    reason = web_reason(state)
    if not reason:
        return ""
    if reason == WEB_NOT_AVAILABLE:
        return "\n\n" + (
            P.WEB_NOT_AVAILABLE_SENTENCE_ZH if language == "zh" else P.WEB_NOT_AVAILABLE_SENTENCE_EN
        )
    template = P.WEB_FAILURE_SENTENCE_ZH if language == "zh" else P.WEB_FAILURE_SENTENCE_EN
    return "\n\n" + template.format(reason=localize(reason, language).rstrip("。."))


def quoted_answer(
    question: str,
    sources: list[dict[str, Any]],
    language: str,
    *,
    similarity: Similarity | None = None,
) -> tuple[str, list[str]]:
    """The extractive answer from the sources that mention the question's key terms
    (``tools.policy.relevance``; every extractive answer of both graphs), and a warning
    when none does (the answer is then the refusal)."""
    quotable, missing = quotable_sources(question, sources)
    if missing:
        return no_information(language), [
            f"no source mentions the question's key terms ({', '.join(missing)}): nothing quoted"
        ]
    return extractive_answer(question, quotable, language, similarity=similarity), []


def extractive_note(run: RunView, language: str) -> str:
    """Why the answer is quoted from the sources: offline mode (no model configured), or
    the model failed; nothing past the deadline (the deadline sentence says it). A
    model-mode run never calls itself "offline"."""
    zh = language == "zh"
    if run.past_deadline:
        return ""
    if run.state.get("mode", OFFLINE) == OFFLINE:
        return P.OFFLINE_NOTE_ZH if zh else P.OFFLINE_NOTE_EN
    return P.MODEL_FAILED_NOTE_ZH if zh else P.MODEL_FAILED_NOTE_EN


@node
async def generate(state: State, run: RunView) -> dict[str, Any]:
    language = state.get("language", "en")
    mode = state.get("mode", OFFLINE)
    message_id: str | None = None
    draft = ""
    run.emit("answering", mode=mode)
    with run.timed("generate"):
        sources = select_sources(run)
        messages, built = build_prompt(run, sources)
        if built.omitted:
            run.warn(f"{built.omitted} sources left out to fit context_token_budget")
        answer = ""
        if mode != OFFLINE:
            env = run.model_env  # outside the try: missing settings are no model failure
            try:
                reply = await load_chat_model(mode, env).ainvoke(messages)
                answer, message_id = str(reply.content).strip(), reply.id
                draft = str(reply.content)
            except Exception as exc:  # provider down: answer from the sources, say why
                log.warning("answer model call failed", exc_info=True)
                run.warn(f"answer model call failed ({type(exc).__name__}); used extractive answer")
        if not answer:
            if refuses(state):
                answer = no_information(language)
            else:
                answer, unmentioned = await asyncio.to_thread(
                    quoted_answer,
                    state["question"],
                    built.included,
                    language,
                    similarity=source_similarity(run.kb),
                )
                for warning in unmentioned:
                    run.warn(warning)
            answer = f"{answer} {extractive_note(run, language)}".rstrip()
        answer += web_note(state, language)
    return {
        "answer": answer,
        "answer_message_id": message_id,
        "answer_draft": draft,
        "sources": built.included,
    }


def _answer_message_id(state: Mapping[str, Any]) -> str | None:
    """The streamed draft's id, also when the check changed the text: chat clients (Studio)
    keep one bubble, its text replaced by the checked answer from the ``values``/``updates``
    stream (LangGraph's ``messages`` stream does not repeat an id it streamed). A fresh id
    only when nothing was streamed (offline answers)."""
    return state.get("answer_message_id") or None


def checked_refusal(state: Mapping[str, Any]) -> tuple[str, str]:
    """A model-written answer after the refusal rule (``tools.policy.refusal``), and why
    it was replaced ('' when kept). Notes appended after the model's draft (the web
    failure sentence) are kept; offline answers pass unchanged. Sentences the model left
    without a label first get the label of the source they repeat
    (``tools.answer.attribution``): a right answer is not refused for a missing label."""
    answer = str(state.get("answer") or "")
    draft = str(state.get("answer_draft") or "").strip()
    if not draft or not answer.startswith(draft):
        return answer, ""
    sources = state.get("sources") or []
    labelled, attached = attach_labels(draft, state["question"], sources)
    if attached:
        log.info("attached %d citation label(s) to unlabeled sentences", attached)
        answer, draft = labelled + answer[len(draft) :], labelled
    by_label = {str(s.get("label")): s for s in sources}
    cited = [by_label[c["label"]] for c in validate_citations(draft, sources).cited]
    verdict = check_answer(
        draft, state["question"], cited, state.get("language", "en"), given=sources
    )
    if verdict.answer == draft:
        return answer, ""
    return f"{verdict.answer}{answer[len(draft) :]}", verdict.reason


@node
async def cite(state: State, run: RunView) -> dict[str, Any]:
    """Apply the refusal rule, keep only labels that name a source in the context, list
    the cited sources."""
    answer, refusal_reason = checked_refusal(state)
    if not refusal_reason and await sources_state_answer(run, state) is False:
        language = str(state.get("language") or "en")
        answer = refusal_text(language) + web_note(state, language)
        refusal_reason = "the model judged that no source states the answer"
    check = validate_citations(answer, state.get("sources") or [])
    warnings = []
    if refusal_reason:
        warnings.append(f"answer replaced by the refusal: {refusal_reason}")
    if check.unknown_labels:
        warnings.append(
            f"dropped citation labels that match no source: {', '.join(check.unknown_labels)}"
        )
    run.emit("done", citations=len(check.cited))
    message = with_sources(check.answer, check.cited, str(state.get("language") or "en"))
    return {
        "answer": check.answer,
        "citations": check.cited,
        "citation_validity": round(check.validity, 4),
        "warnings": warnings,
        # The chat message carries the sources its labels name (clients see only messages).
        # ``additional_kwargs.citations``: each turn's records, for a page showing old turns.
        "messages": [
            AIMessage(
                message,
                id=_answer_message_id(state),
                additional_kwargs={"citations": check.cited},
            )
        ],
    }
