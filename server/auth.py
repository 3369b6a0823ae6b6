"""Who calls the server, and what they may touch (``langgraph.json`` → ``auth``).

**Who.** With ``HYBRID_RAG_USERS_FILE`` set (``tools.access.users``), every request must
carry a token of a user in that file: ``Authorization: Bearer <token>``, or ``x-api-key:
<token>`` (what agent-chat-ui and clients configured with an API key send). A missing or
unknown token, or a disabled user's, is a 401 saying which; a broken users file (missing,
empty, not JSON, too big, writable by others) is a 503 naming the problem, for every
request until it is fixed. The user's groups decide which documents both retrievers may
return (``run.reader`` turns it into the run's ``Reader``); ``is_admin`` is the file's
``admin`` flag. Without the variable the server is single-team, as it was before access
control existed: every caller is the local user, reads every document and is admin.

**What.** Threads, runs and crons belong to the user who created them: creating one
stamps ``metadata.owner``, every other action filters on it, so another user's thread is
"not found" (its history, state and stream included). Assistants a user creates are
theirs alone; the graphs' own assistants (``created_by: system``) can be used by all and
changed by none. Store namespaces are prefixed with the user's identity.

Studio's own sign-in (``x-auth-scheme: langsmith``) is turned off in ``langgraph.json``
(``disable_studio_auth``): under ``langgraph dev`` it accepts any request that sends the
header, which would bypass the checks above. Studio sends the bearer token instead.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from langgraph_sdk import Auth
from starlette.exceptions import HTTPException as StarletteHTTPException

from tools.access.api_keys import key_user
from tools.access.users import ALL_DOCUMENTS, USERS_FILE_ENV, UserDirectory
from tools.errors import ConfigError

LOCAL_USER = "local"  # every caller of a server without a users file
SYSTEM = {"created_by": "system"}  # the metadata of the graphs' own assistants

auth = Auth()


class UsersFileUnavailable(StarletteHTTPException, Auth.exceptions.HTTPException):
    """503 naming what is wrong with the users file. Both exception types: langgraph-api
    passes a Starlette one through as its status (its own type would become a bare 500),
    Aegra turns the SDK's into a 401 that keeps the detail."""

    def __init__(self, detail: str) -> None:
        StarletteHTTPException.__init__(self, status_code=503, detail=detail)


@cache
def _directory(path: str) -> UserDirectory:
    return UserDirectory(Path(path).expanduser())


def _header(headers: Mapping[Any, Any] | None, name: str) -> str:
    # langgraph-api passes {bytes: bytes}; Aegra {str: str}.
    for key, value in (headers or {}).items():
        key = key.decode("latin-1") if isinstance(key, bytes) else str(key)
        if key.lower() == name:
            return value.decode("latin-1") if isinstance(value, bytes) else str(value)
    return ""


def bearer_token(headers: Mapping[Any, Any] | None) -> str:
    """The caller's token: ``Authorization: Bearer <token>``, else ``x-api-key: <token>``
    (what agent-chat-ui and LangGraph clients configured with an API key send)."""
    scheme, _, token = _header(headers, "authorization").strip().partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return _header(headers, "x-api-key").strip()


def users_file() -> str:
    return os.environ.get(USERS_FILE_ENV, "").strip()


def _refuse(detail: str) -> Auth.exceptions.HTTPException:
    return Auth.exceptions.HTTPException(
        status_code=401, detail=detail, headers={"WWW-Authenticate": "Bearer"}
    )


@auth.authenticate
async def authenticate(headers: Mapping[Any, Any]) -> Auth.types.MinimalUserDict:
    """The caller, from the bearer token (the file is re-read when it changes: adding,
    disabling or rotating a user needs no restart)."""
    path = users_file()
    if not path:
        return {"identity": LOCAL_USER, "kb_access": ALL_DOCUMENTS, "is_admin": True}  # type: ignore[typeddict-unknown-key]
    try:
        token = bearer_token(headers)
        # A user's token, else one of the API keys they made (tools.access.api_keys).
        user = _directory(path).lookup(token) or key_user(_directory(path), token)
    except ConfigError as exc:  # a broken users file refuses everyone, and says why
        raise UsersFileUnavailable(f"users file unavailable: {exc}") from None
    if user is None:
        raise _refuse("missing or unknown bearer token (Authorization: Bearer <token>)")
    if user.disabled:
        raise _refuse(f"user {user.identity!r} is disabled (hybrid-rag users enable)")
    return {  # type: ignore[typeddict-unknown-key]
        "identity": user.identity,
        "groups": list(user.groups),
        "kb_access": "acl",
        "is_admin": user.admin,
    }


WRITES = ("create", "create_run", "update")  # actions whose metadata the caller writes


def _stamp_owner(value: Any, identity: str) -> None:
    """Ownership is the server's: the caller's identity as ``owner``, and no
    ``created_by`` (which would share the object with everyone, as the graphs' own
    assistants are). ``server/request_guard.py`` refuses both from clients as well."""
    # In place: the server stores the metadata object it passed in, not ``value``'s key.
    metadata = value.get("metadata") if isinstance(value, dict) else None
    if isinstance(metadata, dict):
        metadata.pop("created_by", None)
        metadata["owner"] = identity
    elif isinstance(value, dict):
        value["metadata"] = {"owner": identity}


@auth.on
async def owned(ctx: Auth.types.AuthContext, value: Any) -> Auth.types.FilterType:
    """Threads, runs, crons: the creator's own (a run without a thread creates one)."""
    if ctx.action in WRITES:
        _stamp_owner(value, ctx.user.identity)
    return {"owner": ctx.user.identity}


@auth.on.assistants
async def assistants(ctx: Auth.types.AuthContext, value: Any) -> Auth.types.FilterType:
    """A user's assistants are theirs; the graphs' own ones are shared, read-only."""
    identity = ctx.user.identity
    if ctx.action in WRITES:
        _stamp_owner(value, identity)
    if ctx.action in ("read", "search"):
        if "aegra_api.main" in sys.modules:  # served by Aegra (uvicorn aegra_api.main:app)
            # Aegra scopes assistants to their creator and "system" itself, and its search
            # fails on any filter a handler returns (aegra-api 0.6: no such attribute).
            return None  # type: ignore[return-value]
        # $or is served by langgraph-api's filters, though the SDK's FilterType omits it.
        return {"$or": [{"owner": identity}, SYSTEM]}  # type: ignore[return-value]
    return {"owner": identity}


@auth.on.store
async def store(ctx: Auth.types.AuthContext, value: Any) -> None:
    """Each user's items under their own namespace prefix."""
    namespace = tuple(value.get("namespace") or ())
    if not namespace or namespace[0] != ctx.user.identity:
        value["namespace"] = (ctx.user.identity, *namespace)
