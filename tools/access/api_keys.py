"""API keys a user makes for themselves (agent-chat-ui, MCP clients, scripts).

A key stands for its user exactly as the user's token does (``key_user``: the one lookup
both the graphs' auth handler and the document API call), until it is revoked (its entry
removed), expires, or its user is disabled or removed. Stored hashed in the users file
(``tools.access.key_records``), edited under its lock like every other change
(``tools.access.users.editing``); the key is answered once, by the request that made it.
"""

from __future__ import annotations

import secrets
import time
import unicodedata
from pathlib import Path
from typing import Any

from tools.access.acl import may_change
from tools.access.key_records import KEY_PREFIX, ApiKey, key_of
from tools.access.users import User, UserDirectory, editing, entries_of, hash_token
from tools.errors import InputError

MAX_KEYS = 20  # per user: a key is made by hand, one per client
MAX_NAME = 60
MAX_DAYS = 3650
DAY_S = 86400.0


class KeyNotFound(InputError):
    """No key of that id the caller may see."""


def key_user(directory: UserDirectory, token: str, now: float | None = None) -> User | None:
    """The user an API key stands for (disabled or not, as ``UserDirectory.lookup``
    answers a token), or None: not a key, revoked, expired, or its user removed."""
    key = directory.key(token)
    if key is None or key.expired(time.time() if now is None else now):
        return None
    return directory.named(key.identity)


def check_name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip():
        raise InputError("name: give the key a name (what it is for, e.g. 'agent-chat-ui')")
    name = name.strip()
    if len(name) > MAX_NAME or any(unicodedata.category(c).startswith("C") for c in name):
        raise InputError(f"name: at most {MAX_NAME} characters, without control characters")
    return name


def check_days(days: Any) -> float | None:
    """Days until the key expires (None: never)."""
    if days is None or days == "":
        return None
    if isinstance(days, bool) or not isinstance(days, int | float) or not 0 < days <= MAX_DAYS:
        raise InputError(f"expires_days must be a number of days in 1..{MAX_DAYS}, or null")
    return float(days)


def create_key(
    path: Path, identity: str, name: str, days: float | None = None, now: float | None = None
) -> tuple[ApiKey, str]:
    """A new key for ``identity``: the stored record and the key, which only its hash
    keeps afterwards."""
    now = time.time() if now is None else now
    key_id = secrets.token_hex(4)
    secret = f"{KEY_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
    expires = None if days is None else round(now + days * DAY_S)
    stored = {"id": key_id, "name": check_name(name), "sha256": hash_token(secret),
              "created": round(now), "expires": expires}  # fmt: skip
    with editing(path) as entries:
        entry = next((e for e in entries if e.get("identity") == identity), None)
        if entry is None:
            raise InputError(f"no user {identity!r}")
        keys = entry.setdefault("api_keys", [])
        if len(keys) >= MAX_KEYS:
            raise InputError(f"{identity} has {MAX_KEYS} keys already: revoke one first")
        keys.append(stored)
    return key_of(identity, stored, "new key")[1], secret


def list_keys(path: Path, identity: str | None = None) -> list[ApiKey]:
    """The keys of ``identity`` (None: everyone's), newest first."""
    found = [
        key_of(str(e.get("identity")), item, "api_keys")[1]
        for e in entries_of(path)  # validated: a broken file is named, not half-read
        if identity is None or e.get("identity") == identity
        for item in e.get("api_keys", [])
    ]
    return sorted(found, key=lambda k: (-k.created, k.key_id))


def revoke_key(path: Path, key_id: str, identity: str, admin: bool) -> ApiKey:
    """Remove key ``key_id``: its owner's, or anyone's for an admin (the document rule,
    ``may_change``). Another user's key is "not found" to a non-admin."""
    with editing(path) as entries:
        for entry in entries:
            owner = str(entry.get("identity"))
            keys = entry.get("api_keys", [])
            for n, item in enumerate(keys):
                if item.get("id") == key_id and may_change(identity, admin, owner):
                    del keys[n]
                    return key_of(owner, item, "api_keys")[1]
    raise KeyNotFound(f"no key {key_id!r}")
