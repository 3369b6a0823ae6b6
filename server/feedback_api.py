"""The feedback routes (docs/API.md): a user's thumbs up or down, with an optional comment,
on an answer; each user reads and changes only their own (``tools.feedback.votes``).

A vote is taken only on a thread the voter may read, and names a run only of that thread:
both are asked of this server itself, as the caller (``GET /threads/{id}``, ``GET
/threads/{id}/runs/{run_id}``, as ``server.aegra_guard`` checks a run's thread), so a
user who gets 404 for a thread cannot grade its answers, in the export or in LangSmith.

With LangSmith tracing on, each vote is also sent as LangSmith feedback on the run it
judges (``tools.feedback.langsmith_feedback``), off the request.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from run.context import Context
from server.api_caller import Caller, Refused
from server.blocking_pools import run_blocking
from server.documents_api import endpoint
from server.json_body import json_body
from server.mcp_tools import caller_credentials, own_url
from tools.feedback.langsmith_feedback import send_feedback, tracing_on
from tools.feedback.votes import Feedback, FeedbackStore, feedback_path, parse_feedback
from tools.settings import home_path

_lock = threading.Lock()
_stores: dict[Path, FeedbackStore] = {}
MAX_LIST = 500
CHECK_TIMEOUT_S = 30.0


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


async def server_status(scope: Mapping[str, Any], path: str) -> int:
    """The status of ``GET path`` on this server, asked with the caller's credentials."""
    async with httpx.AsyncClient(timeout=CHECK_TIMEOUT_S) as client:
        answer = await client.get(f"{own_url(scope)}{path}", headers=caller_credentials(scope))
    return answer.status_code


async def _check_readable(request: Request, item: Feedback) -> None:
    """``Refused`` unless the caller may read the vote's thread (and run, when named)."""
    thread = f"/threads/{quote(item.thread_id, safe='')}"
    checks = [(thread, "thread")]
    if item.run_id:
        checks.append((f"{thread}/runs/{quote(item.run_id, safe='')}", "run"))
    for path, what in checks:
        try:
            status = await server_status(request.scope, path)
        except httpx.HTTPError as exc:
            raise Refused(503, f"could not check the {what} the vote is on: {exc}") from None
        if status in (401, 403, 404):  # another user's thread is 404 to the caller
            raise Refused(
                401 if status == 401 else 404,
                f"{what} not found: a vote is taken only on an answer of a thread you can read",
            )
        if status != 200:
            raise Refused(503, f"could not check the {what} the vote is on (HTTP {status})")


async def put_feedback(request: Request, who: Caller) -> Response:
    body = await json_body(request)
    item = parse_feedback(who.identity, body)
    await _check_readable(request, item)
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
