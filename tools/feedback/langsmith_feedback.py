"""A vote as LangSmith feedback on the run it judges, when tracing is on.

The servers trace each run under its own id (``run_id``), so the vote lands on the run's
trace, where it can be filtered and turned into a LangSmith data set. One feedback per user
and answer (its id derived from both), changed when the user changes their vote. Sending
never fails the vote: the store is the record; a LangSmith failure is logged.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Mapping
from typing import Any

from tools.feedback.votes import Feedback

FEEDBACK_KEY = "user_vote"
TRACING_ENV = ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2")
log = logging.getLogger("hybrid_rag.feedback")


def tracing_on(env: Mapping[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    return any(env.get(name, "").strip().lower() in ("true", "1") for name in TRACING_ENV)


def feedback_id(item: Feedback) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_URL, f"hybrid-rag:{item.user}:{item.answer_key}")


def send_feedback(client: Any, item: Feedback) -> bool:
    """Create (or update) the LangSmith feedback of ``item`` on its run; False when it
    has no run id or LangSmith refused."""
    if not item.run_id:
        return False
    score = 1.0 if item.vote > 0 else 0.0
    fid = feedback_id(item)
    try:
        try:
            client.create_feedback(
                item.run_id,
                key=FEEDBACK_KEY,
                score=score,
                comment=item.comment or None,
                feedback_id=fid,
                source_info={"user": item.user, "thread_id": item.thread_id},
            )
        except Exception:  # already there: the user changed their vote
            client.update_feedback(fid, score=score, comment=item.comment or None)
    except Exception as exc:  # LangSmith is a copy; the vote is stored
        log.warning("feedback on run %s not sent to LangSmith: %s", item.run_id, exc)
        return False
    return True
