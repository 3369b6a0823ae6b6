"""A small fake of the document API contract (/work/wt/API-CONTRACT.md, issue 34), for the
page's browser tests while the real API is built in parallel.

It answers the page's ``/kb/...`` requests inside the browser (Playwright's request
routing) from the sample KB's real registry (the doc_ids the graphs cite) plus the files
uploaded during the test, with the contract's shapes: documents filtered by the caller's
token (public, ``user:NAME``, ``group:NAME``), uploads as jobs whose event stream walks
each file through queued → parsing → embedding → done, originals served with their
content type, deletes for the owner only. Nothing here is used by the product.
"""

from __future__ import annotations

import json
import mimetypes
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from tests.team_server import TeamServer
from tools.access.acl import may_change

STAGES = ("queued", "parsing", "embedding", "done")


@dataclass
class FakeDoc:
    doc_id: str
    path: str
    data: bytes
    acl: str  # "" public, else comma-separated principals
    owner: str
    updated_at: str

    def record(self, viewer: str) -> dict[str, Any]:
        suffix = Path(self.path).suffix.lstrip(".")
        return {"doc_id": self.doc_id, "path": self.path, "title": Path(self.path).stem,
                "format": suffix, "source": "upload" if self.owner else "folder",
                "acl": self.acl or "public", "owner": self.owner, "chunks": 1,
                "updated_at": self.updated_at, "bytes": len(self.data),
                "can_delete": may_change(viewer, False, self.owner)}  # fmt: skip


