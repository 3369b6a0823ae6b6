"""The users file as the server reads it (``tools.access.users``), edits it
(``tools.access.users_file``, ``hybrid-rag users ...``) and authenticates with it
(``server/auth.py``): content-hash re-reads, permissions, broken files failing closed with
the problem named (logged once), admin and disabled users, x-api-key."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import Auth

from cli.main import main
from server import auth as server_auth
from server import credentials
from tools.access.users import (
    CHECK_EVERY_S,
    MAX_USERS_FILE_BYTES,
    UserDirectory,
    add_user,
    read_users,
)
from tools.access.users_file import list_users, remove_user, rotate_token, set_disabled
from tools.errors import ConfigError, InputError


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_same_size_rewrite_keeping_the_mtime_is_seen(tmp_path: Path) -> None:
    """``cp -p`` / ``rsync -t`` of a file whose only change is a rotated token: same
    size, same mtime, same inode. Stat-based re-reading kept the revoked token valid."""
    path = tmp_path / "users.json"
    old = add_user(path, "alice", ["hr"])
    clock = Clock()
    directory = UserDirectory(path, clock=clock)
    assert directory.authenticate(old) is not None
    st = path.stat()
    edited = tmp_path / "edited.json"
    edited.write_bytes(path.read_bytes())
    os.chmod(edited, 0o600)
    new = rotate_token(edited, "alice")
    content = edited.read_bytes()
    assert len(content) == st.st_size
    with path.open("r+b") as f:  # in place, as cp -p does: same inode
        f.write(content)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_mtime_ns == st.st_mtime_ns and path.stat().st_ino == st.st_ino
    clock.now += CHECK_EVERY_S
    assert directory.authenticate(old) is None
    user = directory.authenticate(new)
    assert user is not None and user.identity == "alice"


def test_a_change_the_stat_shows_is_seen_at_once(tmp_path: Path) -> None:
    path = tmp_path / "users.json"
    token = add_user(path, "alice")
    directory = UserDirectory(path, clock=Clock())  # the clock never moves
    assert directory.authenticate(token) is not None
    set_disabled(path, "alice", True)
    assert directory.authenticate(token) is None
    assert directory.lookup(token) is not None and directory.lookup(token).disabled  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", [0o664, 0o646, 0o666])
def test_a_users_file_others_may_write_is_refused(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "users.json"
    token = add_user(path, "alice")
    directory = UserDirectory(path, clock=Clock())
    assert directory.authenticate(token) is not None
    os.chmod(path, mode)
    with pytest.raises(ConfigError, match=r"writable by group or others .*chmod 600"):
        directory.authenticate(token)
    assert "writable by group or others" in (directory.problem() or "")
    os.chmod(path, 0o644)  # readable by all is fine: it holds hashes only
    assert directory.authenticate(token) is not None and directory.problem() is None


def _huge(path: Path) -> None:
    with path.open("wb") as f:
        f.truncate(MAX_USERS_FILE_BYTES + 1)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p.write_text(""), "is empty"),
        (lambda p: p.write_text("{users: ["), "is not valid JSON"),
        (lambda p: p.write_bytes(b"\xff\xfe{}"), "is not valid JSON"),
        (_huge, "is over 8 MB"),
        (lambda p: p.unlink(), "does not exist"),
        (lambda p: p.write_text('{"users": [{"identity": "a", "token_sha256": "' + "0" * 64
                                + '", "admin": "yes"}]}'), "'admin' must be true or false"),
    ],
)  # fmt: skip
def test_a_broken_file_fails_closed_naming_the_problem_logged_once(
    tmp_path: Path, make: Any, message: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "users.json"
    token = add_user(path, "alice")
    clock = Clock()
    directory = UserDirectory(path, clock=clock)
    assert directory.authenticate(token) is not None
    make(path)
    caplog.set_level(logging.ERROR, logger="tools.access.users")
    for _ in range(5):  # every request refused, the problem named each time
        with pytest.raises(ConfigError, match=message):
            directory.authenticate(token)
        clock.now += CHECK_EVERY_S
    assert [r.getMessage() for r in caplog.records if message in r.getMessage()] != []
    assert len(caplog.records) == 1  # logged once, not per request


def test_admin_and_disabled_flags(tmp_path: Path) -> None:
    path = tmp_path / "users.json"
    root = add_user(path, "root", ["it"], admin=True)
    bob = add_user(path, "bob")
    users = read_users(path)
    assert {u.identity: u.admin for u in users.values()} == {"root": True, "bob": False}
    set_disabled(path, "bob", True)
    assert json.loads(path.read_text())["users"][1]["disabled"] is True
    directory = UserDirectory(path)
    assert directory.authenticate(bob) is None
    assert directory.authenticate(root).admin  # type: ignore[union-attr]
    set_disabled(path, "bob", False)
    assert directory.authenticate(bob) is not None
    remove_user(path, "bob")
    assert directory.authenticate(bob) is None
    assert [u.identity for u in list_users(path)] == ["root"]
    with pytest.raises(InputError, match=r"no user 'carol' .*\(users: root\)"):
        rotate_token(path, "carol")
    assert oct(path.stat().st_mode & 0o777) == "0o600"  # a new file: the owner's only
    os.chmod(path, 0o644)  # let the server's user read it (deploy/compose.yaml)
    rotate_token(path, "root")
    assert oct(path.stat().st_mode & 0o777) == "0o644"  # an edit keeps that


async def _auth(headers: dict[Any, Any]) -> Any:
    return await server_auth.authenticate(headers)


async def test_the_auth_handler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "users.json"
    alice = add_user(path, "alice", ["hr"], admin=True)
    bob = add_user(path, "bob")
    monkeypatch.setenv("HYBRID_RAG_USERS_FILE", str(path))
    credentials.directory.cache_clear()  # one directory per path, shared with the routes
    # langgraph-api's bytes headers, Aegra's str headers, the x-api-key header
    user = await _auth({b"authorization": f"Bearer {alice}".encode()})
    assert user == {"identity": "alice", "groups": ["hr"], "kb_access": "acl", "is_admin": True}
    assert (await _auth({"Authorization": f"bearer {bob}"}))["is_admin"] is False
    assert (await _auth({b"x-api-key": bob.encode()}))["identity"] == "bob"
    with pytest.raises(Auth.exceptions.HTTPException) as refused:
        await _auth({b"authorization": b"Bearer nope"})
    assert refused.value.status_code == 401 and "unknown bearer token" in str(refused.value.detail)
    set_disabled(path, "bob", True)
    with pytest.raises(Auth.exceptions.HTTPException) as disabled:
        await _auth({b"x-api-key": bob.encode()})
    assert disabled.value.status_code == 401 and "'bob' is disabled" in str(disabled.value.detail)
    path.write_text("[")
    with pytest.raises(server_auth.UsersFileUnavailable) as broken:
        await _auth({b"x-api-key": bob.encode()})
    assert broken.value.status_code == 503 and "not valid JSON" in str(broken.value.detail)
    monkeypatch.delenv("HYBRID_RAG_USERS_FILE")
    assert (await _auth({}))["identity"] == server_auth.LOCAL_USER


def test_the_users_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "team" / "users.json"
    f = ["--file", str(path)]
    assert main(["users", "add", "root", "--groups", "it,hr", "--admin", *f]) == 0
    out = capsys.readouterr().out
    assert "user root (groups: hr, it, admin)" in out and "shown once" in out
    token = out.rsplit(": ", 1)[1].strip()
    assert main(["users", "add", "bob", *f]) == 0 and main(["users", "disable", "bob", *f]) == 0
    capsys.readouterr()
    assert main(["users", "list", *f]) == 0
    listing = capsys.readouterr().out
    assert "root\tgroups: hr,it\tadmin" in listing and "bob\tgroups: -\tdisabled" in listing
    assert "2 user(s)" in listing and token not in listing
    assert main(["users", "rotate", "root", *f]) == 0
    new = capsys.readouterr().out.rsplit(": ", 1)[1].strip()
    directory = UserDirectory(path)
    assert directory.authenticate(token) is None and directory.authenticate(new) is not None
    assert main(["users", "remove", "carol", *f]) == 2
    assert "no user 'carol'" in capsys.readouterr().err
    assert main(["users", "remove", "bob", *f]) == 0 and main(["users", "enable", "root", *f]) == 0
    assert [u.identity for u in list_users(path)] == ["root"]


def test_a_relative_users_file_is_named_absolute_and_a_new_one_warned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 53: from another folder a relative HYBRID_RAG_USERS_FILE silently made a second
    # file, and the CLI said only "in users.json".
    team, other = tmp_path / "team", tmp_path / "other"
    team.mkdir(), other.mkdir()
    monkeypatch.setenv("HYBRID_RAG_USERS_FILE", "users.json")
    monkeypatch.chdir(team)
    assert main(["users", "add", "alice"]) == 0
    first = capsys.readouterr()
    assert f"in {team / 'users.json'}\n" in first.out
    assert "creating a new users file" in first.err
    assert main(["users", "add", "bob"]) == 0  # the same file again: no warning
    assert "warning" not in capsys.readouterr().err
    monkeypatch.chdir(other)
    assert main(["users", "list"]) == 2  # the missing file named by its absolute path
    assert f"users file {other / 'users.json'} does not exist" in capsys.readouterr().err
    assert main(["users", "add", "carol"]) == 0
    err = capsys.readouterr().err
    assert f"creating a new users file {other / 'users.json'}" in err
    assert [u.identity for u in list_users(team / "users.json")] == ["alice", "bob"]
    monkeypatch.chdir(team)  # every command that writes names the file it wrote
    for command in (["rotate", "bob"], ["disable", "bob"], ["enable", "bob"], ["remove", "bob"]):
        assert main(["users", *command]) == 0
        assert f" {team / 'users.json'}" in capsys.readouterr().out, command
