"""The collections routes (docs/API.md): what a question can be scoped to (a run's
``scope`` context field, ``tools.access.scope``): the folders and sources of the documents
the caller may read, and the named sets of documents admins and users define.

A set is defined by anyone over documents they may read, changed or removed by its owner
or an admin, and used by anyone as a scope (which only narrows what they may read). It is
shown (its name, description and members) only to its owner, admins and callers who may
read every one of its documents: its description may tell what the others are.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from server.api_caller import Caller, Refused
from server.documents_api import NOT_FOUND, blocking, endpoint, services
from server.json_body import json_body
from tools.access.scope import doc_path, origin_of
from tools.kb.documents.collections import (
    CollectionStore,
    DocumentSet,
    collection_store,
    parse_set,
)
from tools.kb.documents.library import Library

FOLDER_DEPTH = 2  # folder levels offered by the picker


def _folders(paths: list[str]) -> list[str]:
    found: set[str] = set()
    for path in paths:
        parts = path.split("/")[:-1]
        for depth in range(1, min(len(parts), FOLDER_DEPTH) + 1):
            found.add("/".join(parts[:depth]) + "/")
    return sorted(found)


def _readable(library: Library, who: Caller) -> list[str]:
    return [d["doc_id"] for d in library.documents(who.reader)]


def _by_path(library: Library, who: Caller) -> dict[str, str]:
    """The doc_id of each name the caller may use for a document: its doc_id or its path."""
    docs = library.documents(who.reader)
    return {**{d["path"]: d["doc_id"] for d in docs}, **{d["doc_id"]: d["doc_id"] for d in docs}}


def _shown(item: DocumentSet, who: Caller, readable: frozenset[str]) -> bool:
    """Whether ``who`` may see the set at all (the module's rule)."""
    return who.may_change(item.owner) or readable.issuperset(item.doc_ids)


async def list_collections(request: Request, who: Caller) -> Response:
    library, _ = await blocking(services)
    ids = await blocking(_readable, library, who)
    visible = frozenset(ids)
    sets = await blocking(lambda: collection_store(library.kb.home).all())
    body: dict[str, Any] = {
        "folders": _folders([doc_path(d) for d in ids]),
        "sources": sorted({origin_of(d) for d in ids}),
        "sets": [
            s.view(visible) | {"can_change": who.may_change(s.owner)}
            for s in sets
            if _shown(s, who, visible)
        ],
    }
    return JSONResponse(body)


async def _change(store: CollectionStore, old: DocumentSet | None, item: DocumentSet,
                  who: Caller, body: dict[str, Any]) -> int:  # fmt: skip
    """Store ``item`` (new) or its change of ``old``; the status to answer."""
    taken = f"a set named {item.name!r} exists: choose another name"
    if old is None:
        if not await blocking(store.create, item):  # another request created it meanwhile
            raise Refused(409, taken)
        return 201
    if not who.may_change(old.owner):
        readable = frozenset(await blocking(_readable, (await blocking(services))[0], who))
        if not _shown(old, who, readable):
            raise Refused(409, taken)
        raise Refused(
            403, f"set {item.name!r} is {old.owner}'s: only they or an admin may change it"
        )
    await blocking(store.put, parse_set(old.owner, body))
    return 200


async def put_collection(request: Request, who: Caller) -> Response:
    body = await json_body(request)
    library, _ = await blocking(services)
    item = parse_set(who.identity, body)
    names = await blocking(_by_path, library, who)
    unknown = [d for d in item.doc_ids if d not in names]
    if unknown:
        raise Refused(404, f"{NOT_FOUND}: {', '.join(unknown[:5])}")
    body = {**body, "doc_ids": [names[d] for d in item.doc_ids]}
    item = parse_set(who.identity, body)
    store = await blocking(collection_store, library.kb.home)
    old = await blocking(store.get, item.name)
    status = await _change(store, old, item, who, body)
    return JSONResponse(item.view(), status_code=status)


async def delete_collection(request: Request, who: Caller) -> Response:
    library, _ = await blocking(services)
    store = await blocking(collection_store, library.kb.home)
    name = request.path_params["name"]
    old = await blocking(store.get, name)
    readable = frozenset(await blocking(_readable, library, who))
    if old is None or not _shown(old, who, readable):
        raise Refused(404, "set not found")
    if not who.may_change(old.owner):
        raise Refused(403, f"set {name!r} is {old.owner}'s: only they or an admin may remove it")
    await blocking(store.remove, name)
    return JSONResponse({"deleted": name})


def routes() -> list[BaseRoute]:
    return [
        Route("/kb/collections", endpoint(list_collections), methods=["GET"]),
        Route("/kb/collections", endpoint(put_collection), methods=["POST", "PUT"]),
        Route("/kb/collections/{name}", endpoint(delete_collection), methods=["DELETE"]),
    ]
