"""``prepare``: take the question from the input, validate it, reset per-turn state."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from langchain_core.messages import HumanMessage

from run.approval_interrupt import require_checkpointer
from run.models import resolve_model_spec
from run.node_helpers import history_of
from run.reducers import fresh_turn
from run.run_settings import resolve_run_settings
from run.run_view import RunView, node
from tools.errors import InputError
from tools.kb.index.tokenizers import warm_up, warmed_up
from tools.kb.search.rerankers import make_reranker
from tools.policy.offline import answer_language
from tools.text import content_text, undecodable_bytes

if TYPE_CHECKING:
    from run.state import State

_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def validate_question(question: Any, max_chars: int) -> str:
    """The stripped question, or an :class:`InputError` that says what is wrong."""
    if not isinstance(question, str):
        raise InputError(f"question must be a string, got {type(question).__name__}")
    if _CONTROL_RE.search(question):
        raise InputError("question contains control characters")
    if undecodable_bytes(question) is not None:  # a lone surrogate: no model can read it
        raise InputError(f"question is not valid UTF-8 text: '{undecodable_bytes(question)}'")
    text = question.strip()
    if not text:
        raise InputError("question is empty")
    if len(text) > max_chars:
        raise InputError(
            f"question is too long ({len(text)} characters; max_question_chars is {max_chars})"
        )
    return text


def current_question(state: Mapping[str, Any]) -> tuple[Any, bool]:
    """The question of this turn, and whether it must be added to ``messages``.

    A trailing human message that no earlier turn answered is the new question (chat
    input); otherwise the ``question`` field is (plain input, or a later turn of a
    thread). ``asked_id`` (the human message the last ``prepare`` took) tells the two
    apart when a run was cancelled or left waiting for approval: the thread then ends
    with the old question's message, and a new ``question`` must win over it.
    """
    messages = state.get("messages") or []
    last = messages[-1] if messages and isinstance(messages[-1], HumanMessage) else None
    asked = state.get("asked_id")
    new_message = last is not None and (last.id is None or last.id != asked)
    if "question" in state and (not new_message or _question_is_new(state, messages)):
        return state["question"], True
    if last is not None:
        return content_text(last.content), False
    raise InputError("input needs a 'question' or a human message in 'messages'")


def _question_is_new(state: Mapping[str, Any], messages: list[Any]) -> bool:
    """Whether ``question`` differs from what the last ``prepare`` took (a question
    field left over from the previous turn equals that message's text)."""
    asked = state.get("asked_id")
    question = state["question"]
    if not asked:
        # No turn was prepared yet, so a question field beside an untaken message is this
        # run's input: the first run (chat input) was cancelled before prepare took its
        # message. Equal texts are one question sent both ways. (Not told apart: a first
        # run {"question"} cancelled before prepare, then a chat message; the field wins.)
        last = messages[-1] if messages else None
        return last is None or not isinstance(question, str) or question.strip() != _text(last)
    taken = next((m for m in messages if getattr(m, "id", None) == asked), None)
    return taken is None or not isinstance(question, str) or question.strip() != _text(taken)


def _text(message: Any) -> str:
    return content_text(message.content, strict=False).strip()


@node
async def prepare(state: State, run: RunView) -> dict[str, Any]:
    if not warmed_up():  # the rules' tokenizer loads its dictionary once, never on the loop
        await asyncio.to_thread(warm_up)
    raw, add_message = current_question(state)
    question = validate_question(raw, run.context.max_question_chars)
    # The environment, read once for the whole run; the run's view from here on holds it.
    run = run.starting(resolve_run_settings(run.context))
    # A run that may pause for approval must be resumable.
    require_checkpointer(run)
    reranker = run.context.reranker
    if reranker.startswith("cross-encoder"):  # a missing local model fails now, not mid-run
        await asyncio.to_thread(make_reranker, reranker)
    messages = state.get("messages") or []
    history = history_of(messages if add_message else messages[:-1])
    # "auto" models are resolved once here (the environment is read once per run).
    mode = resolve_model_spec(run.context.model, env=run.model_env)
    language = answer_language(question, run.context.answer_language)
    run.emit("preparing", mode=mode, language=language)
    update: dict[str, Any] = {
        **fresh_turn(),
        "question": question,
        "history": history,
        "mode": mode,
        "fast_mode": resolve_model_spec(run.context.fast_model, fallback=mode, env=run.model_env),
        "language": language,
        # with the run's deadline (run_timeout_s); never checkpointed nor shown (run.state)
        "run_settings": run.settings,
    }
    if add_message:
        asked = HumanMessage(question, id=str(uuid.uuid4()))
        update["messages"] = [asked]
        update["asked_id"] = asked.id
    else:
        update["asked_id"] = messages[-1].id
    return update
