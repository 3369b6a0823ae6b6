"""Issue 55 items 5 and 6 without a server: a document shared with a named colleague
(listed, revoked, in both retrievers at once; never public from a non-admin), and groups
managed in the Admin routes (an identity provider's read-only)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

from server import document_access_api, documents_api
from server.webapp import routes
from tests.fakes import hash_model
from tools.access.acl import Reader
from tools.access.users import add_user
from tools.kb.documents.jobs import JobRunner, Upload, plan, run_job
from tools.kb.documents.library import Library
from tools.kb.knowledge_base import KBConfig, KnowledgeBase

FACT = "The quarterly bonus pool code is HERON-42."
DOC = "upload:plans/bonus.md"


@pytest.fixture
def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, Library, dict]]:
    users = tmp_path / "users.json"
    tokens = {n: add_user(users, n, g, admin=n == "root") for n, g in
              (("alice", ["hr"]), ("bob", []), ("carol", ["ops"]), ("root", []))}  # fmt: skip
    monkeypatch.setenv("HYBRID_RAG_USERS_FILE", str(users))
    headers = {u: {"Authorization": f"Bearer {t}"} for u, t in tokens.items()}
    with KnowledgeBase(KBConfig(home=tmp_path / "home"), embedding_model=hash_model()) as kb:
        library = Library(kb)
        runner = JobRunner(library, workers=1)
        for module in (documents_api, document_access_api):
            monkeypatch.setattr(module, "services", lambda: (library, runner))
        with TestClient(Starlette(routes=routes())) as client:
            yield client, library, headers
        runner.close()
        library.close()


def upload(client: TestClient, who: dict[str, str], acl: str = "") -> None:
    files = [("file", ("bonus.md", f"# Bonus\n\n{FACT}\n".encode()))]
    job = client.post("/kb/uploads", headers=who, data={"folder": "plans", "acl": acl}, files=files)
    assert job.status_code == 202, job.text
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # bounded
        state = client.get(f"/kb/jobs/{job.json()['job_id']}", headers=who).json()["state"]
        if state in ("done", "failed"):
            assert state == "done"
            return
        time.sleep(0.1)
    raise AssertionError("upload not finished in 60 s")


def found(library: Library, reader: Reader) -> dict[str, bool]:
    """Whether each retriever alone finds the fact for ``reader``."""
    kb = library.kb
    return {
        mode: any(h.doc_id == DOC for h in kb.pipeline.search("bonus pool code", mode=mode, reader=reader))
        for mode in ("bm25", "vector")
    }  # fmt: skip


def access(doc_id: str, tail: str = "") -> str:
    return f"/kb/documents/{quote(doc_id, safe='')}/access{tail}"


def test_the_owner_shares_a_document_with_a_named_colleague_and_revokes_it(api: tuple) -> None:
    client, library, h = api
    upload(client, h["alice"])  # alice's alone
    bob = Reader.of("bob")
    assert client.get(access(DOC), headers=h["bob"]).status_code == 404
    assert found(library, bob) == {"bm25": False, "vector": False}
    shared = client.post(access(DOC), headers=h["alice"], json={"principal": "user:bob"})
    assert shared.status_code == 200, shared.text
    assert shared.json()["acl"] == ["user:alice", "user:bob"] and not shared.json()["public"]
    assert found(library, bob) == {"bm25": True, "vector": True}  # both, at once
    listed = client.get(access(DOC), headers=h["bob"]).json()
    assert listed["acl"] == ["user:alice", "user:bob"] and listed["can_change"] is False
    assert client.get(f"/kb/documents/{quote(DOC, safe='')}", headers=h["bob"]).status_code == 200
    # bob may read it but not change who else does
    assert (
        client.post(access(DOC), headers=h["bob"], json={"principal": "user:carol"}).status_code
        == 403
    )
    gone = client.delete(access(DOC, "/user:bob"), headers=h["alice"])
    assert gone.status_code == 200 and gone.json()["acl"] == ["user:alice"]
    assert found(library, bob) == {"bm25": False, "vector": False}
    assert client.get(access(DOC), headers=h["bob"]).status_code == 404


def test_a_non_admin_never_makes_a_document_public_nor_reaches_a_foreign_group(api: tuple) -> None:
    client, library, h = api
    upload(client, h["alice"])
    for principal, word in (("public", "admin"), ("group:ops", "group:ops"), ("user:nobody", "no such user"),
                            ("root", "user:NAME")):  # fmt: skip
        reply = client.post(access(DOC), headers=h["alice"], json={"principal": principal})
        assert reply.status_code in (400, 403) and word in reply.json()["error"], (
            principal,
            reply.text,
        )
    assert (
        client.post(access(DOC), headers=h["alice"], json={"principal": "group:hr"}).status_code
        == 200
    )
    last = client.delete(access(DOC, "/user:alice"), headers=h["alice"])
    assert last.status_code == 200 and last.json()["acl"] == ["group:hr"]
    empty = client.delete(access(DOC, "/group:hr"), headers=h["alice"])
    assert empty.status_code == 400 and "public" in empty.json()["error"]
    made = client.post(access(DOC), headers=h["root"], json={"principal": "public"})
    assert made.json()["public"] is True and found(library, Reader.of("carol"))["bm25"]
    # an upload may name a colleague too (the README's "listed groups or users")
    upload_reply = client.post("/kb/uploads", headers=h["bob"], data={"acl": "user:bob,user:carol"},
                               files=[("file", ("x.md", b"# x\n\nhi"))])  # fmt: skip
    assert upload_reply.status_code == 202


def test_groups_are_listed_with_members_and_edited_by_an_admin(api: tuple, tmp_path: Path) -> None:
    client, _, h = api
    listed = client.get("/admin/groups", headers=h["root"]).json()["groups"]
    assert [(g["name"], g["members"], g["read_only"]) for g in listed] == [
        ("hr", ["alice"], False), ("ops", ["carol"], False)]  # fmt: skip
    added = client.post("/admin/groups/hr/members", headers=h["root"], json={"identity": "bob"})
    assert added.json()["members"] == ["alice", "bob"]
    assert client.get("/kb/me", headers=h["bob"]).status_code == 200
    new = client.post("/admin/groups/legal/members", headers=h["root"], json={"identity": "bob"})
    assert new.json() == {
        "name": "legal",
        "members": ["bob"],
        "source": "local",
        "read_only": False,
    }
    gone = client.delete("/admin/groups/hr/members/alice", headers=h["root"])
    assert gone.json()["members"] == ["bob"]
    assert client.delete("/admin/groups/hr/members/alice", headers=h["root"]).status_code == 409
    unknown = client.post("/admin/groups/hr/members", headers=h["root"], json={"identity": "zed"})
    assert unknown.status_code == 409 and "no user 'zed'" in unknown.json()["error"]
    assert client.get("/admin/groups", headers=h["bob"]).status_code == 403
    assert (
        client.post(
            "/admin/groups/hr/members", headers=h["bob"], json={"identity": "bob"}
        ).status_code
        == 403
    )


def test_a_group_from_an_identity_provider_is_read_only(api: tuple, tmp_path: Path) -> None:
    client, _, h = api
    users = tmp_path / "users.json"
    data = json.loads(users.read_text())
    for entry in data["users"]:
        if entry["identity"] == "carol":
            entry["source"] = "oidc"  # signed in through SSO: groups from the provider
    users.write_text(json.dumps(data))
    ops = next(
        g
        for g in client.get("/admin/groups", headers=h["root"]).json()["groups"]
        if g["name"] == "ops"
    )
    assert ops["source"] == "oidc" and ops["read_only"] is True
    for reply in (client.post("/admin/groups/ops/members", headers=h["root"], json={"identity": "bob"}),
                  client.delete("/admin/groups/ops/members/carol", headers=h["root"]),
                  client.post("/admin/groups/hr/members", headers=h["root"], json={"identity": "carol"})):  # fmt: skip
        assert reply.status_code == 409 and "oidc" in reply.json()["error"]


def test_a_replacement_waiting_in_the_queue_keeps_a_revocation(api: tuple) -> None:
    client, library, h = api
    upload(client, h["alice"])
    client.post(access(DOC), headers=h["alice"], json={"principal": "user:bob"})
    new = Upload("bonus.md", b"# Bonus\n\nThe quarterly bonus pool code is now HERON-43.\n")
    files, items = plan(library, [new], owner="alice", acl=("user:alice", "user:bob"),
                        folder="plans", doc_ids=[DOC])  # fmt: skip
    job = library.catalog.new_job("replace", "alice", files)  # as PUT queues it
    client.delete(access(DOC, "/user:bob"), headers=h["alice"])  # revoked while it waits
    run_job(library, job, items)
    assert library.catalog.job(job.job_id).state == "done"
    assert library.document(DOC, Reader.of("alice")) is not None
    assert library.document(DOC, Reader.of("bob")) is None
    assert found(library, Reader.of("bob")) == {"bm25": False, "vector": False}
