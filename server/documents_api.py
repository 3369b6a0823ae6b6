"""The document API: /kb routes of the server (docs/API.md is the contract).

Thin HTTP over ``tools.kb.documents.library`` / ``tools.kb.documents.jobs``: each handler identifies the
caller (``server.api_caller``), runs the blocking work off the event loop and answers JSON.
A document the caller may not read is 404 "document not found", whatever the route.
The knowledge base is the graphs' own instance (``run.resources.get_kb``), so a run
sees an upload's commit at once.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import (
    FileResponse,
    HTMLResponse,
    JSONResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import BaseRoute, Route

from run.context import Context
from run.resources import get_kb
from run.run_settings import resolve_run_settings
from server.api_caller import Caller, Refused, caller
from server.api_errors import error, error_answer
from server.blocking_pools import run_blocking
from server.upload_stream import Receiver, receive
from server.web_headers import API_HEADERS, add_missing
from tools.access.acl import ACL, parse_acl
from tools.errors import InputError
from tools.kb.documents.catalog import TERMINAL_JOB
from tools.kb.documents.jobs import JobRunner, Upload, owned_by_others, plan, resume_unfinished
from tools.kb.documents.library import Library, Original
from tools.kb.documents.originals import serving
from tools.kb.documents.preview import PREVIEW_SUFFIXES, preview_html
from tools.kb.ingest.formats import LoadError, LoadLimits

MAX_PAGE = 500
EVENTS_POLL_S = 0.3
EVENTS_MAX_S = 3600.0  # an event stream ends after an hour; the client reconnects
NOT_FOUND = "document not found"
Handler = Callable[[Request, Caller], Awaitable[Response]]

_lock = threading.Lock()
_services: dict[str, tuple[Library, JobRunner]] = {}


def services() -> tuple[Library, JobRunner]:
    """The library and job runner of the server's knowledge base (opened on first use;
    files a killed server was writing are then removed, and jobs a stopped server left
    unfinished are finished, or reported interrupted)."""
    ctx = Context()
    kb = get_kb(ctx, resolve_run_settings(ctx), create=True)
    key = f"{kb.home}|{kb.config.collection}"
    with _lock:
        if key not in _services:
            library = Library(kb)
            runner = JobRunner(library)
            library.originals.sweep()  # what a killed server was writing
            resume_unfinished(library, runner)
            runner.watch()  # leases: a replica takes over a dead server's jobs
            _services[key] = (library, runner)
        return _services[key]


def endpoint(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """Authenticate, run ``handler``, and turn the project's errors into JSON; every
    answer carries the API's security headers (``server.web_headers``)."""

    async def run(request: Request) -> Response:
        response = await answer(request)
        add_missing(response.headers, API_HEADERS)
        return response

    async def answer(request: Request) -> Response:
        try:
            who = await run_blocking("callers", caller, request)  # it may re-read the users file
            return await handler(request, who)
        except Exception as exc:  # every answer is {"error": ...}, without server paths
            return error_answer(exc)
        finally:
            receiver = getattr(request.state, "upload_receiver", None)
            if receiver is not None:
                await blocking(receiver.discard)

    return run


async def blocking(fn: Callable[..., Any], *args: Any) -> Any:
    """Blocking work of a /kb route, on the document API's own threads."""
    return await run_blocking("kb", fn, *args)


async def writing(fn: Callable[..., Any], *args: Any) -> Any:
    """Blocking work that may wait on the writer's lock, on threads of its own: waiting
    deletions never hold the threads every other route needs (``server.blocking_pools``)."""
    return await run_blocking("writes", fn, *args)


# -- uploads and jobs ------------------------------------------------------------------


async def _uploads(request: Request, limits: LoadLimits) -> tuple[list[Upload], dict[str, str]]:
    """The request's file parts, streamed to disk as they arrive within the size limits
    (``server.upload_stream``), and its text fields. What is not stored as an original by
    the end of the request is removed then (``endpoint``)."""
    library, _ = await blocking(services)
    receiver = Receiver(limits, library.originals)
    request.state.upload_receiver = receiver
    await receive(request, limits, receiver)
    if not receiver.uploads:
        raise InputError("no file: send one or more multipart parts named 'file'")
    return receiver.uploads, receiver.fields


def _acl(who: Caller, text: str | None) -> ACL:
    if text is None or not text.strip():
        # A user's upload is theirs until they share it; an admin's (or a server
        # without users) is public, as a CLI ingest is.
        return () if who.admin else (f"user:{who.identity}",)
    acl = parse_acl(text, where="acl")
    problem = who.may_grant(acl)
    if problem:
        raise Refused(403, problem)
    return acl


