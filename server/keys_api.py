"""API keys over HTTP (docs/API.md, "API keys"): each user lists, makes and revokes their
own (``/auth/keys``); an admin lists everyone's (``/admin/keys``) and revokes any. The
functions are ``tools.access.api_keys``; a key is answered once, by the request that made
it, and listed only by its prefix.
"""

from __future__ import annotations

import time

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from server.admin_api import edit_users, require_admin, users_file_path
from server.api_caller import Caller, Refused
from server.documents_api import endpoint
from server.json_body import json_body
from tools.access.api_keys import (
    KeyNotFound,
    check_days,
    check_name,
    create_key,
    list_keys,
    revoke_key,
)
from tools.errors import InputError


async def mine(request: Request, who: Caller) -> Response:
    found = await edit_users(list_keys, users_file_path(), who.identity)
    now = time.time()
    return JSONResponse({"keys": [k.view(now) for k in found]})


async def everyone(request: Request, who: Caller) -> Response:
    require_admin(who)
    found = await edit_users(list_keys, users_file_path())
    now = time.time()
    return JSONResponse({"keys": [k.view(now) for k in found]})


async def make(request: Request, who: Caller) -> Response:
    body = await json_body(request)
    if not isinstance(body, dict):
        raise InputError('send a JSON object: {"name", "expires_days"}')
    name, days = check_name(body.get("name")), check_days(body.get("expires_days"))
    path = users_file_path()
    key, secret = await edit_users(create_key, path, who.identity, name, days)
    return JSONResponse({**key.view(time.time()), "key": secret}, status_code=201)


async def revoke(request: Request, who: Caller) -> Response:
    key_id = request.path_params["key_id"]
    try:
        key = await edit_users(revoke_key, users_file_path(), key_id, who.identity, who.admin)
    except KeyNotFound as exc:
        raise Refused(404, str(exc)) from None
    return JSONResponse({"deleted": key.key_id, "identity": key.identity})


def routes() -> list[BaseRoute]:
    return [
        Route("/auth/keys", endpoint(mine), methods=["GET"]),
        Route("/auth/keys", endpoint(make), methods=["POST"]),
        Route("/auth/keys/{key_id}", endpoint(revoke), methods=["DELETE"]),
        Route("/admin/keys", endpoint(everyone), methods=["GET"]),
    ]
