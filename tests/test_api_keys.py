"""API keys a user makes for themselves (issue 55 item 4): made and shown once, listed by
prefix, revoked by their owner or an admin, stored hashed; a key is the user on every
route until it is revoked or expires, or its user is disabled."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from langgraph_sdk import Auth
from starlette.applications import Starlette
from starlette.testclient import TestClient

from server.auth import authenticate
from server.webapp import routes
from tools.access.api_keys import create_key, key_user, list_keys
from tools.access.users import UserDirectory, add_user
from tools.access.users_file import set_disabled


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[TestClient, Path, dict]:
    users = tmp_path / "users.json"
    tokens = {"root": add_user(users, "root", admin=True), "bob": add_user(users, "bob", ["ops"])}
    monkeypatch.setenv("HYBRID_RAG_USERS_FILE", str(users))
    headers = {u: {"Authorization": f"Bearer {t}"} for u, t in tokens.items()}
    return TestClient(Starlette(routes=routes())), users, headers


def test_a_key_is_made_once_listed_by_prefix_and_revoked(served: tuple) -> None:
    client, users, h = served
    made = client.post("/auth/keys", headers=h["bob"], json={"name": "ci", "expires_days": 30})
    assert made.status_code == 201, made.text
    key, key_id = made.json()["key"], made.json()["id"]
    assert key.startswith(made.json()["prefix"]) and made.json()["expires"] is not None
    assert key not in users.read_text() and "api_keys" in users.read_text()  # hashed only
    listed = client.get("/auth/keys", headers=h["bob"]).json()["keys"]
    assert [k["name"] for k in listed] == ["ci"] and key not in json.dumps(listed)
    as_key = {"x-api-key": key}
    assert client.get("/kb/me", headers=as_key).json() == {"identity": "bob", "admin": False}
    assert client.get("/kb/me", headers={"Authorization": f"Bearer {key}"}).status_code == 200
    assert client.get("/auth/keys", headers=h["root"]).json()["keys"] == []  # one's own
    everyone = client.get("/admin/keys", headers=h["root"]).json()["keys"]
    assert [(k["identity"], k["name"]) for k in everyone] == [("bob", "ci")]
    assert client.get("/admin/keys", headers=h["bob"]).status_code == 403
    assert client.delete(f"/auth/keys/{key_id}", headers=h["bob"]).json()["deleted"] == key_id
    assert client.get("/kb/me", headers=as_key).status_code == 401  # revoked: at once


def test_another_users_key_is_not_found_but_an_admin_revokes_it(served: tuple) -> None:
    client, _, h = served
    key_id = client.post("/auth/keys", headers=h["bob"], json={"name": "mcp"}).json()["id"]
    root_key = client.post("/auth/keys", headers=h["root"], json={"name": "x"}).json()
    assert client.delete(f"/auth/keys/{root_key['id']}", headers=h["bob"]).status_code == 404
    assert client.delete(f"/auth/keys/{key_id}", headers=h["root"]).json()["identity"] == "bob"
    assert client.get("/auth/keys", headers=h["bob"]).json()["keys"] == []


def test_bad_key_requests_name_the_problem(served: tuple) -> None:
    client, _, h = served
    for body, word in (({}, "name"), ({"name": "a\nb"}, "control"),
                       ({"name": "ci", "expires_days": 0}, "expires_days"),
                       ({"name": "ci", "expires_days": "soon"}, "expires_days")):  # fmt: skip
        reply = client.post("/auth/keys", headers=h["bob"], json=body)
        assert reply.status_code == 400 and word in reply.json()["error"], body
    assert client.post("/auth/keys", json={"name": "x"}).status_code == 401


def test_an_expired_key_or_a_disabled_user_is_refused(served: tuple) -> None:
    client, users, _ = served
    stale, stale_key = create_key(users, "bob", "old", days=1, now=1000.0)
    fresh = create_key(users, "bob", "new")[1]
    directory = UserDirectory(users)
    assert key_user(directory, stale_key) is None  # expired long ago
    assert stale.expired(1000.0 + 86400) and [k.name for k in list_keys(users, "bob")] == [
        "new",
        "old",
    ]
    assert client.get("/kb/me", headers={"x-api-key": stale_key}).status_code == 401
    assert client.get("/kb/me", headers={"x-api-key": fresh}).status_code == 200
    set_disabled(users, "bob", True)
    assert client.get("/kb/me", headers={"x-api-key": fresh}).status_code == 401


def test_the_graphs_auth_handler_takes_a_key_as_the_user(served: tuple) -> None:
    _, users, _ = served
    key = create_key(users, "bob", "agent-chat-ui")[1]
    user = asyncio.run(authenticate({b"x-api-key": key.encode()}))
    assert user["identity"] == "bob" and user["groups"] == ["ops"]
    set_disabled(users, "bob", True)
    with pytest.raises(Auth.exceptions.HTTPException) as refused:
        asyncio.run(authenticate({b"authorization": f"Bearer {key}".encode()}))
    assert refused.value.status_code == 401 and "disabled" in str(refused.value.detail)
