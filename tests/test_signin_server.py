"""Issue 55 items 2 and 3 against real servers on loopback: a browser's session cookie
(from a token or a password) honoured by the graphs' routes, /kb, /feedback and /admin, on
``langgraph dev`` and on the production server (Aegra with PostgreSQL); changes need the
CSRF token; signing out, disabling a user or changing their credentials ends the session
at once; passwords are rate-limited and answer alike for unknown users."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from server.credentials import CSRF_COOKIE, CSRF_HEADER, SESSION_COOKIE, SESSIONS_FILE
from tests.langgraph_server import serving
from tests.ports import free_port
from tests.production_server import Production, production_env
from tests.servers import PostgresServer
from tests.test_document_security import open_job
from tools.access.passwords import set_password
from tools.access.users import add_user
from tools.access.users_file import set_disabled

TIMEOUT = 60.0


@dataclass
class Served:
    url: str
    users: Path
    home: Path
    tokens: dict[str, str]


def _team(base: Path) -> tuple[Path, Path, dict[str, str]]:
    users = base / "users.json"
    tokens = {"alice": add_user(users, "alice", ["hr"]), "bob": add_user(users, "bob"),
              "root": add_user(users, "root", admin=True), "erin": add_user(users, "erin")}  # fmt: skip
    set_password(users, "alice", "alice's long password")
    home = base / "home"
    home.mkdir()
    return users, home, tokens


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    base = tmp_path_factory.mktemp("signin-dev")
    users, home, tokens = _team(base)
    with serving(home, base / "langgraph-dev.log", {"HYBRID_RAG_USERS_FILE": str(users)}) as srv:
        yield Served(srv.url, users, home, tokens)


@pytest.fixture(scope="module")
def aegra(
    postgres_server: PostgresServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    pytest.importorskip("aegra_api", reason="the production server (aegra-api) is in the dev extra")
    base = tmp_path_factory.mktemp("signin-aegra")
    users, home, tokens = _team(base)
    database = postgres_server.create_database("aegra_signin")
    env = production_env(home, database, users)
    prod = Production(f"http://127.0.0.1:{free_port()}", env, base / "aegra.log").spawn()
    try:
        prod.wait_ready()
        yield Served(prod.url, users, home, tokens)
    finally:
        prod.stop()


class Browser:
    """What a browser does with the cookies: keeps them, sends them, and echoes the CSRF
    cookie in a header on changes (as web/api.js does)."""

    def __init__(self, url: str) -> None:
        self.client = httpx.Client(base_url=url, timeout=TIMEOUT)

    def cookie(self, name: str) -> str:
        return self.client.cookies.get(name) or ""

    def change(self, method: str, path: str, **kw: object) -> httpx.Response:
        headers = {CSRF_HEADER: self.cookie(CSRF_COOKIE)}
        return self.client.request(method, path, headers=headers, **kw)  # type: ignore[arg-type]


def signed_in(url: str, token: str) -> tuple[Browser, httpx.Response]:
    browser = Browser(url)
    answer = browser.client.post("/auth/token", json={"token": token})
    assert answer.status_code == 200, answer.text
    return browser, answer


def session_flow(srv: Served) -> None:
    browser, answer = signed_in(srv.url, srv.tokens["alice"])
    assert answer.json() == {"identity": "alice", "admin": False}
    cookies = answer.headers.get_list("set-cookie")
    session = next(c for c in cookies if c.startswith(f"{SESSION_COOKIE}="))
    csrf = next(c for c in cookies if c.startswith(f"{CSRF_COOKIE}="))
    assert "HttpOnly" in session and "SameSite=lax" in session and "Secure" not in session
    assert "HttpOnly" not in csrf and "Path=/" in csrf
    c = browser.client
    # Reads with the cookie alone, on the custom routes and the graphs' API.
    assert c.get("/admin/me").json()["identity"] == "alice"
    assert c.get("/kb/me").json()["identity"] == "alice"
    # Changes need the CSRF token: the graphs' API, the custom routes.
    refused = c.post("/threads", json={"metadata": {"title": "t"}})
    assert refused.status_code == 403 and CSRF_HEADER in refused.json()["error"]
    assert c.post("/threads/search", json={"limit": 1}).status_code == 403
    assert c.put("/feedback", json={}).status_code == 403
    assert c.request("DELETE", "/kb/documents/x").status_code == 403
    wrong = c.post("/threads", json={}, headers={CSRF_HEADER: "0" * 64})
    assert wrong.status_code == 403
    made = browser.change("POST", "/threads", json={"metadata": {"title": "mine"}})
    assert made.status_code == 200, made.text
    thread = made.json()["thread_id"]
    assert made.json()["metadata"]["owner"] == "alice"
    assert c.get(f"/threads/{thread}").status_code == 200
    # A vote checks the thread through the graphs' API as the caller: the cookie is
    # forwarded, so her own thread is readable.
    vote = {"thread_id": thread, "answer": "18 days", "vote": "up"}
    assert browser.change("PUT", "/feedback", json=vote).status_code == 200
    votes = c.get("/feedback", params={"thread_id": thread}).json()["feedback"]
    assert [v["vote"] for v in votes] == ["up"]
    listed = browser.change("POST", "/threads/search", json={"limit": 10})
    assert [t["thread_id"] for t in listed.json()] == [thread]
    # Another user's session does not see it; a bearer token still works, without CSRF.
    bob, _ = signed_in(srv.url, srv.tokens["bob"])
    assert bob.client.get(f"/threads/{thread}").status_code == 404
    bearer = {"Authorization": f"Bearer {srv.tokens['alice']}"}
    assert httpx.get(f"{srv.url}/threads/{thread}", headers=bearer).status_code == 200
    # Signing out ends the session on the server: the old cookie is refused everywhere.
    kept = browser.cookie(SESSION_COOKIE)
    out = browser.change("POST", "/auth/logout")
    assert out.status_code == 200 and 'hybrid_rag_session=""' in out.headers["set-cookie"]
    replay = httpx.get(f"{srv.url}/threads/{thread}", cookies={SESSION_COOKIE: kept})
    assert replay.status_code == 401
    assert httpx.get(f"{srv.url}/kb/me", cookies={SESSION_COOKIE: kept}).status_code == 401


def test_a_session_cookie_on_langgraph_dev(dev: Served) -> None:
    session_flow(dev)
    with sqlite3.connect(dev.home / SESSIONS_FILE) as db:  # in the data home, by hash
        rows = db.execute("SELECT identity, id_sha256 FROM sessions").fetchall()
    assert "bob" in {identity for identity, _ in rows}  # alice's ended when she signed out
    assert all(len(key) == 64 for _, key in rows)


def test_a_session_cookie_on_the_production_server(aegra: Served) -> None:
    session_flow(aegra)


def test_password_sign_in_is_rate_limited_and_says_nothing_of_who_exists(dev: Served) -> None:
    c = httpx.Client(base_url=dev.url, timeout=TIMEOUT)
    good = c.post("/auth/login", json={"identity": "alice", "password": "alice's long password"})
    assert good.status_code == 200 and good.json()["identity"] == "alice"
    assert c.get("/admin/me").json()["identity"] == "alice"
    wrong = httpx.post(f"{dev.url}/auth/login", json={"identity": "alice", "password": "nope"})
    unknown = httpx.post(f"{dev.url}/auth/login", json={"identity": "zed", "password": "nope"})
    no_password = httpx.post(f"{dev.url}/auth/login", json={"identity": "bob", "password": "x"})
    assert wrong.status_code == unknown.status_code == no_password.status_code == 401
    assert wrong.json() == unknown.json() == no_password.json()
    bad = httpx.post(f"{dev.url}/auth/login", json={"identity": "alice"})
    assert bad.status_code == 400 and '"password"' in bad.json()["error"]
    for _ in range(4):  # five failures for alice in all
        httpx.post(f"{dev.url}/auth/login", json={"identity": "alice", "password": "guess"})
    limited = httpx.post(
        f"{dev.url}/auth/login", json={"identity": "alice", "password": "alice's long password"}
    )
    assert limited.status_code == 429 and "too many" in limited.json()["error"]
    assert int(limited.headers["retry-after"]) > 0


def test_disabling_or_a_new_password_ends_a_session_at_once(dev: Served) -> None:
    browser, _ = signed_in(dev.url, dev.tokens["bob"])
    assert browser.client.get("/admin/me").status_code == 200
    set_disabled(dev.users, "bob", True)
    try:
        assert browser.client.get("/admin/me").status_code == 401
        assert browser.change("POST", "/threads/search", json={}).status_code == 401
    finally:
        set_disabled(dev.users, "bob", False)
    assert browser.client.get("/admin/me").status_code == 401  # not revived
    # An admin sets a password in the Admin view's route: the user's sessions end.
    browser, _ = signed_in(dev.url, dev.tokens["bob"])
    root, _ = signed_in(dev.url, dev.tokens["root"])
    assert (
        root.change("POST", "/admin/users/bob/password", json={"password": "x"}).status_code == 400
    )
    done = root.change("POST", "/admin/users/bob/password", json={"password": "bob's new password"})
    assert done.status_code == 200, done.text
    assert browser.client.get("/admin/me").status_code == 401
    listed = root.client.get("/admin/users").json()["users"]
    assert {u["identity"]: u["password"] for u in listed}["bob"] is True
    assert bob_can_sign_in(dev)
    not_admin, _ = signed_in(dev.url, dev.tokens["alice"])
    refused = not_admin.change("POST", "/admin/users/bob/password", json={"password": "p" * 12})
    assert refused.status_code == 403


def bob_can_sign_in(srv: Served) -> bool:
    answer = httpx.post(
        f"{srv.url}/auth/login", json={"identity": "bob", "password": "bob's new password"}
    )
    return answer.status_code == 200


def test_the_cookie_is_secure_behind_https_and_tokens_are_checked(dev: Served) -> None:
    answer = httpx.post(
        f"{dev.url}/auth/token",
        json={"token": dev.tokens["bob"]},
        headers={"X-Forwarded-Proto": "https"},
    )
    assert all("Secure" in c for c in answer.headers.get_list("set-cookie"))
    assert httpx.post(f"{dev.url}/auth/token", json={"token": "nope"}).status_code == 401
    methods = httpx.get(f"{dev.url}/auth/methods").json()
    assert methods == {"users_file": True, "password": True, "token": True, "oidc": False}
    off = httpx.get(f"{dev.url}/auth/oidc/login")
    assert off.status_code == 404 and "HYBRID_RAG_OIDC_ISSUER" in off.json()["error"]


def test_disabling_a_user_ends_their_sessions_open_event_stream(dev: Served) -> None:
    browser, _ = signed_in(dev.url, dev.tokens["erin"])
    assert browser.client.get("/kb/documents").status_code == 200  # the catalog exists
    job_id = open_job(dev.home, "erin")  # stays queued: its stream stays open
    lines: list[str] = []
    started = None
    with browser.client.stream("GET", f"/kb/jobs/{job_id}/events",
                               timeout=httpx.Timeout(30, connect=10)) as r:  # fmt: skip
        assert r.status_code == 200, r.read()
        for line in r.iter_lines():
            lines.append(line)
            if started is None and line.startswith("data:"):
                set_disabled(dev.users, "erin", True)
                started = time.monotonic()
            assert started is None or time.monotonic() - started < 30, lines
    assert "event: error" in lines, lines
    error = json.loads(lines[lines.index("event: error") + 1].removeprefix("data: "))
    assert error["status"] == 401, error


def test_signing_in_again_replaces_the_session(dev: Served) -> None:
    browser, _ = signed_in(dev.url, dev.tokens["alice"])
    first = browser.cookie(SESSION_COOKIE)
    again = browser.client.post("/auth/token", json={"token": dev.tokens["alice"]})
    assert again.status_code == 200 and browser.cookie(SESSION_COOKIE) != first
    assert httpx.get(f"{dev.url}/kb/me", cookies={SESSION_COOKIE: first}).status_code == 401
    assert browser.client.get("/kb/me").status_code == 200
