"""Small helpers the nodes share: structured model calls and the conversation's history
(progress events, timings and warnings are the run view's: ``run.run_view.RunView``)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TypeVar

from langchain_core.exceptions import OutputParserException
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage
from langchain_core.utils.json import parse_partial_json
from pydantic import BaseModel, ValidationError

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
    is returned, not raised, so the caller falls back to its deterministic rule. JSON cut
    off by ``max_tokens`` (a small model's plan ran to the limit: ``LengthFinishReasonError``)
    is read as far as it goes: what it holds is used when it validates.
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
        salvaged = truncated_json(exc, schema)
        if salvaged is not None:
            log.info(
                "structured call to %s: JSON cut off at max_tokens, read as far as it went", spec
            )
            return salvaged, None
        if isinstance(exc, EXPECTED_OUTPUT_ERRORS) or type(exc).__name__ == LENGTH_ERROR:
            # A model's output that is not the schema is expected of a small model: one line
            # in the log (no traceback on stderr), the run goes on with the rule.
            log.warning("structured call to %s gave unusable output: %s", spec, type(exc).__name__)
        else:
            # A warning with the traceback: an auth error or a bug must be visible in logs,
            # even though the run goes on with the rule.
            log.warning("structured call to %s failed: %s", spec, type(exc).__name__, exc_info=True)
        return None, f"{type(exc).__name__}"


# openai's error for JSON cut off by max_tokens (its ``completion`` holds the text), named
# rather than imported: a model of another provider raises its own.
LENGTH_ERROR = "LengthFinishReasonError"
EXPECTED_OUTPUT_ERRORS = (OutputParserException, ValidationError, ValueError)


def truncated_json(exc: BaseException, schema: type[T]) -> T | None:
    """The object a reply cut off by ``max_tokens`` holds as far as it goes (closing its
    open strings, lists and objects), when that validates against ``schema``; else None."""
    if type(exc).__name__ != LENGTH_ERROR:
        return None
    try:
        text = str(exc.completion.choices[0].message.content or "")  # type: ignore[attr-defined]
    except (AttributeError, IndexError):
        return None
    data = parse_partial_json(text.strip())
    if not isinstance(data, dict):
        return None
    try:
        return schema.model_validate(data)
    except ValidationError:
        return None


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
