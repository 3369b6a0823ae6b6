"""The admin routes (docs/API.md): who the caller is (``/admin/me``, for everyone), and for
admins only the users of the users file and the knowledge base's jobs. The users are
edited by the same functions as ``hybrid-rag users`` (``tools.access.users_file``), each a
read-modify-write under the file's edit lock, so parallel requests (and the CLI) lose
nothing; a token is answered once, by the request that made it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from server.api_caller import Caller, Refused
from server.blocking_pools import run_blocking
from server.documents_api import blocking, endpoint, services
from server.json_body import json_body
from tools.access.passwords import set_password
from tools.access.users import USERS_FILE_ENV, UserExists, add_user
from tools.access.users_file import list_users, remove_user, rotate_token, set_disabled
from tools.errors import ConfigError, InputError

MAX_JOBS = 100
T = TypeVar("T")


def require_admin(who: Caller) -> None:
    if not who.admin:
        raise Refused(403, "only an admin may do this")


def users_file_path() -> Path:
    path = os.environ.get(USERS_FILE_ENV, "").strip()
    if not path:
        raise Refused(
            409, f"this server has no users file (${USERS_FILE_ENV}): every caller is admin"
        )
    return Path(path).expanduser()


async def edit_users(change: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run an edit of the users file off the event loop; a broken file or a lock held
    too long is a 503 naming it (not "knowledge base unavailable")."""
    try:
        return await run_blocking("admin", lambda: change(*args, **kwargs))
    except UserExists as exc:
        raise Refused(409, str(exc)) from None
    except ConfigError as exc:
        raise Refused(503, f"users file unavailable: {exc}") from None


async def me(request: Request, who: Caller) -> Response:
    users = bool(os.environ.get(USERS_FILE_ENV, "").strip())
    return JSONResponse({"identity": who.identity, "admin": who.admin, "users_file": users})


async def users(request: Request, who: Caller) -> Response:
    require_admin(who)
    found = await run_blocking("admin", list_users, users_file_path())
    return JSONResponse({"users": [
        {"identity": u.identity, "groups": list(u.groups), "admin": u.admin, "disabled": u.disabled,
         "password": bool(u.password), "sso": u.sso}
        for u in found
    ]})  # fmt: skip


def _groups(value: Any) -> list[str]:
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, list) or not all(isinstance(g, str) for g in value):
        raise InputError("groups must be a list of names, or one comma-separated string")
    return sorted({g.strip() for g in value if g.strip()})


async def add(request: Request, who: Caller) -> Response:
    require_admin(who)
    body = await json_body(request)
    if not isinstance(body, dict) or not isinstance(body.get("identity"), str):
        raise InputError('send a JSON object: {"identity", "groups", "admin"}')
    identity = body["identity"].strip()
    groups = _groups(body.get("groups") or [])
    admin = body.get("admin") is True  # the check that it is new is made under the lock
    token = await edit_users(
        add_user, users_file_path(), identity, groups, admin=admin, replace=False
    )
    return JSONResponse({"identity": identity, "groups": groups, "token": token}, status_code=201)


def _target(request: Request, who: Caller, verb: str) -> str:
    identity = request.path_params["identity"]
    if identity == who.identity and verb in ("disable", "remove"):
        raise Refused(409, f"you cannot {verb} yourself: ask another admin")
    return identity


async def change(request: Request, who: Caller) -> Response:
    require_admin(who)
    verb = request.path_params["action"]
    identity = _target(request, who, verb)
    path = users_file_path()
    if verb == "rotate":
        token = await edit_users(rotate_token, path, identity)
        return JSONResponse({"identity": identity, "token": token})
    if verb not in ("disable", "enable"):
        raise Refused(404, f"no action {verb!r}: disable, enable or rotate")
    await edit_users(set_disabled, path, identity, verb == "disable")
    return JSONResponse({"identity": identity, "disabled": verb == "disable"})


async def password(request: Request, who: Caller) -> Response:
    """Set or reset a user's password (their browser sessions end: their stamp changes)."""
    require_admin(who)
    identity = request.path_params["identity"]
    body = await json_body(request)
    if not isinstance(body, dict) or not isinstance(body.get("password"), str):
        raise InputError('send a JSON object: {"password"}')
    await edit_users(set_password, users_file_path(), identity, body["password"])
    return JSONResponse({"identity": identity, "password": True})


async def remove(request: Request, who: Caller) -> Response:
    require_admin(who)
    identity = _target(request, who, "remove")
    await edit_users(remove_user, users_file_path(), identity)
    return JSONResponse({"deleted": identity})


async def jobs(request: Request, who: Caller) -> Response:
    require_admin(who)
    library, _ = await blocking(services)
    found = await blocking(library.catalog.recent_jobs, MAX_JOBS)
    return JSONResponse({"jobs": [
        {**job.view(), "owner": job.owner, "created": created} for job, created in found
    ]})  # fmt: skip


def routes() -> list[BaseRoute]:
    return [
        Route("/admin/me", endpoint(me), methods=["GET"]),
        Route("/admin/users", endpoint(users), methods=["GET"]),
        Route("/admin/users", endpoint(add), methods=["POST"]),
        Route("/admin/users/{identity}", endpoint(remove), methods=["DELETE"]),
        Route("/admin/users/{identity}/password", endpoint(password), methods=["POST"]),
        Route("/admin/users/{identity}/{action}", endpoint(change), methods=["POST"]),
        Route("/admin/jobs", endpoint(jobs), methods=["GET"]),
    ]
