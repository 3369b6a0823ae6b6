"""The model's sufficiency check: before a model-written answer is kept, the model is
asked once whether the sources state the answer (``Context.sufficiency_check``).

One short call, bounded three ways: at most ``tools.answer.sufficiency.MAX_TOKENS``
tokens back, the model request timeout, and not at all past the run's deadline. The
sources are shown as the answer step showed them (``nodes.answer_context``). A call that
fails or a reply that is neither yes nor no decides nothing: the answer stays, with a
warning, and the refusal rule (``tools.policy.refusal``) still applies.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage

from nodes.answer_context import answer_context
from prompts import answer as P
from run.models import NOSTREAM, OFFLINE, load_chat_model
from run.run_view import RunView
from tools.answer.sufficiency import MAX_TOKENS, verdict
from tools.policy.refusal import is_refusal

log = logging.getLogger("hybrid_rag.nodes")


def wanted(run: RunView, state: Mapping[str, Any]) -> bool:
    """Whether the check runs: a model wrote the answer, it is not a refusal already, the
    check is on, the model is not a small one on a CPU (``small_model``: Qwen2.5-1.5B
    said "yes" to 10 of 10 RGB checks, 3 of them over negatives it had answered wrongly,
    at 10-26 s each; docs/DEPLOYMENT.md section 7), and the run is not past its deadline."""
    draft = str(state.get("answer_draft") or "").strip()
    return (
        bool(draft)
        and run.context.sufficiency_check
        and not run.context.small_model
        and state.get("mode", OFFLINE) != OFFLINE
        and bool(state.get("sources"))
        and not is_refusal(draft)
        and not run.past_deadline
    )


def check_messages(run: RunView, state: Mapping[str, Any]) -> list[Any]:
    zh = state.get("language") == "zh"
    system = P.SUFFICIENCY_SYSTEM_ZH if zh else P.SUFFICIENCY_SYSTEM_EN
    built = answer_context(run, list(state.get("sources") or []), system, reserve_tokens=MAX_TOKENS)
    user = (P.SUFFICIENCY_USER_ZH if zh else P.SUFFICIENCY_USER_EN).format(
        context=built.text, question=state["question"]
    )
    return [SystemMessage(system), HumanMessage(user)]


async def sources_state_answer(run: RunView, state: Mapping[str, Any]) -> bool | None:
    """The model's verdict (True: a source states the answer), or None when the check
    did not run or did not decide (a warning on the run says why)."""
    if not wanted(run, state):
        return None
    env = dataclasses.replace(run.model_env, max_tokens=MAX_TOKENS)
    with run.timed("sufficiency"):
        try:
            model = load_chat_model(str(state["mode"]), env)
            reply = await model.ainvoke(check_messages(run, state), config=NOSTREAM)
        except Exception as exc:  # provider down or slow: the answer stays, the rule checks
            log.warning("sufficiency check failed: %s", type(exc).__name__)
            run.warn(f"sufficiency check failed ({type(exc).__name__}); answer kept")
            return None
    said = verdict(str(reply.content))
    if said is None:
        run.warn(f"sufficiency check: the model replied neither yes nor no ({reply.content!r:.40})")
    return said
