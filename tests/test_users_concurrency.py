"""Concurrent edits of the users file (issue 53 item 8): every edit is a read-modify-write
under one file lock, written to a unique temporary file and replaced atomically, so
parallel adds and disables (threads of one server, or several processes) lose nothing,
and a disable answered true refuses the token at once."""

from __future__ import annotations

import fcntl
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

from server.webapp import routes
from tools.access import users_lock
from tools.access.users import UserDirectory, add_user, read_users
from tools.access.users_file import set_disabled
from tools.access.users_lock import lock_path
from tools.errors import ConfigError

# One process's share of the edits: 13 adds and 12 disables, interleaved.
EDITS = """
import sys
from pathlib import Path
from tools.access.users import add_user
from tools.access.users_file import set_disabled
path, k = Path(sys.argv[1]), int(sys.argv[2])
for i in range(13):
    add_user(path, f"new{k}x{i}")
    if i < 12:
        set_disabled(path, f"old{k * 12 + i}", True)
"""


def test_fifty_edits_from_two_processes_lose_none(tmp_path: Path) -> None:
    path = tmp_path / "users.json"
    old = {f"old{i}": add_user(path, f"old{i}") for i in range(24)}
    procs = [
        subprocess.Popen([sys.executable, "-c", EDITS, str(path), str(k)], stderr=subprocess.PIPE)
        for k in (0, 1)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
    found = {u.identity: u for u in read_users(path).values()}
    assert {f"new{k}x{i}" for k in (0, 1) for i in range(13)} <= set(found)
    assert all(found[name].disabled for name in old), "a disable was lost"
    directory = UserDirectory(path)
    assert all(directory.authenticate(token) is None for token in old.values())
    assert not list(tmp_path.glob(".users.json.*tmp*")), "a temporary file was left"


def test_a_disable_answered_true_refuses_the_token_right_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """7 admins' disables at once through /admin, and 30 adds: each disable answered
    true is refused on the very next request; each add answered 201 is a user."""
    path = tmp_path / "users.json"
    root = {"Authorization": f"Bearer {add_user(path, 'root', admin=True)}"}
    victims = {f"u{i}": add_user(path, f"u{i}") for i in range(7)}
    monkeypatch.setenv("HYBRID_RAG_USERS_FILE", str(path))
    client = TestClient(Starlette(routes=routes()))
    assert client.get("/admin/me", headers=root).status_code == 200

    def disable(name: str) -> tuple[bool, int]:
        reply = client.post(f"/admin/users/{name}/disable", headers=root)
        after = client.get("/admin/me", headers={"Authorization": f"Bearer {victims[name]}"})
        return reply.json().get("disabled") is True, after.status_code

    def add(n: int) -> tuple[int, str]:
        reply = client.post("/admin/users", headers=root, json={"identity": f"a{n}"})
        return reply.status_code, reply.text

    with ThreadPoolExecutor(12) as pool:
        disabled = list(pool.map(disable, victims))
        added = list(pool.map(add, range(30)))
    assert disabled == [(True, 401)] * 7
    assert all(status == 201 for status, _ in added), added
    assert {f"a{n}" for n in range(30)} <= {u.identity for u in read_users(path).values()}


def test_two_adds_of_one_name_at_once_answer_one_201(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The 'already exists' check is made under the lock: one add wins, the other 409."""
    path = tmp_path / "users.json"
    root = {"Authorization": f"Bearer {add_user(path, 'root', admin=True)}"}
    monkeypatch.setenv("HYBRID_RAG_USERS_FILE", str(path))
    client = TestClient(Starlette(routes=routes()))
    start = threading.Barrier(6)

    def add(_: int) -> int:
        start.wait(timeout=10)
        return client.post("/admin/users", headers=root, json={"identity": "carol"}).status_code

    with ThreadPoolExecutor(6) as pool:
        statuses = sorted(pool.map(add, range(6)))
    assert statuses == [201] + [409] * 5


def test_a_held_lock_times_out_naming_the_holder_and_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "users.json"
    add_user(path, "bob")
    before = path.read_bytes()
    lock = lock_path(path)
    with lock.open("a+") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        held.write("pid 4242 on elsewhere since 06:00:00")
        held.flush()
        monkeypatch.setattr(users_lock, "LOCK_TIMEOUT_S", 0.3)
        with pytest.raises(ConfigError) as caught:
            set_disabled(path, "bob", True)
    message = str(caught.value)
    assert "pid 4242 on elsewhere" in message and str(path) in message
    assert path.read_bytes() == before
