"""The server's user directory: bearer tokens mapped to a user and their groups.

A JSON file, named by ``HYBRID_RAG_USERS_FILE`` on the server::

    {"users": [{"identity": "alice", "groups": ["hr"], "token_sha256": "<64 hex digits>"}]}

Only the SHA-256 of each token is stored, so the file is no secret to whoever reads it
(``hybrid-rag users add`` makes a token, prints it once and stores its hash). The file
is re-read when it changes: adding a user needs no restart.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.access.acl import Reader, principal
from tools.errors import ConfigError, InputError

# The server user's ``kb_access`` for a caller who reads every document (no users file).
ALL_DOCUMENTS = "all"
USERS_FILE_ENV = "HYBRID_RAG_USERS_FILE"  # read by the server's auth handler (graph/auth.py)
MAX_USERS_FILE_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class User:
    """A caller the directory knows."""

    identity: str
    groups: tuple[str, ...] = ()
    admin: bool = False

    def reader(self) -> Reader:
        return Reader.of(self.identity, self.groups)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _user(entry: Any, n: int, path: Path) -> tuple[str, User]:
    where = f"{path}: users[{n}]"
    if not isinstance(entry, dict):
        raise ConfigError(f"{where} must be an object with identity, groups, token_sha256")
    identity, groups, digest = (
        entry.get("identity"),
        entry.get("groups", []),
        entry.get("token_sha256"),
    )
    if not isinstance(identity, str):
        raise ConfigError(f"{where}: 'identity' must be a string")
    if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
        raise ConfigError(f"{where}: 'groups' must be a list of strings")
    if not isinstance(digest, str) or len(digest) != 64 or not _is_hex(digest):
        raise ConfigError(f"{where}: 'token_sha256' must be 64 hex digits (a token's SHA-256)")
    try:
        principal("user", identity)
        for g in groups:
            principal("group", g)
    except InputError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    admin = entry.get("admin", False)
    if not isinstance(admin, bool):
        raise ConfigError(f"{where}: 'admin' must be true or false")
    return digest.lower(), User(identity, tuple(sorted(set(groups))), admin)


def _is_hex(text: str) -> bool:
    try:
        int(text, 16)
    except ValueError:
        return False
    return True


def read_users(path: Path) -> dict[str, User]:
    """Token hash -> user. Raises ``ConfigError`` naming the file and the bad entry."""
    try:
        if path.stat().st_size > MAX_USERS_FILE_BYTES:
            raise ConfigError(f"{path}: users file is over {MAX_USERS_FILE_BYTES >> 20} MB")
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"users file {path} does not exist (HYBRID_RAG_USERS_FILE)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"cannot read the users file {path}: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("users"), list):
        raise ConfigError(f'{path}: expected {{"users": [...]}}')
    users: dict[str, User] = {}
    identities: set[str] = set()
    for n, entry in enumerate(data["users"]):
        digest, user = _user(entry, n, path)
        if user.identity in identities:
            raise ConfigError(f"{path}: user {user.identity!r} is listed twice")
        if digest in users:
            raise ConfigError(f"{path}: users[{n}] reuses another user's token")
        identities.add(user.identity)
        users[digest] = user
    return users


class UserDirectory:
    """The users of ``path``, re-read when the file changes (thread-safe)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._users: dict[str, User] = {}

    def authenticate(self, token: str) -> User | None:
        """The user whose token this is, or None."""
        if not token:
            return None
        return self._current().get(hash_token(token))

    def _current(self) -> dict[str, User]:
        try:
            st = self.path.stat()
        except OSError:
            raise ConfigError(
                f"users file {self.path} does not exist (HYBRID_RAG_USERS_FILE)"
            ) from None
        stamp = (st.st_mtime_ns, st.st_size)
        with self._lock:
            if stamp != self._stamp:
                self._users = read_users(self.path)
                self._stamp = stamp
            return self._users


def add_user(path: Path, identity: str, groups: Iterable[str] = ()) -> str:
    """Add (or give a new token to) ``identity`` in the users file; returns the new token,
    which is stored only as its hash. The file is replaced atomically."""
    groups = sorted(set(groups))
    principal("user", identity)
    for g in groups:
        principal("group", g)
    entries: list[dict[str, Any]] = []
    if path.exists():
        read_users(path)  # refuse to extend a broken file
        entries = json.loads(path.read_text(encoding="utf-8"))["users"]
    token = secrets.token_urlsafe(32)
    entries = [e for e in entries if e.get("identity") != identity]
    entries.append({"identity": identity, "groups": groups, "token_sha256": hash_token(token)})
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps({"users": entries}, indent=2) + "\n", encoding="utf-8")
    os.chmod(tmp, 0o600)
    tmp.replace(path)
    return token
