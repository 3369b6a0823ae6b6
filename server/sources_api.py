"""The sources routes of the document API (docs/API.md): admins only, since a source
reads the server's folders and buckets with the server's own credentials.

A sync asked over HTTP is a job like an upload (``GET /kb/jobs/{id}``, its event stream):
its files are the entries that changed, each with its status, and it runs in the same
queue as the uploads (``tools.kb.documents.jobs.JobRunner``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from server.api_caller import Caller, Refused
from server.documents_api import blocking, endpoint, services, writing
from server.json_body import json_body
from tools.access.acl import parse_acl
from tools.errors import HybridRagError, InputError
from tools.kb.documents.catalog import Job, JobFile
from tools.kb.documents.library import Library, catalog_path
from tools.sources.model import Source, SourceStore
from tools.sources.sync import remove_documents, sync

_stores: dict[Path, SourceStore] = {}


def _store(library: Library) -> SourceStore:
    path = catalog_path(library.kb.home, library.kb.config.collection)
    if path not in _stores:
        _stores[path] = SourceStore(path)
    return _stores[path]


def _admin(who: Caller) -> None:
    if not who.admin:
        raise Refused(403, "only an admin may manage sources")


async def _source(request: Request) -> tuple[Library, SourceStore, Source]:
    library, _ = await blocking(services)
    store = await blocking(_store, library)
    source = await blocking(store.get, request.path_params["source_id"])
    if source is None:
        raise Refused(404, "source not found")
    return library, store, source


async def list_sources(request: Request, who: Caller) -> Response:
    _admin(who)
    library, _ = await blocking(services)
    sources = await blocking(lambda: _store(library).all())
    return JSONResponse({"sources": [s.view() for s in sources]})


def _new_source(body: Any) -> Source:
    if not isinstance(body, dict):
        raise InputError('send a JSON object: {"id", "kind", "location", "acl", "schedule"}')
    missing = [k for k in ("id", "kind", "location") if not isinstance(body.get(k), str)]
    if missing:
        raise InputError(f"missing or not a string: {', '.join(missing)}")
    options = body.get("options") or {}
    if not isinstance(options, dict) or not all(isinstance(v, str) for v in options.values()):
        raise InputError("options must be an object of strings (s3: endpoint_url, region)")
    location = body["location"]
    if body["kind"] == "folder" and not (Path(location).is_absolute() and Path(location).is_dir()):
        raise InputError(f"folder {location!r} is not an absolute path of a server folder")
    acl = parse_acl(str(body.get("acl") or "public"), where="acl")
    schedule = str(body.get("schedule") or "")
    return Source(body["id"], body["kind"], location, acl, schedule, dict(options))


async def add_source(request: Request, who: Caller) -> Response:
    _admin(who)
    body = await json_body(request)
    source = await blocking(_new_source, body)  # it looks at the server's folder
    library, _ = await blocking(services)
    await blocking(lambda: _store(library).add(source))
    return JSONResponse(source.view(), status_code=201)


async def get_source(request: Request, who: Caller) -> Response:
    _admin(who)
    return JSONResponse((await _source(request))[2].view())


async def delete_source(request: Request, who: Caller) -> Response:
    _admin(who)
    library, store, source = await _source(request)
    removed = await writing(remove_documents, library, source)
    await blocking(store.remove, source.id)
    return JSONResponse({"deleted": source.id, "documents_removed": removed})


def _run_sync(library: Library, store: SourceStore, source: Source, job: Job) -> None:
    catalog = library.catalog
    job.state = "running"
    catalog.save_job(job)

    def on_item(name: str, doc_id: str, status: str, reason: str, chunks: int) -> None:
        shown = {"added": "done", "updated": "done", "removed": "done"}.get(status, status)
        job.files.append(JobFile(name, name, doc_id, shown, reason or status, chunks, 1.0))
        catalog.save_job(job)

    try:
        result = sync(library, source, on_item=on_item)
    except HybridRagError as exc:
        job.state, job.error = "failed", str(exc)
    else:
        store.record(source.id, result)
        job.state = "done" if result.finished else "failed"
        job.error = "; ".join(result.errors[:3]) if not result.finished else ""
    catalog.save_job(job)


async def sync_source(request: Request, who: Caller) -> Response:
    _admin(who)
    library, store, source = await _source(request)
    _, runner = await blocking(services)
    # No files yet: they are the entries the sync changes, added as it goes.
    job = await blocking(library.catalog.new_job, "sync", who.identity, [])
    runner.call(lambda: _run_sync(library, store, source, job))
    return JSONResponse({"job_id": job.job_id}, status_code=202)


def routes() -> list[BaseRoute]:
    return [
        Route("/kb/sources", endpoint(list_sources), methods=["GET"]),
        Route("/kb/sources", endpoint(add_source), methods=["POST"]),
        Route("/kb/sources/{source_id}", endpoint(get_source), methods=["GET"]),
        Route("/kb/sources/{source_id}", endpoint(delete_source), methods=["DELETE"]),
        Route("/kb/sources/{source_id}/sync", endpoint(sync_source), methods=["POST"]),
    ]
