"""Who calls the server, and what they may touch (``langgraph.json`` → ``auth``).

**Who.** With ``HYBRID_RAG_USERS_FILE`` set (``tools.access.users``), every request must
carry ``Authorization: Bearer <token>`` (or ``x-api-key: <token>``) of a user in that file; a missing or unknown token
is a 401. The user's groups decide which documents both retrievers may return
(``nodes.access`` turns it into the run's ``Reader``). Without the variable the server is single-team, as it was before
access control existed: every caller is the local user and reads every document.

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
from functools import cache
from pathlib import Path
from typing import Any

from langgraph_sdk import Auth

from tools.access.users import ALL_DOCUMENTS, USERS_FILE_ENV, UserDirectory
from tools.errors import ConfigError

LOCAL_USER = "local"  # every caller of a server without a users file
SYSTEM = {"created_by": "system"}  # the metadata of the graphs' own assistants

auth = Auth()


@cache
def _directory(path: str) -> UserDirectory:
    return UserDirectory(Path(path).expanduser())


def _bearer(authorization: str | None, headers: dict[bytes, bytes] | None = None) -> str:
    """The bearer token, else the ``x-api-key`` header (what agent-chat-ui and the
    LangGraph SDK's ``api_key`` send)."""
    scheme, _, token = (authorization or "").strip().partition(" ")
    if scheme.lower() == "bearer":
        return token.strip()
    key = (headers or {}).get(b"x-api-key", b"")
    return key.decode("latin-1").strip() if isinstance(key, bytes) else str(key).strip()


@auth.authenticate
async def authenticate(
    authorization: str | None, headers: dict[bytes, bytes] | None = None
) -> Auth.types.MinimalUserDict:
    """The caller, from the bearer token or ``x-api-key`` (read per request: no restart to
    add a user)."""
    path = os.environ.get(USERS_FILE_ENV, "").strip()
    if not path:
        return {"identity": LOCAL_USER, "kb_access": ALL_DOCUMENTS}  # type: ignore[typeddict-unknown-key]
    try:
        user = _directory(path).authenticate(_bearer(authorization, headers))
    except ConfigError as exc:  # a broken users file refuses everyone, and says why
        raise Auth.exceptions.HTTPException(status_code=503, detail=str(exc)) from None
    if user is None:
        raise Auth.exceptions.HTTPException(
            status_code=401,
            detail="missing or unknown bearer token (Authorization: Bearer <token>)",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return {  # type: ignore[typeddict-unknown-key]
        "identity": user.identity,
        "groups": list(user.groups),
        "kb_access": "acl",
    }


def _stamp_owner(value: Any, identity: str) -> None:
    # In place: the server stores the metadata object it passed in, not ``value``'s key.
    metadata = value.get("metadata") if isinstance(value, dict) else None
    if isinstance(metadata, dict):
        metadata["owner"] = identity
    elif isinstance(value, dict):
        value["metadata"] = {"owner": identity}


@auth.on
async def owned(ctx: Auth.types.AuthContext, value: Any) -> Auth.types.FilterType:
    """Threads, runs, crons: the creator's own (a run without a thread creates one)."""
    if ctx.action in ("create", "create_run"):
        _stamp_owner(value, ctx.user.identity)
    return {"owner": ctx.user.identity}


@auth.on.assistants
async def assistants(ctx: Auth.types.AuthContext, value: Any) -> Auth.types.FilterType:
    """A user's assistants are theirs; the graphs' own ones are shared, read-only."""
    identity = ctx.user.identity
    if ctx.action == "create":
        _stamp_owner(value, identity)
    if ctx.action in ("read", "search"):
        # $or is served by langgraph-api's filters, though the SDK's FilterType omits it.
        return {"$or": [{"owner": identity}, SYSTEM]}  # type: ignore[return-value]
    return {"owner": identity}


@auth.on.store
async def store(ctx: Auth.types.AuthContext, value: Any) -> None:
    """Each user's items under their own namespace prefix."""
    namespace = tuple(value.get("namespace") or ())
    if not namespace or namespace[0] != ctx.user.identity:
        value["namespace"] = (ctx.user.identity, *namespace)
