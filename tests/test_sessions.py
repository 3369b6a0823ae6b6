"""Issue 55 items 2 and 3, below HTTP: the sessions file (hashes only, idle and absolute
limits, bounded per user), the failure limiter, passwords (Argon2id, the same answer and
work for an unknown user) and ``hybrid-rag users passwd``."""

from __future__ import annotations

import io
import sqlite3
import time
from pathlib import Path

import pytest

from cli.main import main
from server.credentials import CSRF_HEADER, SESSION_COOKIE, csrf_problem, csrf_token, resolve
from tools.access import sessions as sessions_module
from tools.access.login_limits import FailureLimiter
from tools.access.passwords import set_password, verify_login
from tools.access.sessions import SessionStore, limits_from_env
from tools.access.users import UserDirectory, add_user, read_users
from tools.access.users_file import rotate_token, set_disabled
from tools.errors import ConfigError, InputError


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_a_session_is_stored_as_a_hash_and_ends_when_idle_or_too_old(tmp_path: Path) -> None:
    clock = Clock()
    store = SessionStore(tmp_path / "s.sqlite3", idle_s=600, absolute_s=3600, clock=clock)
    session_id = store.create("alice", "stamp1")
    raw = (tmp_path / "s.sqlite3").read_bytes() + b"".join(
        p.read_bytes() for p in tmp_path.glob("s.sqlite3-*")
    )
    assert session_id.encode() not in raw  # only its SHA-256 is kept
    found = store.get(session_id)
    assert found is not None and found.identity == "alice" and found.stamp == "stamp1"
    # Used every 5 minutes it lives until the absolute limit, not past it.
    for _ in range(11):
        clock.now += 300
        assert store.get(session_id) is not None
    clock.now += 300  # 3600 s after the sign-in
    assert store.get(session_id) is None
    # Idle: 10 minutes without a request ends it.
    other = store.create("alice", "stamp1")
    clock.now += 601
    assert store.get(other) is None
    # Signed out: gone; an unknown or absurd id is no session.
    third = store.create("bob", "s")
    store.end(third)
    assert store.get(third) is None and store.get("nope") is None and store.get("x" * 500) is None


def test_a_user_keeps_a_bounded_number_of_sessions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sessions_module, "MAX_PER_USER", 3)
    clock = Clock()
    store = SessionStore(tmp_path / "s.sqlite3", clock=clock)
    made = []
    for _ in range(5):
        clock.now += 1
        made.append(store.create("alice", "s"))
    assert [store.get(s) is not None for s in made] == [False, False, True, True, True]
    with sqlite3.connect(tmp_path / "s.sqlite3") as db:
        assert db.execute("SELECT count(*) FROM sessions").fetchone() == (3,)


def test_a_pending_single_sign_on_is_used_once_and_expires(tmp_path: Path) -> None:
    clock = Clock()
    store = SessionStore(tmp_path / "s.sqlite3", clock=clock)
    store.begin_pending("state1", "nonce1", "verifier1")
    assert store.take_pending("state1") == ("nonce1", "verifier1")
    assert store.take_pending("state1") is None  # once
    store.begin_pending("state2", "n", "v")
    clock.now += sessions_module.PENDING_S + 1
    assert store.take_pending("state2") is None


def test_session_limits_come_from_the_environment_and_bad_ones_are_named() -> None:
    assert limits_from_env({}) == (
        sessions_module.DEFAULT_IDLE_S,
        sessions_module.DEFAULT_ABSOLUTE_S,
    )
    assert limits_from_env({"HYBRID_RAG_SESSION_IDLE_S": "900"})[0] == 900
    with pytest.raises(ConfigError, match="HYBRID_RAG_SESSION_ABSOLUTE_S must be a number"):
        limits_from_env({"HYBRID_RAG_SESSION_ABSOLUTE_S": "a week"})
    with pytest.raises(ConfigError, match="HYBRID_RAG_SESSION_IDLE_S must be between"):
        limits_from_env({"HYBRID_RAG_SESSION_IDLE_S": "1"})


def test_the_failure_limiter_waits_out_the_window_and_stays_bounded() -> None:
    clock = Clock()
    limiter = FailureLimiter(3, 60, max_keys=100, clock=clock)
    for _ in range(3):
        assert limiter.retry_after("alice") == 0
        limiter.failed("alice")
    assert 59 <= limiter.retry_after("alice") <= 60
    assert limiter.retry_after("bob") == 0  # per key
    clock.now += 61
    assert limiter.retry_after("alice") == 0
    for n in range(1000):  # a flood of names keeps at most max_keys
        limiter.failed(f"name{n}")
    assert len(limiter._failures) == 100
    limiter.failed("carol")
    limiter.succeeded("carol")
    assert limiter.retry_after("carol") == 0


