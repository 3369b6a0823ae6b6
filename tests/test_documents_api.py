"""The document API through a real ``langgraph dev`` and an HTTP client (docs/API.md).

Two users: Alice (group hr) uploads a PDF and a Word file for ``group:hr`` with a corrupt
PDF in the same request; the corrupt one fails alone with its reason, the job goes from
queued/running to done with chunk counts (JSON and the event stream). Bob (not in hr)
gets "document not found" for the list, the metadata, the chunks and the original, and
neither graph answers him from them. Deleting the document removes it from both
retrievers and from Alice's answers at once.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from tests.docgen import write_docx, write_pdf
from tests.langgraph_server import (
    LocalServer,
    agent_graph_available,
    serving,
)
from tools.access.users import add_user

PAY_FACT = "The salary band review code for HR is ZEBRA-17."
LEAVE_FACT = "Parental leave for HR staff lasts twenty-two weeks."
ASK_PAY = "What is the salary band review code for HR?"
PDF_ID = "upload:hr/pay.pdf"
DOCX_ID = "upload:hr/leave.docx"
JOB_DEADLINE_S = 120.0


def make_admin(users: Path, identity: str) -> None:
    data = json.loads(users.read_text())
    for entry in data["users"]:
        if entry["identity"] == identity:
            entry["admin"] = True
    users.write_text(json.dumps(data))


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[LocalServer, dict[str, str]]]:
    base = tmp_path_factory.mktemp("docapi")
    users = base / "users.json"
    tokens = {name: add_user(users, name, groups) for name, groups in
              (("alice", ["hr"]), ("bob", []), ("carol", ["ops"]), ("dave", ["hr"]))}  # fmt: skip
    make_admin(users, "carol")
    home = base / "home"
    home.mkdir()
    env = {"HYBRID_RAG_USERS_FILE": str(users)}
    with serving(home, base / "langgraph-dev.log", env) as srv:
        yield srv, tokens


def http(served: tuple[LocalServer, dict[str, str]], user: str | None) -> httpx.Client:
    srv, tokens = served
    headers = {"Authorization": f"Bearer {tokens[user]}"} if user else {}
    return httpx.Client(base_url=srv.url, headers=headers, timeout=60)


def doc_url(doc_id: str, tail: str = "") -> str:
    return f"/kb/documents/{quote(doc_id, safe='')}{tail}"


def wait_job(client: httpx.Client, job_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + JOB_DEADLINE_S
    while time.monotonic() < deadline:
        job = client.get(f"/kb/jobs/{job_id}").json()
        if job["state"] in ("done", "failed", "interrupted"):
            return job
        time.sleep(0.3)
    raise AssertionError(f"job {job_id} not finished in {JOB_DEADLINE_S} s")


def ask(served: tuple[LocalServer, dict[str, str]], user: str, graph: str, question: str) -> str:
    """The final state of a run as ``user`` (JSON text)."""
    with http(served, user) as c:
        r = c.post(
            "/runs/wait",
            json={"assistant_id": graph, "input": {"question": question}},
            timeout=180,
        )
    assert r.status_code == 200, r.text
    return r.text


@pytest.fixture(scope="module")
def uploaded(
    served: tuple[LocalServer, dict[str, str]], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    files = tmp_path_factory.mktemp("files")
    pdf = write_pdf(files / "pay.pdf", [[("h1", "Pay review"), ("p", PAY_FACT)],
                                        [("h1", "Appeals"), ("p", "Appeals go to the HR director.")]])  # fmt: skip
    docx = write_docx(files / "leave.docx", [("h1", "Leave"), ("p", LEAVE_FACT)])
    with http(served, "alice") as c:
        r = c.post(
            "/kb/uploads",
            data={"acl": "group:hr", "folder": "hr"},
            files=[
                ("file", ("pay.pdf", pdf.read_bytes(), "application/pdf")),
                ("file", ("leave.docx", docx.read_bytes(), "application/octet-stream")),
                ("file", ("broken.pdf", b"%PDF-1.7\nnot really a pdf", "application/pdf")),
            ],
        )
        assert r.status_code == 202, r.text
        job_id = r.json()["job_id"]
        first = c.get(f"/kb/jobs/{job_id}").json()
        with c.stream("GET", f"/kb/jobs/{job_id}/events") as stream:
            assert stream.headers["content-type"].startswith("text/event-stream")
            events = [
                json.loads(line[len("data: ") :])
                for line in stream.iter_lines()
                if line.startswith("data: ")
            ]
        final = wait_job(c, job_id)
    return {"first": first, "events": events, "final": final, "pdf": pdf.read_bytes()}


def test_the_job_goes_from_queued_to_done_with_chunk_counts(uploaded: dict[str, Any]) -> None:
    assert uploaded["first"]["state"] in ("queued", "running")
    states = [e["state"] for e in uploaded["events"]]
    order = ["queued", "running", "done"]
    assert states[-1] == "done" and states == sorted(states, key=order.index), states
    final = uploaded["final"]
    assert final["progress"] == 1.0
    by_name = {f["name"]: f for f in final["files"]}
    assert by_name["pay.pdf"]["status"] == "done" and by_name["pay.pdf"]["chunks"] >= 1
    assert by_name["leave.docx"]["status"] == "done" and by_name["leave.docx"]["chunks"] >= 1
    assert by_name["pay.pdf"]["doc_id"] == PDF_ID
    # The corrupt file failed alone, with its reason.
    assert by_name["broken.pdf"]["status"] == "failed"
    assert "PDF" in by_name["broken.pdf"]["reason"]


def test_alice_reads_her_documents(
    served: tuple[LocalServer, dict[str, str]], uploaded: dict[str, Any]
) -> None:
    with http(served, "alice") as c:
        listed = c.get("/kb/documents", params={"prefix": "hr/"}).json()
        assert {d["doc_id"] for d in listed["documents"]} == {PDF_ID, DOCX_ID}
        meta = c.get(doc_url(PDF_ID)).json()
        assert meta["acl"] == "group:hr" and meta["owner"] == "alice" and meta["format"] == "pdf"
        chunks = c.get(doc_url(PDF_ID, "/chunks")).json()["chunks"]
        assert any("ZEBRA-17" in ch["text"] for ch in chunks)
        assert chunks[0]["page"] == 1
        original = c.get(doc_url(PDF_ID, "/original"))
        assert original.status_code == 200 and original.content == uploaded["pdf"]
        assert original.headers["content-type"] == "application/pdf"
        assert original.headers["content-disposition"].startswith("inline")
        assert c.get("/kb/stats").json()["documents"] == 2


def test_the_listing_says_who_may_delete_and_delete_agrees(
    served: tuple[LocalServer, dict[str, str]], uploaded: dict[str, Any]
) -> None:
    # dave reads hr's documents (group hr) but did not upload them; carol is an admin.
    for user, allowed in (("alice", True), ("carol", True), ("dave", False)):
        with http(served, user) as c:
            listed = c.get("/kb/documents", params={"prefix": "hr/"}).json()["documents"]
            assert {d["doc_id"]: d["can_delete"] for d in listed} == {
                PDF_ID: allowed,
                DOCX_ID: allowed,
            }, user
            assert c.get(doc_url(PDF_ID)).json()["can_delete"] is allowed, user
    with http(served, "dave") as c:
        refused = c.delete(doc_url(PDF_ID))
        assert refused.status_code == 403 and "owner or an admin" in refused.json()["error"]
        assert c.get(doc_url(PDF_ID)).status_code == 200  # still there


def test_one_rule_decides_who_may_change_a_document() -> None:
    from tools.access.acl import may_change

    assert may_change("alice", False, "alice") and may_change("carol", True, "alice")
    assert not may_change("dave", False, "alice")
    assert not may_change("dave", False, "") and may_change("carol", True, "")  # the CLI's


def test_bob_finds_nothing_of_hr(
    served: tuple[LocalServer, dict[str, str]], uploaded: dict[str, Any]
) -> None:
    with http(served, "bob") as c:
        assert c.get("/kb/documents").json()["total"] == 0
        for tail in ("", "/chunks", "/original"):
            r = c.get(doc_url(PDF_ID, tail))
            assert r.status_code == 404 and r.json() == {"error": "document not found"}
        assert c.delete(doc_url(PDF_ID)).status_code == 404
        assert c.get("/kb/stats").json()["documents"] == 0
    with http(served, None) as anonymous:
        assert anonymous.get("/kb/documents").status_code == 401


@pytest.mark.parametrize("graph", ["hybrid_rag", "tool_agent"])
def test_neither_graph_answers_bob_from_them(
    served: tuple[LocalServer, dict[str, str]], uploaded: dict[str, Any], graph: str
) -> None:
    if graph == "tool_agent" and not agent_graph_available():
        pytest.skip("the agent graph cannot be imported here")
    assert "ZEBRA-17" not in ask(served, "bob", graph, ASK_PAY)
    alice = json.loads(ask(served, "alice", graph, ASK_PAY))
    assert "ZEBRA-17" in alice["answer"]
    internal = [c for c in alice["citations"] if c.get("doc_id")]
    assert PDF_ID in {c["doc_id"] for c in internal}  # the page links to its original


def test_a_user_grants_only_what_they_belong_to(
    served: tuple[LocalServer, dict[str, str]], uploaded: dict[str, Any]
) -> None:
    with http(served, "bob") as c:
        r = c.post(
            "/kb/uploads", data={"acl": "group:hr"}, files=[("file", ("x.md", b"# x\n\nhi"))]
        )
        assert r.status_code == 403 and "group:hr" in r.json()["error"]
        r = c.post("/kb/uploads", data={"acl": "public"}, files=[("file", ("x.md", b"# x\n\nhi"))])
        assert r.status_code == 403 and "admin" in r.json()["error"]


def test_delete_removes_it_from_both_retrievers_at_once(
    served: tuple[LocalServer, dict[str, str]], uploaded: dict[str, Any]
) -> None:
    with http(served, "alice") as c:
        assert c.delete(doc_url(PDF_ID)).json() == {"deleted": PDF_ID}
        assert c.get(doc_url(PDF_ID)).status_code == 404
        assert c.get(doc_url(PDF_ID, "/original")).status_code == 404
        assert [d["doc_id"] for d in c.get("/kb/documents").json()["documents"]] == [DOCX_ID]
    # BM25 alone ("ZEBRA-17" is a rare term) and the hybrid search: gone from both.
    for graph in ("hybrid_rag", "tool_agent"):
        if graph == "tool_agent" and not agent_graph_available():
            continue
        assert "ZEBRA" not in ask(served, "alice", graph, ASK_PAY)
    # An admin may delete what another user uploaded.
    with http(served, "carol") as admin:
        assert admin.delete(doc_url(DOCX_ID)).status_code == 200


def test_an_admin_syncs_a_folder_source_over_http(
    served: tuple[LocalServer, dict[str, str]], tmp_path: Path
) -> None:
    folder = tmp_path / "policies"
    folder.mkdir()
    (folder / "expenses.md").write_text("# Expenses\n\nMeals are refunded up to 40 EUR.\n")
    body = {"id": "policies", "kind": "folder", "location": str(folder), "acl": "group:hr",
            "schedule": "every 1h"}  # fmt: skip
    with http(served, "bob") as c:
        assert c.post("/kb/sources", json=body).status_code == 403
    with http(served, "carol") as admin:
        created = admin.post("/kb/sources", json=body)
        assert created.status_code == 201, created.text
        r = admin.post("/kb/sources/policies/sync")
        assert r.status_code == 202, r.text
        job = wait_job(admin, r.json()["job_id"])
        assert job["state"] == "done" and job["kind"] == "sync"
        assert [f["doc_id"] for f in job["files"]] == ["src:policies:expenses.md"]
        last = admin.get("/kb/sources/policies").json()["last_sync"]
        assert (last["added"], last["removed"], last["errors"]) == (1, 0, [])
    with http(served, "alice") as c:
        listed = c.get("/kb/documents", params={"source": "source:policies"}).json()
        assert [d["path"] for d in listed["documents"]] == ["expenses.md"]
    with http(served, "carol") as admin:
        gone = admin.delete("/kb/sources/policies").json()
        assert gone == {"deleted": "policies", "documents_removed": 1}
        assert admin.get("/kb/sources/policies").status_code == 404


def test_a_job_a_stopped_server_left_is_finished_after_the_restart(tmp_path: Path) -> None:
    """A server stopped in the middle of an upload (its job running, its process gone):
    the next server finishes the job from the stored original, with its access list."""
    import subprocess
    import sys

    from tools.kb.documents.jobs import Upload, plan
    from tools.kb.documents.library import Library
    from tools.kb.knowledge_base import KBConfig, KnowledgeBase

    users = tmp_path / "users.json"
    tokens = {name: add_user(users, name, groups) for name, groups in
              (("alice", ["hr"]), ("bob", []))}  # fmt: skip
    home = tmp_path / "home"
    home.mkdir()
    with KnowledgeBase(KBConfig(home=home)) as kb:
        library = Library(kb)
        upload = Upload("pay.md", f"# Pay\n\n{PAY_FACT}\n".encode())
        files, _ = plan(library, [upload], owner="alice", acl=("group:hr",), folder="hr")
        job = library.catalog.new_job("upload", "alice", files)
        job.state, job.files[0].status = "running", "embedding"
        library.catalog.save_job(job)
        gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True)  # fmt: skip
        library.catalog._db.execute("UPDATE jobs SET pid = ?", (int(gone.stdout),))
        library.close()
    env = {"HYBRID_RAG_USERS_FILE": str(users)}
    with serving(home, tmp_path / "langgraph-dev.log", env) as srv:
        served = (srv, tokens)
        with http(served, "alice") as alice:
            finished = wait_job(alice, job.job_id)
            assert finished["state"] == "done", finished
            assert finished["files"][0]["status"] == "done"
            chunks = alice.get(doc_url("upload:hr/pay.md", "/chunks")).json()["chunks"]
            assert PAY_FACT in chunks[0]["text"]
        with http(served, "bob") as bob:  # the access list it was sent with
            assert bob.get(doc_url("upload:hr/pay.md")).status_code == 404
