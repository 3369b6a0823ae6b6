"""Small helpers the nodes share: structured model calls and the conversation's history
(progress events, timings and warnings are the run view's: ``run.run_view.RunView``)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TypeVar

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage
from pydantic import BaseModel

from run.models import NOSTREAM, load_chat_model
from run.run_settings import ModelEnv
from tools.answer.sources_block import without_sources
from tools.text import content_text

log = logging.getLogger("hybrid_rag.nodes")
T = TypeVar("T", bound=BaseModel)


async def structured_call(
    spec: str, schema: type[T], system: str, user: str, env: ModelEnv
) -> tuple[T | None, str | None]:
    """Ask ``spec`` for ``schema`` with the run's model environment (``env``: a node's
    ``run_of(...).model_env``, never read again here); returns (result, None) or
    (None, why it failed).

    Any failure — the model erroring, output that does not parse or validate —
    is returned, not raised, so the caller falls back to its deterministic rule.
    """
    try:
        model = load_chat_model(spec, env).with_structured_output(schema)
        result = await model.ainvoke([SystemMessage(system), HumanMessage(user)], config=NOSTREAM)
        if isinstance(result, schema):
            return result, None
        if isinstance(result, dict):
            return schema.model_validate(result), None
        return None, f"unexpected output type {type(result).__name__}"
    except Exception as exc:  # any model/parse failure means "use the rule"
        # A warning with the traceback: an auth error or a bug must be visible in logs,
        # even though the run goes on with the rule.
        log.warning("structured call to %s failed: %s", spec, type(exc).__name__, exc_info=True)
        return None, f"{type(exc).__name__}"


def history_of(messages: Sequence[AnyMessage], turns: int = 6) -> list[dict[str, str]]:
    """The conversation before the current question, as role/content pairs."""
    out: list[dict[str, str]] = []
    for m in messages:
        if isinstance(m, HumanMessage):
            out.append({"role": "user", "content": content_text(m.content, strict=False)})
        elif isinstance(m, AIMessage) and m.content and not m.tool_calls:
            # The answer without its sources block (the sources are not the conversation).
            text = content_text(m.content, strict=False)
            out.append({"role": "assistant", "content": without_sources(text)})
    return out[-turns:]


def render_history(history: list[dict[str, str]]) -> str:
    return "\n".join(f"{h['role']}: {h['content']}" for h in history)