def test_passwords_are_argon2id_and_an_unknown_user_costs_the_same(tmp_path: Path) -> None:
    users = tmp_path / "users.json"
    add_user(users, "alice", ["hr"])
    add_user(users, "bob")
    with pytest.raises(InputError, match="10 characters at least"):
        set_password(users, "alice", "short")
    with pytest.raises(InputError, match="no user 'carol'"):
        set_password(users, "carol", "long enough password")
    before = read_users(users)
    set_password(users, "alice", "correct horse battery")
    entry = users.read_text()
    assert "$argon2id$" in entry and "correct horse" not in entry
    by_name = {u.identity: u for u in read_users(users).values()}
    alice = by_name["alice"]
    assert alice.stamp != {u.identity: u for u in before.values()}["alice"].stamp
    assert verify_login(alice, "correct horse battery")
    assert not verify_login(alice, "correct horse battery!")
    assert not verify_login(by_name["bob"], "correct horse battery")  # no password at all

    def timed(user: object, password: str) -> float:
        start = time.perf_counter()
        verify_login(user, password)  # type: ignore[arg-type]
        return time.perf_counter() - start

    verify_login(None, "warm up the dummy hash")
    known = min(timed(alice, "wrong password!!") for _ in range(3))
    unknown = min(timed(None, "wrong password!!") for _ in range(3))
    assert unknown > known / 3  # both run a full Argon2id verification


def test_users_passwd_reads_standard_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    users = tmp_path / "users.json"
    add_user(users, "alice")
    monkeypatch.setattr("sys.stdin", io.StringIO("a long password here\n"))
    assert main(["users", "passwd", "alice", "--file", str(users)]) == 0
    assert "password set" in capsys.readouterr().out
    alice = next(iter(read_users(users).values()))
    assert verify_login(alice, "a long password here")
    monkeypatch.setattr("sys.stdin", io.StringIO("short\n"))
    assert main(["users", "passwd", "alice", "--file", str(users)]) == 2
    assert "10 characters at least" in capsys.readouterr().err
    assert main(["users", "list", "--file", str(users)]) == 0
    assert "password" in capsys.readouterr().out


def test_a_session_ends_with_its_users_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HYBRID_RAG_HOME", str(tmp_path / "home"))
    users = tmp_path / "users.json"
    add_user(users, "alice", ["hr"])
    token = add_user(users, "bob")
    directory = UserDirectory(users, check_every_s=0)
    from server.credentials import sessions  # the server's store, in this data home

    def session_of(identity: str) -> dict[str, str]:
        user = directory.named(identity)
        assert user is not None
        return {"cookie": f"{SESSION_COOKIE}={sessions().create(identity, user.stamp)}"}

    headers = session_of("alice")
    assert (user := resolve(directory, headers)) is not None and user.identity == "alice"
    rotate_token(users, "alice")  # a new token ends the browser sessions made before
    assert resolve(directory, headers) is None
    headers = session_of("alice")
    set_password(users, "alice", "a new password 1")
    assert resolve(directory, headers) is None
    headers = session_of("alice")
    set_disabled(users, "alice", True)
    assert (user := resolve(directory, headers)) is not None and user.disabled
    set_disabled(users, "alice", False)
    assert resolve(directory, headers) is None  # enabling again does not revive it
    # A bearer token alone decides when one is sent, a wrong one too.
    assert (
        resolve(directory, {**session_of("alice"), "authorization": f"Bearer {token}"}).identity
        == "bob"
    )  # type: ignore[union-attr]
    assert resolve(directory, {**session_of("alice"), "x-api-key": "wrong"}) is None


def test_a_cookie_signed_change_needs_its_csrf_token() -> None:
    cookie = {"cookie": f"{SESSION_COOKIE}=abc; other=1"}
    assert csrf_problem("POST", "/threads", cookie) is not None
    assert csrf_problem("DELETE", "/kb/documents/x", cookie) is not None
    assert csrf_problem("POST", "/threads", {**cookie, CSRF_HEADER: "wrong"}) is not None
    assert csrf_problem("POST", "/threads", {**cookie, CSRF_HEADER: csrf_token("abc")}) is None
    assert csrf_problem("GET", "/threads/x", cookie) is None  # reads change nothing
    assert csrf_problem("POST", "/threads", {**cookie, "authorization": "Bearer t"}) is None
    assert csrf_problem("POST", "/auth/login", cookie) is None  # authenticates by its body
    assert csrf_problem("POST", "/threads", {}) is None  # no cookie: the token rules apply
    # ASGI's list of byte pairs, as the middleware sees it.
    assert csrf_problem("PATCH", "/threads/x", [(b"cookie", f"{SESSION_COOKIE}=abc".encode())])
