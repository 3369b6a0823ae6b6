"""What a client may set, checked in front of both servers (ASGI middleware of the custom
app: ``server/webapp.py`` under ``langgraph dev``, ``server/aegra_app.py`` under Aegra).

* **Identity and access are the server's.** A run's identity travels in its config
  (``configurable.langgraph_auth_user``, ``run/reader.py``), and Aegra 0.6 fills it only
  when the client left it out: a client that sent ``null`` read every document. Deny by
  default: in a run's, cron's or assistant's ``config.configurable`` and ``context`` a
  client may set the fields of ``run.context.Context`` (per-deployment ones refused, as
  ``api_context`` does) and the checkpoint keys, nothing else; in ``checkpoint`` (which
  both servers merge into ``configurable``) only checkpoint keys, of the same thread.
  Anything else is a 422 naming the key.
* **Ownership is the server's.** ``metadata.owner`` and ``metadata.created_by`` (what the
  access filters of ``server/auth.py`` read) are refused in what a client creates or
  updates: a thread or assistant could otherwise be handed to, or shown to, another user.
* **A run on another user's thread** (Aegra only, ``check_threads``): its run routes
  neither call the auth handler nor check the thread's owner, and a run's output is the
  thread's state. The thread must be one the caller can read (``GET /threads/{id}``
  through the server itself, as the caller), else the run is refused with that answer
  (404 for another user's thread or an unknown one; 401 without a token).
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from typing import Any

import httpx
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from run.api_context import DEPLOYMENT_FIELDS, PER_RUN_FIELDS, api_context
from server.mcp_tools import caller_credentials, own_url
from tools.errors import ConfigError

RUN = re.compile(r"^/threads/(?P<thread>[^/]+)/runs(?:/stream|/wait)?/?$")
GUARDED = re.compile(r"^/(?:threads|runs|assistants)(?:/|$)")
READS = re.compile(r"/(?:search|count|history)/?$")  # bodies that filter, not write
THREAD = re.compile(r"^/threads/(?P<thread>[^/]+)")
CHECKPOINT_KEYS = frozenset({"checkpoint_id", "checkpoint_ns", "checkpoint_map"})
CLIENT_KEYS = PER_RUN_FIELDS | DEPLOYMENT_FIELDS | CHECKPOINT_KEYS
CONFIG_KEYS = frozenset({"configurable", "recursion_limit", "tags"})
SERVER_METADATA = ("owner", "created_by")  # server/auth.py's filters read these
MAX_BODY_BYTES = 16 * 1024 * 1024  # a run's input is a question and its settings
CHECK_TIMEOUT_S = 30.0


def _unknown_keys(values: Mapping[str, Any], allowed: frozenset[str], where: str) -> str | None:
    refused = sorted(str(k) for k in values if k not in allowed)
    if not refused:
        return None
    key = refused[0]
    close = difflib.get_close_matches(key, sorted(allowed), n=1, cutoff=0.85)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return (
        f"{where}.{key} may not be set by a client{hint}: identity and access are set by "
        "the server; a run may set the fields of the graph's context schema only"
    )


def _settings_problem(item: Mapping[str, Any], thread: str | None) -> str | None:
    config = item.get("config")
    if config is not None and not isinstance(config, Mapping):
        return "config must be an object"
    config = config or {}
    for where, values, allowed in (
        ("config", config, CONFIG_KEYS),
        ("config.configurable", config.get("configurable"), CLIENT_KEYS),
        ("context", item.get("context"), CLIENT_KEYS),
        ("checkpoint", item.get("checkpoint"), CHECKPOINT_KEYS | {"thread_id"}),
    ):
        if values is None:
            continue
        if not isinstance(values, Mapping):
            return f"{where} must be an object"
        problem = _unknown_keys(values, allowed, where)
        if problem:
            return problem
        if where == "checkpoint" and values.get("thread_id") not in (None, thread):
            return "checkpoint.thread_id must be the thread the run is on"
        if where in ("config.configurable", "context"):
            try:
                api_context({k: v for k, v in values.items() if k not in CHECKPOINT_KEYS})
            except ConfigError as exc:
                return str(exc)
    return None


def _metadata_problem(item: Mapping[str, Any]) -> str | None:
    metadata = item.get("metadata")
    if isinstance(metadata, Mapping):
        for key in SERVER_METADATA:
            if key in metadata:
                return f"metadata.{key} is set by the server, not by a client"
    return None


def client_problem(body: Any, path: str) -> str | None:
    """What a client may not send in this body (None: fine); a batch is checked item by
    item. ``path`` decides whether metadata is written (not a search filter) and which
    thread a checkpoint must belong to."""
    thread = match["thread"] if (match := THREAD.match(path)) else None
    writes = not READS.search(path)
    for item in body if isinstance(body, list) else [body]:
        if not isinstance(item, Mapping):
            continue
        problem = _settings_problem(item, thread) or (_metadata_problem(item) if writes else None)
        if problem:
            return problem
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


class RequestGuard:
    """The checks above, before the server sees the request; the body is replayed to it."""

    def __init__(self, app: ASGIApp, check_threads: bool = False) -> None:
        self.app = app
        self.check_threads = check_threads

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        method, path = scope.get("method", ""), scope.get("path", "")
        writes = scope["type"] == "http" and method in ("POST", "PATCH", "PUT")
        if not (writes and GUARDED.match(path)):
            await self.app(scope, receive, send)
            return
        try:
            body, messages = await _read(receive)
        except ValueError:
            limit = f"request body over {MAX_BODY_BYTES // (1024 * 1024)} MB"
            await _reply(send, 413, json.dumps({"detail": limit, "error": limit}).encode())
            return
        try:
            parsed = json.loads(body or b"{}")
        except (ValueError, UnicodeDecodeError):
            parsed = None  # not JSON: the server's own validation answers
        problem = client_problem(parsed, path)
        if problem:
            await _reply(send, 422, json.dumps({"detail": problem, "error": problem}).encode())
            return
        run = RUN.match(path) if method == "POST" else None
        if run and self.check_threads:
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
