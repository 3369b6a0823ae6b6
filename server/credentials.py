"""The caller's credential, read the same way by the graphs' auth handler
(``server/auth.py``) and the custom routes (``server/api_caller.py``), on both servers.

* ``Authorization: Bearer <token>`` or ``x-api-key: <token>``: a token of the users file,
  or an API key a user made (``tools.access.api_keys``; the SDK, MCP clients,
  agent-chat-ui). When one is sent, it alone decides.
* Otherwise the browser's session cookie (``SESSION_COOKIE``, HttpOnly, made by the
  sign-in routes of ``server/signin_api.py``), looked up in the sessions file of the data
  home (``tools.access.sessions``). A session whose user was disabled, removed, or given a
  new token or password since is refused at its next request.

**CSRF.** A browser sends the cookie with any request, even one another site makes it
send. So a request authenticated by the cookie that changes anything (POST, PUT, PATCH,
DELETE, on the custom routes and the graphs' API alike) must echo ``x-csrf-token``: the
value of the readable ``CSRF_COOKIE``, which is derived from the session id (one-way) and
which another site can neither read nor compute (``CsrfGuard``, else 403).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from tools.access.api_keys import key_user
from tools.access.sessions import SessionStore, limits_from_env
from tools.access.users import User, UserDirectory
from tools.settings import data_home

SESSION_COOKIE = "hybrid_rag_session"
CSRF_COOKIE = "hybrid_rag_csrf"
CSRF_HEADER = "x-csrf-token"
SESSIONS_FILE = "sessions.sqlite3"  # in the data home, shared by the processes using it
CHANGES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# These authenticate by what their body carries, not by the cookie (a sign-in from a tab
# whose old session cookie is still there must work).
NO_CSRF = frozenset({"/auth/login", "/auth/token"})
Headers = Mapping[Any, Any] | Iterable[tuple[Any, Any]]


def header(headers: Headers | None, name: str) -> str:
    """One header's value ("" when absent). langgraph-api passes {bytes: bytes}, Aegra
    {str: str}, an ASGI scope a list of byte pairs."""
    pairs = headers.items() if isinstance(headers, Mapping) else (headers or ())
    for key, value in pairs:
        key = key.decode("latin-1") if isinstance(key, bytes) else str(key)
        if key.lower() == name:
            return value.decode("latin-1") if isinstance(value, bytes) else str(value)
    return ""


def bearer_token(headers: Headers | None) -> str:
    """The caller's token: ``Authorization: Bearer <token>``, else ``x-api-key: <token>``
    (what agent-chat-ui and LangGraph clients configured with an API key send)."""
    scheme, _, token = header(headers, "authorization").strip().partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return header(headers, "x-api-key").strip()


def cookie(headers: Headers | None, name: str) -> str:
    for part in header(headers, "cookie").split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value.strip().strip('"')
    return ""


def csrf_token(session_id: str) -> str:
    """The CSRF token of a session: derived from its id, so no store is needed, and
    one-way, so the readable cookie does not give the session away."""
    return hashlib.sha256(f"hybrid-rag csrf\0{session_id}".encode()).hexdigest()


@cache
def directory(path: str) -> UserDirectory:
    return UserDirectory(Path(path).expanduser())


@cache
def _store(path: str, idle_s: float, absolute_s: float) -> SessionStore:
    return SessionStore(Path(path), idle_s, absolute_s)


def sessions() -> SessionStore:
    """The sessions file of this server's data home (``ConfigError`` for bad limits)."""
    idle_s, absolute_s = limits_from_env()
    return _store(str(data_home() / SESSIONS_FILE), idle_s, absolute_s)


def resolve(users: UserDirectory, headers: Headers | None) -> User | None:
    """The user the request's credential names (a disabled one too, for the caller to
    refuse saying so), or None: a token when one is sent, else the session cookie."""
    token = bearer_token(headers)
    if token:  # a user's token, else one of the API keys they made
        return users.lookup(token) or key_user(users, token)
    session_id = cookie(headers, SESSION_COOKIE)
    if not session_id:
        return None
    store = sessions()
    session = store.get(session_id)
    if session is None:
        return None
    user = users.named(session.identity)
    if user is None or user.stamp != session.stamp:  # removed, new token or password
        store.end(session_id)
        return None
    if user.disabled:  # re-enabling does not bring the session back
        store.end(session_id)
    return user


def is_https(headers: Headers | None, scheme: str) -> bool:
    forwarded = header(headers, "x-forwarded-proto").split(",")[0].strip().lower()
    return (forwarded or scheme) == "https"


def set_session(response: Response, session_id: str, secure: bool, max_age: float) -> None:
    """The session cookie (HttpOnly) and its CSRF token (readable by the page's script)."""
    common: dict[str, Any] = {"max_age": int(max_age), "path": "/", "secure": secure}
    response.set_cookie(SESSION_COOKIE, session_id, httponly=True, samesite="lax", **common)
    response.set_cookie(CSRF_COOKIE, csrf_token(session_id), samesite="lax", **common)


def start_session(request: Request, user: User) -> Response:
    """The answer that signs ``user`` in: the session and CSRF cookies, and who they are."""
    store = sessions()
    previous = cookie(request.headers, SESSION_COOKIE)
    if previous:  # a sign-in always makes a new session id (no fixation), and ends the old
        store.end(previous)
    session_id = store.create(user.identity, user.stamp)
    response = JSONResponse({"identity": user.identity, "admin": user.admin})
    secure = is_https(request.headers, request.url.scheme)
    set_session(response, session_id, secure, store.absolute_s)
    return response


def clear_session(response: Response, secure: bool) -> None:
    for name in (SESSION_COOKIE, CSRF_COOKIE):
        response.delete_cookie(name, path="/", secure=secure, samesite="lax")


def csrf_problem(method: str, path: str, headers: Headers | None) -> str | None:
    """Why this request may not change anything (a cookie without its CSRF token), or None."""
    if method not in CHANGES or path in NO_CSRF or bearer_token(headers):
        return None
    session_id = cookie(headers, SESSION_COOKIE)
    if not session_id:
        return None
    sent = header(headers, CSRF_HEADER)
    if sent and hmac.compare_digest(sent.encode(), csrf_token(session_id).encode()):
        return None
    return (
        f"a request signed in by the session cookie must send the {CSRF_HEADER} header "
        f"(the value of the {CSRF_COOKIE} cookie) to change anything"
    )


class CsrfGuard:
    """ASGI middleware: refuses (403) a cookie-authenticated change without its token."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            problem = csrf_problem(scope.get("method", ""), scope.get("path", ""), scope["headers"])
            if problem:
                body = json.dumps({"error": problem, "detail": problem}).encode()
                headers = [(b"content-type", b"application/json")]
                await send({"type": "http.response.start", "status": 403, "headers": headers})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)