@dataclass
class FakeDocumentApi:
    team: TeamServer
    kb_root: Path
    docs: dict[str, FakeDoc] = field(default_factory=dict)
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    requests: list[tuple[str, str, str]] = field(default_factory=list)  # method, path, user
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        for doc_id, rec in self.team.documents.items():
            source = Path(str(rec["source"]))
            path = source.relative_to(self.kb_root.resolve()).as_posix()
            self.docs[doc_id] = FakeDoc(doc_id, path, source.read_bytes(), str(rec.get("acl") or ""),
                                        "", str(rec.get("ingested_at") or ""))  # fmt: skip

    # --- who -----------------------------------------------------------------------------

    def user(self, headers: dict[str, str]) -> tuple[str, tuple[str, ...]] | None:
        auth = headers.get("authorization", "")
        token = auth.partition(" ")[2].strip()
        groups = {"alice": ("hr",), "bob": ()}
        for identity, value in self.team.tokens.items():
            if value == token:
                return identity, groups.get(identity, ())
        return None

    def may_read(self, doc: FakeDoc, who: tuple[str, tuple[str, ...]]) -> bool:
        if not doc.acl:
            return True
        principals = {f"user:{who[0]}", *(f"group:{g}" for g in who[1])}
        return bool(principals & {p.strip() for p in doc.acl.split(",")})

    # --- routing -------------------------------------------------------------------------

    def handle(self, route: Any) -> None:
        request = route.request
        parts = urlsplit(request.url)
        headers = {k.lower(): v for k, v in request.headers.items()}
        who = self.user(headers)
        with self.lock:
            self.requests.append((request.method, parts.path, who[0] if who else ""))
        if who is None:
            return self.reply(route, 401, {"error": "missing or unknown bearer token"})
        status, body, ctype = self.answer(request.method, parts.path, parts.query, request, who)
        if isinstance(body, (bytes, str)):
            return route.fulfill(status=status, body=body, content_type=ctype)
        return self.reply(route, status, body)

    @staticmethod
    def reply(route: Any, status: int, body: Any) -> None:
        route.fulfill(status=status, body=json.dumps(body), content_type="application/json")

    def answer(
        self, method: str, path: str, query: str, request: Any, who: tuple[str, tuple[str, ...]]
    ) -> tuple[int, Any, str]:
        if path == "/kb/documents" and method == "GET":
            return 200, self.listing(parse_qs(query), who), ""
        if path == "/kb/uploads" and method == "POST":
            return 202, self.upload(request, who), ""
        if path == "/kb/sources" and method == "GET":
            return 200, {"sources": [{"id": "s1", "kind": "folder", "location": "examples/kb",
                                      "acl": "public", "schedule": "hourly",
                                      "last_sync": {"at": "2025-12-01T08:00:00Z", "added": 13,
                                                    "updated": 0, "removed": 0, "failed": 0,
                                                    "errors": []}}]}, ""  # fmt: skip
        m = re.fullmatch(r"/kb/jobs/([^/]+)/events", path)
        if m and method == "GET":
            return 200, self.events(m.group(1)), "text/event-stream"
        m = re.fullmatch(r"/kb/documents/([^/]+)(/original)?", path)
        if m:
            doc = self.docs.get(unquote(m.group(1)))
            if doc is None or not self.may_read(doc, who):
                return 404, {"error": "document not found"}, ""
            if m.group(2):
                ctype = mimetypes.guess_type(doc.path)[0] or "application/octet-stream"
                return 200, doc.data, ctype
            if method == "DELETE":
                if not may_change(who[0], False, doc.owner):
                    return 403, {"error": "only the document's owner or an admin may delete it"}, ""
                del self.docs[doc.doc_id]
                return 200, {"deleted": doc.doc_id}, ""
            return 200, doc.record(who[0]), ""
        return 404, {"error": f"no route {method} {path}"}, ""

    def listing(self, q: dict[str, list[str]], who: tuple[str, tuple[str, ...]]) -> dict[str, Any]:
        text = (q.get("q") or [""])[0].lower()
        prefix = (q.get("prefix") or [""])[0]
        fmt = (q.get("format") or [""])[0]
        limit, offset = int((q.get("limit") or ["50"])[0]), int((q.get("offset") or ["0"])[0])
        found = [d.record(who[0]) for d in sorted(self.docs.values(), key=lambda d: d.path)
                 if self.may_read(d, who) and d.path.startswith(prefix)
                 and (not fmt or d.path.endswith(f".{fmt}"))
                 and (not text or text in d.path.lower() or text.encode() in d.data.lower())]  # fmt: skip
        return {"documents": found[offset : offset + limit], "total": len(found),
                "limit": limit, "offset": offset}  # fmt: skip

    def upload(self, request: Any, who: tuple[str, tuple[str, ...]]) -> dict[str, Any]:
        ctype = request.headers.get("content-type", "")
        raw = f"Content-Type: {ctype}\r\n\r\n".encode() + (request.post_data_buffer or b"")
        message = BytesParser(policy=HTTP).parsebytes(raw)
        files: list[tuple[str, bytes]] = []
        acl = f"user:{who[0]}"  # no acl: the uploader's alone (as issue 34 built it)
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            raw_payload = part.get_payload(decode=True)
            payload = raw_payload if isinstance(raw_payload, bytes) else b""
            if name == "file":
                files.append((str(part.get_filename()), payload))
            elif name == "acl":
                acl = payload.decode().strip()
        job_id = uuid.uuid4().hex
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        entries = []
        for filename, data in files:
            doc = FakeDoc(uuid.uuid4().hex, f"uploads/{filename}", data,
                          "" if acl == "public" else acl, who[0], stamp)  # fmt: skip
            self.docs[doc.doc_id] = doc
            entries.append({"name": filename, "path": doc.path, "doc_id": doc.doc_id})
        self.jobs[job_id] = {"job_id": job_id, "files": entries}
        return {"job_id": job_id}

    def events(self, job_id: str) -> str:
        job = self.jobs.get(job_id, {"job_id": job_id, "files": []})
        out = []
        for n, stage in enumerate(STAGES):
            progress = n / (len(STAGES) - 1)
            state = {"queued": "queued", "done": "done"}.get(stage, "running")
            files = [{**f, "status": stage, "reason": "", "chunks": 1 if stage == "done" else 0,
                      "progress": progress} for f in job["files"]]  # fmt: skip
            body = {"job_id": job_id, "state": state, "progress": progress, "files": files}
            out.append(f"data: {json.dumps(body)}\n\n")
        return "".join(out)
