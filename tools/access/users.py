"""The server's user directory: bearer tokens mapped to a user and their groups.

A JSON file, named by ``HYBRID_RAG_USERS_FILE`` on the server::

    {"users": [{"identity": "alice", "groups": ["hr"], "token_sha256": "<64 hex digits>",
                "admin": false, "disabled": false}]}

Only the SHA-256 of each token is stored, so the file is no secret to whoever reads it
(``hybrid-rag users add`` makes a token, prints it once and stores its hash); but whoever
can write it can make themselves anyone, so a file writable by group or others is refused
(as ssh refuses such a key file). ``admin`` and ``disabled`` default to false; a disabled
user is not authenticated. The file is re-read when its content changes (compared by
hash, at least every ``CHECK_EVERY_S`` seconds, and at once when its size, time or mode
changes): adding, disabling or rotating a user needs no restart, even when a copy keeps
the old modification time (``cp -p``, ``rsync -t``). Editing: ``tools.access.users_file``.

Every edit (``hybrid-rag users ...``, the ``/admin`` routes) is one read-modify-write under
an exclusive lock on ``.<name>.lock`` beside the file (``editing``), written to a temporary
file of its own, synced and renamed over the file: parallel edits lost updates (two
disables answered true left one token working) and shared one temporary name (503 "No
such file or directory").
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
import stat
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools.access.acl import Reader, principal
from tools.access.key_records import KEY_PREFIX, ApiKey, parse_keys
from tools.access.users_lock import edit_count, locked, write_entries
from tools.errors import ConfigError, InputError

# The server user's ``kb_access`` for a caller who reads every document (no users file).
ALL_DOCUMENTS = "all"
USERS_FILE_ENV = "HYBRID_RAG_USERS_FILE"  # read by the server's auth handler (server/auth.py)
MAX_USERS_FILE_BYTES = 8 * 1024 * 1024
CHECK_EVERY_S = 2.0  # a content change the file's stat does not show is seen within this
_FLAGS = ("admin", "disabled", "sso")
PASSWORD_PREFIX = "$argon2id$"  # the only password hashes the file holds (tools.access.passwords)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class User:
    """A caller the directory knows."""

    identity: str
    groups: tuple[str, ...] = ()
    admin: bool = False
    disabled: bool = False
    # The Argon2id hash of the user's password ("" for none: token or SSO only).
    password: str = field(default="", repr=False)
    sso: bool = False  # created by a single sign-on (server/oidc.py)
    # Changes when the token or password does: a browser session made before ends.
    stamp: str = field(default="", repr=False)

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
    for flag in _FLAGS:
        if not isinstance(entry.get(flag, False), bool):
            raise ConfigError(f"{where}: '{flag}' must be true or false")
    try:
        principal("user", identity)
        for g in groups:
            principal("group", g)
    except InputError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    password = entry.get("password_argon2", "")
    if not isinstance(password, str) or (password and not password.startswith(PASSWORD_PREFIX)):
        raise ConfigError(f"{where}: 'password_argon2' must be an Argon2id hash (users passwd)")
    stamp = hashlib.sha256(f"{digest.lower()}\0{password}".encode()).hexdigest()[:32]
    user = User(
        identity,
        tuple(sorted(set(groups))),
        admin=entry.get("admin", False),
        disabled=entry.get("disabled", False),
        password=password,
        sso=entry.get("sso", False),
        stamp=stamp,
    )
    return digest.lower(), user


def _is_hex(text: str) -> bool:
    try:
        int(text, 16)
    except ValueError:
        return False
    return True


def check_mode(path: Path, mode: int) -> None:
    """Refuse a users file that group or others may write: they could add themselves."""
    if mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise ConfigError(
            f"users file {path} is writable by group or others (mode {stat.S_IMODE(mode):o}):"
            f" anyone who can write it can make themselves any user; run chmod 600 {path}"
        )


def read_bytes(path: Path) -> bytes:
    """The file's bytes, after the size and permission checks (``ConfigError`` naming the
    problem: missing, unreadable, too big, writable by others)."""
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(f"users file {path} is not a regular file")
        check_mode(path, st.st_mode)
        if st.st_size > MAX_USERS_FILE_BYTES:
            raise ConfigError(f"{path}: users file is over {MAX_USERS_FILE_BYTES >> 20} MB")
        with path.open("rb") as f:
            return f.read(MAX_USERS_FILE_BYTES + 1)[:MAX_USERS_FILE_BYTES]
    except FileNotFoundError:
        raise ConfigError(f"users file {path} does not exist ({USERS_FILE_ENV})") from None
    except OSError as exc:
        raise ConfigError(f"cannot read the users file {path}: {exc.strerror or exc}") from None


def parse_users(path: Path, raw: bytes) -> dict[str, User]:
    """Token hash -> user (disabled ones included). ``ConfigError`` names the bad entry."""
    if not raw.strip():
        raise ConfigError(f'users file {path} is empty (expected {{"users": [...]}})')
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"users file {path} is not valid JSON: {exc}") from None
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


def read_users(path: Path) -> dict[str, User]:
    """Token hash -> user. Raises ``ConfigError`` naming the file and the problem."""
    return parse_users(path, read_bytes(path))


class UserDirectory:
    """The users of ``path``, re-read when the file's content changes (thread-safe).

    A broken file (missing, empty, not JSON, too big, writable by others) refuses every
    token with a ``ConfigError`` that names the problem, logged once per distinct
    problem, not per request."""

    def __init__(
        self,
        path: Path,
        check_every_s: float = CHECK_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = path
        self.check_every_s = check_every_s
        self._clock = clock
        self._lock = threading.Lock()
        self._stamp: tuple[int, ...] | None = None
        self._checked = float("-inf")
        self._digest: str | None = None
        self._users: dict[str, User] = {}
        self._named: dict[str, User] = {}
        self._keys: dict[str, ApiKey] = {}  # API keys by hash (tools.access.api_keys)
        self._error: str | None = None

    def lookup(self, token: str) -> User | None:
        """The user whose token this is (disabled or not), or None."""
        if not token:
            return None
        return self._current().get(hash_token(token))

    def named(self, identity: str) -> User | None:
        """The user of this identity (disabled or not), or None."""
        self._current()
        return self._named.get(identity)

    def authenticate(self, token: str) -> User | None:
        """The enabled user whose token this is, or None."""
        user = self.lookup(token)
        return None if user is None or user.disabled else user

    def key(self, token: str) -> ApiKey | None:
        """The stored API key this token is (expired or not), or None."""
        if not token.startswith(KEY_PREFIX):
            return None
        self._current()
        return self._keys.get(hash_token(token))

    def problem(self) -> str | None:
        """What is wrong with the file now (None when it serves), for health output."""
        try:
            self._current()
        except ConfigError as exc:
            return str(exc)
        return None

    def _stat_stamp(self) -> tuple[int, ...]:
        try:
            st = self.path.stat()
        except OSError:
            return ()
        return (st.st_mtime_ns, st.st_size, st.st_ino, st.st_mode)

    def _current(self) -> dict[str, User]:
        with self._lock:
            # The edit count first: an edit finishing during the read is seen next time.
            stamp, now = (edit_count(), *self._stat_stamp()), self._clock()
            if stamp == self._stamp and now - self._checked < self.check_every_s:
                if self._error is not None:
                    raise ConfigError(self._error)
                return self._users
            self._stamp, self._checked = stamp, now
            try:
                raw = read_bytes(self.path)
                digest = hashlib.sha256(raw).hexdigest()
                if digest != self._digest:  # None after a failure: parse again
                    self._users = parse_users(self.path, raw)
                    self._named = {u.identity: u for u in self._users.values()}
                    self._keys = parse_keys(self.path, raw)
                    self._digest = digest
            except ConfigError as exc:
                self._fail(str(exc))
                raise
            if self._error is not None:
                log.warning("users file %s is usable again", self.path)
                self._error = None
            return self._users

    def _fail(self, message: str) -> None:
        if message != self._error:  # once per distinct problem, not per request
            log.error("refusing every request: %s", message)
        self._error = message
        self._users, self._named, self._keys, self._digest = {}, {}, {}, None


def entries_of(path: Path) -> list[dict[str, Any]]:
    """The file's entries as stored (validated first: a broken file is not edited)."""
    raw = read_bytes(path)
    parse_users(path, raw)
    parse_keys(path, raw)
    entries: list[dict[str, Any]] = json.loads(raw.decode("utf-8"))["users"]
    return entries


