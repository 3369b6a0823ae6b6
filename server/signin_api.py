"""The browser's sign-in routes (docs/API.md, "Signing in"): each ends in a session
cookie (``server/credentials.py``), never in a credential the page keeps.

* ``POST /auth/token`` ``{"token"}``: a users-file token exchanged for a session (the page's
  "use a token instead"; the token is not kept).
* ``POST /auth/login`` ``{"identity", "password"}``: a password (``tools.access.passwords``).
  Failures are limited per identity and per address (``FAILURES_*``; 429 with
  ``Retry-After``); a wrong password, an unknown user, a user without a password and a
  disabled one all get the same 401, after the same work.
* ``POST /auth/logout``: ends the session (in the sessions file, not just the cookie).
* ``GET /auth/methods``: which sign-ins this server offers, for the page.
* ``GET /auth/oidc/login`` and ``/auth/oidc/callback``: single sign-on (``server/oidc.py``).
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from server import oidc
from server.api_caller import Refused
from server.api_errors import error_answer
from server.auth import users_file
from server.credentials import (
    SESSION_COOKIE,
    clear_session,
    cookie,
    directory,
    is_https,
    sessions,
    start_session,
)
from server.json_body import json_body
from server.web_headers import API_HEADERS, add_missing
from tools.access.login_limits import FailureLimiter
from tools.access.passwords import verify_login
from tools.errors import InputError

FAILURES_PER_IDENTITY = 5  # wrong passwords for one name within FAILURE_WINDOW_S
FAILURES_PER_ADDRESS = 20  # for one client address: guessing across many names
FAILURE_WINDOW_S = 300.0
WRONG = "wrong identity or password"
_by_identity = FailureLimiter(FAILURES_PER_IDENTITY, FAILURE_WINDOW_S)
_by_address = FailureLimiter(FAILURES_PER_ADDRESS, FAILURE_WINDOW_S)


def _users_path() -> str:
    path = users_file()
    if not path:
        raise Refused(409, "this server has no users file: every caller is signed in already")
    return path


def _address(request: Request) -> str:
    return request.client.host if request.client else "unknown"


def _limited(keys: list[tuple[FailureLimiter, str]]) -> None:
    wait = max(limiter.retry_after(key) for limiter, key in keys)
    if wait > 0:
        raise Refused(429, f"too many failed sign-ins: try again in {math.ceil(wait)} seconds")


async def _strings(request: Request, *names: str) -> list[str]:
    body = await json_body(request)
    values = [body.get(n) if isinstance(body, dict) else None for n in names]
    if not all(isinstance(v, str) and v for v in values):
        fields = ", ".join(f'"{n}"' for n in names)
        raise InputError(f"send a JSON object with {fields} (strings)")
    return [str(v) for v in values]


async def token_signin(request: Request) -> Response:
    path = _users_path()
    address = [(_by_address, _address(request))]
    _limited(address)
    (token,) = await _strings(request, "token")
    user = await asyncio.to_thread(directory(path).authenticate, token.strip())
    if user is None:
        _by_address.failed(_address(request))
        raise Refused(401, "unknown token, or a disabled user's")
    return await asyncio.to_thread(start_session, request, user)


async def password_signin(request: Request) -> Response:
    path = _users_path()
    identity, password = await _strings(request, "identity", "password")
    identity = identity.strip()
    keys = [(_by_identity, identity), (_by_address, _address(request))]
    _limited(keys)
    user = await asyncio.to_thread(directory(path).named, identity)
    if not await asyncio.to_thread(verify_login, user, password):
        for limiter, key in keys:
            limiter.failed(key)
        raise Refused(401, WRONG)
    _by_identity.succeeded(identity)
    assert user is not None  # verify_login is false without one
    return await asyncio.to_thread(start_session, request, user)


async def logout(request: Request) -> Response:
    session_id = cookie(request.headers, SESSION_COOKIE)
    if session_id:
        await asyncio.to_thread(lambda: sessions().end(session_id))
    response = JSONResponse({"signed_out": True})
    clear_session(response, is_https(request.headers, request.url.scheme))
    return response


async def methods(request: Request) -> Response:
    users = bool(users_file())
    return JSONResponse({"users_file": users, "password": users, "token": users,
                         "oidc": users and oidc.oidc_configured()})  # fmt: skip


def guarded(handler: Any) -> Any:
    """``handler``'s answer, errors as ``{"error"}``, with the API's headers."""

    async def run(request: Request) -> Response:
        try:
            response: Response = await handler(request)
        except Exception as exc:  # every answer is {"error": ...}, without server paths
            response = error_answer(exc)
            if isinstance(exc, Refused) and exc.status == 429:
                response.headers["Retry-After"] = str(int(FAILURE_WINDOW_S))
        add_missing(response.headers, API_HEADERS)
        return response

    return run


def routes() -> list[BaseRoute]:
    return [
        Route("/auth/token", guarded(token_signin), methods=["POST"]),
        Route("/auth/login", guarded(password_signin), methods=["POST"]),
        Route("/auth/logout", guarded(logout), methods=["POST"]),
        Route("/auth/methods", guarded(methods), methods=["GET"]),
        *oidc.routes(guarded),
    ]
