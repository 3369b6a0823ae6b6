"""The feedback routes (docs/API.md): a user's thumbs up or down, with an optional comment,
on an answer; each user reads and changes only their own (``tools.feedback.votes``).

With LangSmith tracing on, each vote is also sent as LangSmith feedback on the run it
judges (``tools.feedback.langsmith_feedback``), off the request.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from run.context import Context
from server.api_caller import Caller, Refused
from server.blocking_pools import run_blocking
from server.documents_api import endpoint
from tools.errors import InputError
from tools.feedback.langsmith_feedback import send_feedback, tracing_on
from tools.feedback.votes import Feedback, FeedbackStore, feedback_path, parse_feedback
from tools.settings import home_path

_lock = threading.Lock()
_stores: dict[Path, FeedbackStore] = {}
MAX_LIST = 500


def store() -> FeedbackStore:
    """The server's feedback store (in its data home; opened on first use)."""
    path = feedback_path(home_path(Context().data_home or None))
    with _lock:
        if path not in _stores:
            _stores[path] = FeedbackStore(path)
        return _stores[path]


def langsmith_client() -> Any:
    """The client votes are sent with (replaced by a fake in the tests); it reads
    ``LANGSMITH_API_KEY`` / ``LANGSMITH_ENDPOINT`` as tracing does."""
    from langsmith import Client

    return Client()


def _to_langsmith(item: Feedback) -> None:
    if tracing_on() and item.run_id:
        threading.Thread(
            target=lambda: send_feedback(langsmith_client(), item),
            name="feedback-langsmith",
            daemon=True,
        ).start()


async def put_feedback(request: Request, who: Caller) -> Response:
    try:
        body = await request.json()
    except ValueError:
        raise InputError("the body is not JSON") from None
    item = parse_feedback(who.identity, body)
    saved: Feedback = await run_blocking("feedback", lambda: store().put(item))
    _to_langsmith(saved)
    return JSONResponse(saved.view())


async def list_feedback(request: Request, who: Caller) -> Response:
    thread = request.query_params.get("thread_id") or None
    items = await run_blocking("feedback", lambda: store().mine(who.identity, thread, MAX_LIST))
    return JSONResponse({"feedback": [f.view() for f in items]})


async def delete_feedback(request: Request, who: Caller) -> Response:
    key = request.path_params["answer_key"]
    if not await run_blocking("feedback", lambda: store().remove(who.identity, key)):
        raise Refused(404, "feedback not found")
    return JSONResponse({"deleted": key})


def routes() -> list[BaseRoute]:
    return [
        Route("/feedback", endpoint(put_feedback), methods=["PUT", "POST"]),
        Route("/feedback", endpoint(list_feedback), methods=["GET"]),
        Route("/feedback/{answer_key}", endpoint(delete_feedback), methods=["DELETE"]),
    ]
