"""What Aegra 0.6 does not check before a run, checked in front of it (ASGI middleware of
``server/aegra_app.py``'s app, which Aegra serves as its own).

* **A run on another user's thread.** ``POST /threads/{id}/runs``, ``/runs/stream`` and
  ``/runs/wait`` neither call the auth handler nor check the thread's owner, and a run's
  output is the thread's state: any user could read any thread by running on it. Here
  the thread must be one the caller can read (``GET /threads/{id}`` through the server
  itself, as the caller), else the run is refused with that answer (404 for another
  user's thread or an unknown one; 401 without a token).
* **Per-deployment and misspelt context fields.** langgraph-api's graph factories refuse
  them (``server/graphs.py``); Aegra calls factories without the run, so a caller could set
  ``data_home`` or ``chroma_host``. Runs and assistants (create, update) are checked here
  with the same ``run.context.api_context``: a 422 naming the field.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import httpx
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from run.context import api_context
from server.mcp_tools import caller_credentials, own_url
from tools.errors import ConfigError

RUN = re.compile(r"^/threads/(?P<thread>[^/]+)/runs(?:/stream|/wait)?/?$")
ASSISTANT = re.compile(r"^/assistants(?:/[^/]+)?/?$")
MAX_BODY_BYTES = 16 * 1024 * 1024  # a run's input is a question and its settings
CHECK_TIMEOUT_S = 30.0


def context_problem(body: Any) -> str | None:
    """What is wrong with a run's or an assistant's context and configurable (None: fine)."""
    if not isinstance(body, Mapping):
        return None
    config = body.get("config") if isinstance(body.get("config"), Mapping) else {}
    for values in (body.get("context"), (config or {}).get("configurable")):
        if isinstance(values, Mapping):
            try:
                api_context(values)
            except ConfigError as exc:
                return str(exc)
    return None


async def _reply(send: Send, status: int, body: bytes) -> None:
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _read(receive: Receive) -> tuple[bytes, list[Message]]:
    chunks, messages, size = [], [], 0
    while True:
        message = await receive()
        messages.append(message)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise ValueError("request body too large")
        chunks.append(chunk)
        if message["type"] != "http.request" or not message.get("more_body"):
            return b"".join(chunks), messages


async def _thread_answer(scope: Scope, thread_id: str) -> httpx.Response:
    """``GET /threads/{id}`` on this server, with the caller's credentials."""
    async with httpx.AsyncClient(timeout=CHECK_TIMEOUT_S) as client:
        return await client.get(
            f"{own_url(scope)}/threads/{thread_id}", headers=caller_credentials(scope)
        )


class RunGuard:
    """The checks above, before Aegra sees the request; the body is replayed to it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        method, path = scope.get("method", ""), scope.get("path", "")
        run = RUN.match(path) if scope["type"] == "http" and method == "POST" else None
        assistant = scope["type"] == "http" and method in ("POST", "PATCH", "PUT")
        assistant = assistant and bool(ASSISTANT.match(path)) and not path.endswith("/search")
        if not (run or assistant):
            await self.app(scope, receive, send)
            return
        try:
            body, messages = await _read(receive)
        except ValueError:
            await _reply(send, 413, b'{"detail": "request body too large"}')
            return
        try:
            parsed = json.loads(body or b"{}")
        except (ValueError, UnicodeDecodeError):
            parsed = None  # not JSON: Aegra's own validation answers
        problem = context_problem(parsed)
        if problem:
            await _reply(send, 422, json.dumps({"detail": problem}).encode())
            return
        if run:
            answer = await _thread_answer(scope, run["thread"])
            if answer.status_code != 200:
                await _reply(send, answer.status_code, answer.content)
                return
        await self.app(scope, _replay(messages, receive), send)


def _replay(messages: list[Message], receive: Receive) -> Receive:
    pending = list(messages)

    async def replayed() -> Message:
        return pending.pop(0) if pending else await receive()

    return replayed