async def upload(request: Request, who: Caller) -> Response:
    limits = LoadLimits.from_env()
    uploads, fields = await _uploads(request, limits)
    acl = _acl(who, fields.get("acl"))
    folder = fields.get("folder", "")
    library, runner = await blocking(services)
    taken = await blocking(owned_by_others, library, uploads, folder, who.may_change)
    if taken:  # nothing stored, nothing changed: the PUT rule
        raise Refused(403, f"{', '.join(taken)}: a document of that name belongs to someone "
                      "else; only its owner or an admin may replace it (choose another name "
                      "or folder)")  # fmt: skip
    files, items = await blocking(
        lambda: plan(library, uploads, owner=who.identity, acl=acl, folder=folder, limits=limits)
    )
    job = await blocking(library.catalog.new_job, "upload", who.identity, files)
    if job.state not in TERMINAL_JOB:
        runner.submit(job, items)
    return JSONResponse({"job_id": job.job_id}, status_code=202)


async def _job_view(request: Request, who: Caller) -> dict[str, Any]:
    library, _ = await blocking(services)
    try:
        job = await blocking(library.catalog.job, request.path_params["job_id"])
    except InputError:
        raise Refused(404, "job not found") from None
    if not who.may_change(job.owner):
        raise Refused(404, "job not found")
    return job.view()


async def job_status(request: Request, who: Caller) -> Response:
    return JSONResponse(await _job_view(request, who))


async def job_events(request: Request, who: Caller) -> Response:
    """The job's views as Server-Sent Events until it ends; the caller is checked again
    at each step, and a refused one gets an ``error`` event (its reason) and the end."""
    first = await _job_view(request, who)  # 404 before the stream starts

    async def stream() -> AsyncIterator[str]:
        view, last, started = first, "", time.monotonic()
        while time.monotonic() - started < EVENTS_MAX_S:
            text = json.dumps(view)
            if text != last:
                yield f"data: {text}\n\n"
                last = text
            if view["state"] in TERMINAL_JOB or await request.is_disconnected():
                return
            await asyncio.sleep(EVENTS_POLL_S)
            try:  # the caller again at each step: a rotated token or a disabled user ends it
                view = await _job_view(request, await run_blocking("callers", caller, request))
            except Refused as exc:
                yield f"event: error\ndata: {json.dumps({'error': exc.message, 'status': exc.status})}\n\n"
                return

    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)


# -- documents -------------------------------------------------------------------------


