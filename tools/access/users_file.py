"""Editing the users file (``hybrid-rag users add|list|remove|disable|enable|rotate``).

Every change reads, validates (a broken file is not edited, its problem is named) and
replaces the file under its edit lock (``tools.access.users.editing``), so parallel edits
lose nothing; a running server sees the change on its next request
(``tools.access.users.UserDirectory`` compares the content).
Adding a user is ``tools.access.users.add_user``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tools.access.users import (
    User,
    add_user,
    editing,
    hash_token,
    new_token,
    read_users,
)
from tools.errors import ConfigError, InputError


def _find(entries: list[dict[str, Any]], identity: str, path: Path) -> dict[str, Any]:
    for entry in entries:
        if entry.get("identity") == identity:
            return entry
    known = ", ".join(sorted(str(e.get("identity")) for e in entries)) or "none"
    raise InputError(f"no user {identity!r} in {path} (users: {known})")


def list_users(path: Path) -> list[User]:
    """Every user of the file (disabled ones included), by name."""
    return sorted(read_users(path).values(), key=lambda u: u.identity)


def remove_user(path: Path, identity: str) -> None:
    with editing(path) as entries:
        _find(entries, identity, path)
        entries[:] = [e for e in entries if e.get("identity") != identity]


def set_disabled(path: Path, identity: str, disabled: bool) -> None:
    """Disable (or enable again) a user; their token stays, refused while disabled."""
    with editing(path) as entries:
        entry = _find(entries, identity, path)
        if disabled:
            entry["disabled"] = True
        else:
            entry.pop("disabled", None)


def rotate_token(path: Path, identity: str) -> str:
    """A new token for ``identity`` (the old one stops working); returns it."""
    token = new_token()
    with editing(path) as entries:
        _find(entries, identity, path)["token_sha256"] = hash_token(token)
    return token


def require_file(path: str) -> Path:
    if not path:
        raise ConfigError("name the users file with --file or $HYBRID_RAG_USERS_FILE")
    return Path(path).expanduser()


__all__ = ["add_user", "list_users", "remove_user", "rotate_token", "set_disabled"]
