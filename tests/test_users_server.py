"""``hybrid-rag users ...`` against a running server: a real ``langgraph dev`` with a
users file, each change (add, rotate, disable, enable, remove) effective on the next
request without a restart; a broken or group-writable users file answers every request
with a 503 naming the problem (not a bare 500), logged once."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.langgraph_server import LocalServer, serving
from tools.access.users import add_user

CLI = Path(sys.executable).parent / "hybrid-rag"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalServer, Path]]:
    base = tmp_path_factory.mktemp("users-server")
    users = base / "users.json"
    add_user(users, "root", admin=True)
    home = base / "home"
    home.mkdir()
    env = {"HYBRID_RAG_USERS_FILE": str(users)}
    with serving(home, base / "langgraph-dev.log", env) as srv:
        yield srv, users


def users_cli(users: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "HYBRID_RAG_USERS_FILE"}
    done = subprocess.run(
        [str(CLI), "users", *args, "--file", str(users)],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def token_of(output: str) -> str:
    return output.strip().rsplit(": ", 1)[1]


def search(srv: LocalServer, token: str, header: str = "authorization") -> httpx.Response:
    value = f"Bearer {token}" if header == "authorization" else token
    return httpx.post(
        f"{srv.url}/assistants/search", json={"limit": 5}, headers={header: value}, timeout=30
    )


def test_user_changes_take_effect_without_a_restart(served: tuple[LocalServer, Path]) -> None:
    srv, users = served
    alice = token_of(users_cli(users, "add", "alice", "--groups", "hr"))
    assert search(srv, alice).status_code == 200
    assert search(srv, alice, header="x-api-key").status_code == 200
    new = token_of(users_cli(users, "rotate", "alice"))
    old_refused = search(srv, alice)
    assert old_refused.status_code == 401 and "unknown bearer token" in old_refused.text
    assert search(srv, new).status_code == 200
    users_cli(users, "disable", "alice")
    disabled = search(srv, new)
    assert disabled.status_code == 401 and "'alice' is disabled" in disabled.text
    users_cli(users, "enable", "alice")
    assert search(srv, new).status_code == 200
    users_cli(users, "remove", "alice")
    assert search(srv, new).status_code == 401
    assert "alice" not in users_cli(users, "list")


@pytest.mark.parametrize(
    ("breaks", "named"),
    [
        (lambda p: p.write_text("{not json"), "is not valid JSON"),
        (lambda p: p.write_text(""), "is empty"),
        (lambda p: os.chmod(p, 0o666), "writable by group or others"),
        (lambda p: p.rename(p.with_suffix(".gone")), "does not exist"),
    ],
)
def test_a_broken_users_file_is_a_named_503_logged_once(
    served: tuple[LocalServer, Path], breaks: object, named: str
) -> None:
    srv, users = served
    saved = users.read_bytes()
    token = token_of(users_cli(users, "add", "carol"))
    saved = users.read_bytes()
    before = srv.log_tail(10**7).count(named)
    try:
        breaks(users)  # type: ignore[operator]
        for _ in range(3):
            refused = search(srv, token)
            assert refused.status_code == 503, refused.text
            assert named in refused.json()["detail"] and "users file" in refused.json()["detail"]
        log = srv.log_tail(10**7)
        assert log.count(named) - before == 1  # once, not per request
        assert "Traceback" not in log
    finally:
        users.with_suffix(".gone").unlink(missing_ok=True)
        users.write_bytes(saved)
        os.chmod(users, 0o600)
    assert search(srv, token).status_code == 200
