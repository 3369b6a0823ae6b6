"""Groups in the Admin view (docs/API.md, "Admin"): each group with its members, a member
added or removed (``tools.access.groups``: edited under the users file's lock, a group
that comes from an identity provider read-only). Admins only.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from server.admin_api import edit_users, require_admin, users_file_path
from server.api_caller import Caller, Refused
from server.documents_api import endpoint
from server.json_body import json_body
from tools.access.groups import GroupRefused, list_groups, set_member
from tools.errors import InputError


async def groups(request: Request, who: Caller) -> Response:
    require_admin(who)
    found = await edit_users(list_groups, users_file_path())
    return JSONResponse({"groups": [g.view() for g in found]})


async def _member(request: Request, who: Caller, identity: str, member: bool) -> Response:
    require_admin(who)
    name = request.path_params["name"]
    try:
        group = await edit_users(set_member, users_file_path(), name, identity, member)
    except GroupRefused as exc:
        raise Refused(409, str(exc)) from None
    return JSONResponse(group.view())


async def add(request: Request, who: Caller) -> Response:
    require_admin(who)  # before the body is read
    body = await json_body(request)
    if not isinstance(body, dict) or not isinstance(body.get("identity"), str):
        raise InputError('send a JSON object: {"identity": "<user>"}')
    return await _member(request, who, body["identity"].strip(), True)


async def remove(request: Request, who: Caller) -> Response:
    return await _member(request, who, request.path_params["identity"], False)


def routes() -> list[BaseRoute]:
    return [
        Route("/admin/groups", endpoint(groups), methods=["GET"]),
        Route("/admin/groups/{name}/members", endpoint(add), methods=["POST"]),
        Route("/admin/groups/{name}/members/{identity}", endpoint(remove), methods=["DELETE"]),
    ]