@contextmanager
def editing(path: Path, *, create: bool = False) -> Iterator[list[dict[str, Any]]]:
    """The entries of ``path`` to change in place, read under the edit lock and written
    back under it when the block ends without an error (an error writes nothing).
    ``create``: a missing file is an empty one."""
    with locked(path):
        entries = [] if create and not path.exists() else entries_of(path)
        yield entries
        write_entries(path, entries)


class UserExists(InputError):
    """``add_user(..., replace=False)`` of an identity the file already has."""


def new_token() -> str:
    return secrets.token_urlsafe(32)


def add_user(
    path: Path,
    identity: str,
    groups: Iterable[str] = (),
    *,
    admin: bool = False,
    replace: bool = True,
    sso: bool = False,
) -> str:
    """Add ``identity`` to the users file (``replace``: replacing a user of that name, else
    ``UserExists``); returns the new token, which is stored only as its hash. A broken
    file is not extended (its problem is named)."""
    groups = sorted(set(groups))
    principal("user", identity)
    for g in groups:
        principal("group", g)
    token = new_token()
    entry: dict[str, Any] = {"identity": identity, "groups": groups}
    if admin:
        entry["admin"] = True
    if sso:  # signs in through the identity provider (tools.access.sso_users)
        entry["sso"] = True
    with editing(path, create=True) as entries:
        if not replace and any(e.get("identity") == identity for e in entries):
            raise UserExists(f"user {identity!r} exists: rotate their token or remove them first")
        entries[:] = [e for e in entries if e.get("identity") != identity]
        entries.append({**entry, "token_sha256": hash_token(token)})
    return token
