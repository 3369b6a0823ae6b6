"""The admin routes (issue 45 item 7): users managed over HTTP by the functions of
``hybrid-rag users`` (the file replaced atomically, a token answered once), the jobs
list, all refused to a non-admin; ``/admin/me`` tells the page who is signed in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

from server.webapp import routes
from tools.access.users import UserDirectory, add_user


@pytest.fixture
def served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[TestClient, Path, dict[str, dict[str, str]]]:
    users = tmp_path / "users.json"
    tokens = {"root": add_user(users, "root", admin=True), "bob": add_user(users, "bob", ["ops"])}
    monkeypatch.setenv("HYBRID_RAG_USERS_FILE", str(users))
    headers = {u: {"Authorization": f"Bearer {t}"} for u, t in tokens.items()}
    return TestClient(Starlette(routes=routes())), users, headers


def test_an_admin_manages_users_and_a_token_is_shown_once(
    served: tuple[TestClient, Path, dict[str, dict[str, str]]],
) -> None:
    client, users, h = served
    assert client.get("/admin/me", headers=h["root"]).json()["admin"] is True
    listed = client.get("/admin/users", headers=h["root"]).json()["users"]
    assert [u["identity"] for u in listed] == ["bob", "root"]
    assert all("token" not in json.dumps(u) for u in listed)
    made = client.post(
        "/admin/users", headers=h["root"], json={"identity": "carol", "groups": "hr, ops"}
    )
    assert made.status_code == 201 and made.json()["groups"] == ["hr", "ops"]
    token = made.json()["token"]
    carol = UserDirectory(users).lookup(token)
    assert carol is not None and carol.groups == ("hr", "ops")
    assert oct(users.stat().st_mode & 0o777) == "0o600"
    assert (
        client.post("/admin/users", headers=h["root"], json={"identity": "carol"}).status_code
        == 409
    )
    assert client.post("/admin/users/carol/disable", headers=h["root"]).json()["disabled"] is True
    assert client.get("/admin/me", headers={"Authorization": f"Bearer {token}"}).status_code == 401
    client.post("/admin/users/carol/enable", headers=h["root"])
    rotated = client.post("/admin/users/carol/rotate", headers=h["root"]).json()["token"]
    assert UserDirectory(users).lookup(token) is None and UserDirectory(users).lookup(rotated)
    assert "token" not in client.get("/admin/users", headers=h["root"]).text
    assert client.post("/admin/users/root/disable", headers=h["root"]).status_code == 409
    assert client.post("/admin/users/carol/explode", headers=h["root"]).status_code == 404
    bad = client.post("/admin/users", headers=h["root"], json={"identity": "a b"})
    assert bad.status_code == 400
    assert client.delete("/admin/users/carol", headers=h["root"]).json() == {"deleted": "carol"}
    assert client.get("/admin/jobs", headers=h["root"]).json() == {"jobs": []}


def test_a_non_admin_is_refused_everything_but_who_they_are(
    served: tuple[TestClient, Path, dict[str, dict[str, str]]],
) -> None:
    client, users, h = served
    before = users.read_bytes()
    assert client.get("/admin/me", headers=h["bob"]).json() == {
        "identity": "bob",
        "admin": False,
        "users_file": True,
    }
    for method, path in (("GET", "/admin/users"), ("POST", "/admin/users"), ("GET", "/admin/jobs"),
                         ("POST", "/admin/users/root/disable"), ("POST", "/admin/users/root/rotate"),
                         ("DELETE", "/admin/users/root"), ("GET", "/kb/sources")):  # fmt: skip
        reply = client.request(method, path, headers=h["bob"], json={"identity": "eve"})
        assert reply.status_code == 403, (method, path)
    assert users.read_bytes() == before


def test_without_a_users_file_the_user_routes_say_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HYBRID_RAG_USERS_FILE", raising=False)
    client = TestClient(Starlette(routes=routes()))
    assert client.get("/admin/me").json()["admin"] is True
    reply = client.get("/admin/users")
    assert reply.status_code == 409 and "no users file" in reply.json()["error"]
