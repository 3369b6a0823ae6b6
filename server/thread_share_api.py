"""Conversations shared read-only (docs/API.md, "Sharing a conversation").

The owner shares a thread with named users or groups (``PUT /kb/threads/{id}/share``):
the server reads the thread as the caller (``GET /threads/{id}/state`` on itself, so only
its owner can: the graphs' owner filter), and keeps the list and a copy of its questions,
answers and citations in ``tools.access.thread_shares``. A permitted reader reads that copy
(``GET /kb/shared/{id}``), each citation of a document they may not read withheld; the
thread itself stays its owner's alone (its state, runs and metadata).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from run.context import Context
from server.api_caller import Caller, Refused
from server.document_access_api import identities
from server.documents_api import blocking, endpoint, services
from server.json_body import json_body
from server.mcp_tools import caller_credentials, own_url
from tools.access.acl import ACL, parse_acl
from tools.access.thread_shares import (
    SharedThread,
    ThreadShares,
    may_read_thread,
    now,
    visible_turns,
)
from tools.answer.sources_block import without_sources
from tools.errors import InputError
from tools.settings import home_path

READ_TIMEOUT_S = 30.0
THREAD_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,99}$")  # a path segment, never ".."
MAX_TITLE = 120
NOT_FOUND = "conversation not found"
_lock = threading.Lock()
_stores: dict[Path, ThreadShares] = {}


def store() -> ThreadShares:
    home = home_path(Context().data_home or None)
    with _lock:
        if home not in _stores:
            _stores[home] = ThreadShares(home)
        return _stores[home]


async def _store() -> ThreadShares:
    return await blocking(store)  # its first use creates the file: off the event loop


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = [b if isinstance(b, str) else b.get("text", "") for b in content
             if isinstance(b, str) or (isinstance(b, dict) and b.get("type") == "text")]  # fmt: skip
    return "\n".join(str(p) for p in parts)


def turns_of(values: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each question and the answer after it, as the page shows a thread: the answer
    without its sources block (titles and paths; the citations say it, withheld where
    due), its citations those of its message, or the state's for the last one."""
    messages = [m for m in values.get("messages") or [] if isinstance(m, dict)]
    answers = [i for i, m in enumerate(messages)
               if m.get("type") == "ai" and not m.get("tool_calls") and _text(m.get("content"))]  # fmt: skip
    turns: list[dict[str, Any]] = []
    question = ""
    for i, m in enumerate(messages):
        if m.get("type") == "human":
            question = _text(m.get("content"))
        elif i in answers:
            kept = (m.get("additional_kwargs") or {}).get("citations")
            last = values.get("citations") if i == answers[-1] else []
            turns.append({"question": question, "answer": without_sources(_text(m.get("content"))),
                          "citations": list(kept or last or [])})  # fmt: skip
    return turns


async def _thread_values(request: Request, thread_id: str) -> Mapping[str, Any]:
    """The thread's state values, read as the caller: 404 unless it is theirs."""
    if not THREAD_ID.match(thread_id):
        raise Refused(404, NOT_FOUND)
    url = f"{own_url(request.scope)}/threads/{thread_id}/state"
    try:
        async with httpx.AsyncClient(timeout=READ_TIMEOUT_S) as client:
            answer = await client.get(url, headers=caller_credentials(request.scope))
    except httpx.HTTPError as exc:
        raise Refused(503, f"could not read the conversation: {exc}") from None
    if answer.status_code != 200:
        raise Refused(404, NOT_FOUND)
    values = answer.json().get("values")
    return values if isinstance(values, dict) else {}


def _principals(who: Caller, raw: Any) -> ACL:
    if isinstance(raw, list) and all(isinstance(p, str) for p in raw):
        raw = ",".join(raw)
    if not isinstance(raw, str):
        raise InputError('send {"with": ["user:NAME", "group:NAME", ...]} ([] to stop sharing)')
    if not raw.strip():
        return ()
    acl = parse_acl(raw, where="with")
    if not acl:
        raise InputError("with: a conversation is shared with named users or groups, not 'public'")
    return acl


async def share(request: Request, who: Caller) -> Response:
    thread_id = request.path_params["thread_id"]
    body = await json_body(request)
    acl = _principals(who, body.get("with") if isinstance(body, dict) else None)
    problem = who.may_grant(acl, await blocking(identities)) if acl else ""
    if problem:
        raise Refused(403, problem)
    shares = await _store()
    if not acl:  # its owner stops sharing, even once the thread itself is gone
        found = await blocking(shares.get, thread_id)
        if found is None or found.owner != who.identity:
            await _thread_values(request, thread_id)  # 404 unless the thread is theirs
        await blocking(shares.remove, thread_id)
        return JSONResponse({"thread_id": thread_id, "with": []})
    values = await _thread_values(request, thread_id)  # the owner's only
    turns = turns_of(values)
    title = next((t["question"] for t in turns if t["question"]), "")[:MAX_TITLE]
    shared = SharedThread(thread_id, who.identity, acl, title, turns, now())
    await blocking(shares.put, shared)
    return JSONResponse({"thread_id": thread_id, "with": list(acl), "turns": len(turns)})


async def sharing(request: Request, who: Caller) -> Response:
    """The owner's list for a thread ([] when not shared)."""
    thread_id = request.path_params["thread_id"]
    found = await blocking((await _store()).get, thread_id)
    mine = found is not None and found.owner == who.identity
    return JSONResponse({"thread_id": thread_id, "with": list(found.principals) if mine else []})


async def shared_list(request: Request, who: Caller) -> Response:
    found = await blocking((await _store()).shared_with, who.identity, who.principals)
    return JSONResponse({"threads": [s.summary() for s in found]})


async def shared_thread(request: Request, who: Caller) -> Response:
    found = await blocking((await _store()).get, request.path_params["thread_id"])
    if found is None or not may_read_thread(who.identity, who.principals, found):
        raise Refused(404, NOT_FOUND)
    library, _ = await blocking(services)

    def readable(doc_id: str) -> bool:
        return library.document(doc_id, who.reader) is not None

    turns = await blocking(visible_turns, found.turns, readable)
    return JSONResponse({**found.summary(), "turns": turns})


def routes() -> list[BaseRoute]:
    return [
        Route("/kb/threads/{thread_id}/share", endpoint(share), methods=["PUT"]),
        Route("/kb/threads/{thread_id}/share", endpoint(sharing), methods=["GET"]),
        Route("/kb/shared", endpoint(shared_list), methods=["GET"]),
        Route("/kb/shared/{thread_id}", endpoint(shared_thread), methods=["GET"]),
    ]