def _int(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    try:
        value = default if raw is None else int(raw)
    except ValueError:
        raise InputError(f"{name} must be a whole number, got {raw!r}") from None
    if not low <= value <= high:
        raise InputError(f"{name} must be in {low}..{high}, got {value}")
    return value


async def list_documents(request: Request, who: Caller) -> Response:
    limit = _int(request, "limit", 50, 1, MAX_PAGE)
    offset = _int(request, "offset", 0, 0, 10**9)
    q = request.query_params
    library, _ = await blocking(services)
    docs = await blocking(library.documents, who.reader)
    prefix, fmt, source, text = (q.get(k, "") for k in ("prefix", "format", "source", "q"))
    docs = [
        d
        for d in docs
        if d["path"].startswith(prefix)
        and (not fmt or d["format"] == fmt.lower().lstrip("."))
        and (not source or d["source"] == source)
        and (not text or text.lower() in f"{d['path']} {d['title']}".lower())
    ]
    page = [_with_rights(d, who) for d in docs[offset : offset + limit]]
    return JSONResponse({"documents": page, "total": len(docs), "limit": limit, "offset": offset})


def _with_rights(doc: dict[str, Any], who: Caller) -> dict[str, Any]:
    """The document as the caller sees it, with whether they may delete it (the rule the
    DELETE route applies, so the page shows the button only where it would work)."""
    return {**doc, "can_delete": who.may_change(doc["owner"])}


async def _readable(request: Request, who: Caller) -> tuple[Library, str, dict[str, Any]]:
    library, _ = await blocking(services)
    doc_id = request.path_params["doc_id"]
    doc = await blocking(library.document, doc_id, who.reader)
    if doc is None:
        raise Refused(404, NOT_FOUND)
    return library, doc_id, doc


async def get_document(request: Request, who: Caller) -> Response:
    return JSONResponse(_with_rights((await _readable(request, who))[2], who))


async def document_chunks(request: Request, who: Caller) -> Response:
    library, doc_id, _ = await _readable(request, who)
    chunks = await blocking(library.chunks, doc_id, who.reader)
    return JSONResponse({"chunks": chunks or []})


async def document_original(request: Request, who: Caller) -> Response:
    library, doc_id, _ = await _readable(request, who)
    found = await blocking(library.original, doc_id, who.reader)
    if found is None or found.problem:
        return error(404, found.problem if found else NOT_FOUND)
    media_type, disposition = serving(found.name)
    if found.path is None:  # the checked bytes of a CLI-ingested file: never its path again
        quoted = quote(found.name)
        headers = {"Content-Disposition": f"{disposition}; filename*=utf-8''{quoted}"}
        return Response(found.data, media_type=media_type, headers=headers)
    return FileResponse(
        found.path, media_type=media_type, filename=found.name, content_disposition_type=disposition
    )


async def document_preview(request: Request, who: Caller) -> Response:
    """A Word or Excel original as an escaped HTML fragment (text and tables only:
    ``tools.kb.documents.preview``), under the /kb headers (``default-src 'none'; sandbox``)."""
    library, doc_id, _ = await _readable(request, who)
    found: Original | None = await blocking(library.original, doc_id, who.reader)
    if found is None or found.problem:
        return error(404, found.problem if found else NOT_FOUND)
    if PurePosixPath(found.name).suffix.lower() not in PREVIEW_SUFFIXES:
        return error(415, "a preview is made of Word (.docx) and Excel (.xlsx) files only")
    original = found.path if found.path is not None else (found.data or b"")
    try:
        fragment = await blocking(preview_html, found.name, original, LoadLimits.from_env())
    except LoadError as exc:
        return error(422, f"no preview of this file: {exc}")
    return HTMLResponse(fragment)


async def replace_document(request: Request, who: Caller) -> Response:
    library, doc_id, doc = await _readable(request, who)
    if not who.may_change(doc["owner"]):
        return error(403, "only the document's owner or an admin may replace it")
    limits = LoadLimits.from_env()
    uploads, _ = await _uploads(request, limits)
    if len(uploads) != 1:
        raise InputError("send exactly one 'file' part to replace a document")
    acl = parse_acl(doc["acl"], where="the document's acl")
    folder = doc["path"].rpartition("/")[0]
    files, items = await blocking(
        lambda: plan(
            library,
            uploads,
            owner=doc["owner"] or who.identity,
            acl=acl,
            folder=folder,
            doc_ids=[doc_id],
            limits=limits,
        )
    )
    _, runner = await blocking(services)
    job = await blocking(library.catalog.new_job, "replace", who.identity, files)
    if job.state not in TERMINAL_JOB:
        runner.submit(job, items)
    return JSONResponse({"job_id": job.job_id}, status_code=202)


async def delete_document(request: Request, who: Caller) -> Response:
    library, doc_id, doc = await _readable(request, who)
    if not who.may_change(doc["owner"]):
        return error(403, "only the document's owner or an admin may delete it")
    await writing(library.delete, doc_id)
    return JSONResponse({"deleted": doc_id})


async def me(request: Request, who: Caller) -> Response:
    """Who the caller is, so the page offers only what the server would allow (an admin's
    views; nothing asked that would be refused)."""
    return JSONResponse({"identity": who.identity, "admin": who.admin})


async def stats(request: Request, who: Caller) -> Response:
    library, _ = await blocking(services)
    return JSONResponse(await blocking(library.stats, who.reader))


def routes() -> list[BaseRoute]:
    return [
        Route("/kb/uploads", endpoint(upload), methods=["POST"]),
        Route("/kb/jobs/{job_id}", endpoint(job_status), methods=["GET"]),
        Route("/kb/jobs/{job_id}/events", endpoint(job_events), methods=["GET"]),
        Route("/kb/documents", endpoint(list_documents), methods=["GET"]),
        Route("/kb/documents/{doc_id:path}/chunks", endpoint(document_chunks), methods=["GET"]),
        Route("/kb/documents/{doc_id:path}/original", endpoint(document_original), methods=["GET"]),
        Route("/kb/documents/{doc_id:path}/preview", endpoint(document_preview), methods=["GET"]),
        Route("/kb/documents/{doc_id:path}", endpoint(get_document), methods=["GET"]),
        Route("/kb/documents/{doc_id:path}", endpoint(replace_document), methods=["PUT"]),
        Route("/kb/documents/{doc_id:path}", endpoint(delete_document), methods=["DELETE"]),
        Route("/kb/stats", endpoint(stats), methods=["GET"]),
        Route("/kb/me", endpoint(me), methods=["GET"]),
    ]
