"""Who may read a document, changed by its owner (docs/API.md, "Sharing a document"):
``/kb/documents/{doc_id}/access`` lists the access list, adds a principal (a named
colleague ``user:bob``, or a group the caller is in) and removes one. The rules are
``tools.access.acl``'s: ``may_change`` (its owner or an admin) and ``grant_refusal`` (what
a caller may give: never ``public`` but for an admin). The change is the library's
``set_acl``: one commit, seen by both retrievers at the next search.
"""

from __future__ import annotations

import os
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from server.api_caller import Caller, Refused
from server.documents_api import NOT_FOUND, blocking, endpoint, services
from server.json_body import json_body
from tools.access.acl import ACL, PUBLIC, parse_acl
from tools.access.users import USERS_FILE_ENV
from tools.access.users_file import list_users, require_file
from tools.errors import InputError


def _view(doc: dict[str, Any], who: Caller) -> dict[str, Any]:
    acl = "" if doc["acl"] == PUBLIC else doc["acl"]
    return {
        "doc_id": doc["doc_id"],
        "acl": [p for p in acl.split(",") if p],
        "public": not acl,
        "owner": doc["owner"],
        "can_change": who.may_change(doc["owner"]),
    }


async def _document(request: Request, who: Caller) -> dict[str, Any]:
    library, _ = await blocking(services)
    doc = await blocking(library.document, request.path_params["doc_id"], who.reader)
    if doc is None:
        raise Refused(404, NOT_FOUND)
    return dict(doc)


async def access(request: Request, who: Caller) -> Response:
    return JSONResponse(_view(await _document(request, who), who))


def identities() -> set[str] | None:
    """The server's users, to name a mistyped colleague (None: no users file)."""
    path = os.environ.get(USERS_FILE_ENV, "").strip()
    return {u.identity for u in list_users(require_file(path))} if path else None


async def _change(request: Request, who: Caller, doc: dict[str, Any], acl: ACL) -> Response:
    if not who.may_change(doc["owner"]):
        raise Refused(403, "only the document's owner or an admin may change who reads it")
    library, _ = await blocking(services)
    outcome = await blocking(library.set_acl, doc["doc_id"], acl)
    if outcome.status != "done":
        raise InputError(f"the access list was not changed: {outcome.reason}")
    changed = await blocking(library.document, doc["doc_id"], who.reader)
    if changed is None:  # the caller shared it away from themselves: it is no longer theirs to see
        return JSONResponse({"doc_id": doc["doc_id"], "acl": list(acl), "public": not acl,
                             "owner": doc["owner"], "can_change": False})  # fmt: skip
    return JSONResponse(_view(dict(changed), who))


async def grant(request: Request, who: Caller) -> Response:
    doc = await _document(request, who)
    body = await json_body(request)
    if not isinstance(body, dict) or not isinstance(body.get("principal"), str):
        raise InputError('send a JSON object: {"principal": "user:NAME" or "group:NAME"}')
    added = parse_acl(body["principal"], where="principal")
    problem = who.may_grant(added, await blocking(identities))
    if problem:
        raise Refused(403, problem)
    # "public" (an admin's only: grant_refusal) replaces the list; a principal joins it.
    acl = tuple(sorted({*_view(doc, who)["acl"], *added})) if added else ()
    return await _change(request, who, doc, acl)


async def revoke(request: Request, who: Caller) -> Response:
    doc = await _document(request, who)
    gone = request.path_params["principal"]
    current = _view(doc, who)["acl"]
    if gone not in current:
        raise Refused(404, f"{gone} is not on this document's access list")
    left = tuple(p for p in current if p != gone)
    if not left:  # an empty list is public: never by removing the last reader
        raise InputError(f"{gone} is the last principal: an empty access list would make the "
                         "document public; add another first")  # fmt: skip
    return await _change(request, who, doc, left)


def routes() -> list[BaseRoute]:
    """Before the document routes: ``{doc_id:path}`` would take ``/access`` too."""
    path = "/kb/documents/{doc_id:path}/access"
    return [
        Route(path, endpoint(access), methods=["GET"]),
        Route(path, endpoint(grant), methods=["POST"]),
        Route(path + "/{principal}", endpoint(revoke), methods=["DELETE"]),
    ]
