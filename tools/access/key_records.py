"""API keys as the users file stores them: each user entry's ``api_keys`` list.

::

    {"identity": "alice", ..., "api_keys": [{"id": "3f2a9c1d", "name": "ci",
        "sha256": "<64 hex digits>", "created": 1765000000, "expires": null}]}

Only the key's SHA-256 is stored (as the users' tokens are); ``id`` is the public part the
key starts with (``hrk_<id>_``), shown in listings so a user can tell keys apart. Kept in
the users file, not beside it: removing or disabling a user removes or disables their
keys in the same edit, and a server sees a revoked key gone on its next request (the file
is re-read when it changes, ``tools.access.users.UserDirectory``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.errors import ConfigError

KEY_PREFIX = "hrk_"  # every API key starts so: a user's token never does
_ID = re.compile(r"^[0-9a-f]{8,32}$")
_HEX64 = re.compile(r"^[0-9a-fA-F]{64}$")


@dataclass(frozen=True)
class ApiKey:
    """One stored key (never the key itself)."""

    key_id: str
    identity: str
    name: str
    created: float
    expires: float | None = None

    def expired(self, now: float) -> bool:
        return self.expires is not None and now >= self.expires

    def view(self, now: float) -> dict[str, Any]:
        """What a listing shows: the prefix, never the key or its hash."""
        return {
            "id": self.key_id,
            "identity": self.identity,
            "name": self.name,
            "prefix": f"{KEY_PREFIX}{self.key_id}_",
            "created": self.created,
            "expires": self.expires,
            "expired": self.expired(now),
        }


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def key_of(identity: str, item: Any, where: str) -> tuple[str, ApiKey]:
    """``(sha256, key)`` of one stored entry; ``ConfigError`` naming what is wrong."""
    if not isinstance(item, dict):
        raise ConfigError(f"{where} must be an object with id, name, sha256, created")
    key_id, name, digest = item.get("id"), item.get("name"), item.get("sha256")
    created, expires = item.get("created"), item.get("expires")
    if not isinstance(key_id, str) or not _ID.match(key_id):
        raise ConfigError(f"{where}: 'id' must be 8-32 lowercase hex digits")
    if not isinstance(name, str):
        raise ConfigError(f"{where}: 'name' must be a string")
    if not isinstance(digest, str) or not _HEX64.match(digest):
        raise ConfigError(f"{where}: 'sha256' must be 64 hex digits (a key's SHA-256)")
    if not _number(created) or not (expires is None or _number(expires)):
        raise ConfigError(f"{where}: 'created' and 'expires' must be Unix times (expires null)")
    return digest.lower(), ApiKey(key_id, identity, name, float(created or 0), expires)


def parse_keys(path: Path, raw: bytes) -> dict[str, ApiKey]:
    """Key hash -> key, over every user of the file (already validated as users)."""
    keys: dict[str, ApiKey] = {}
    for n, entry in enumerate(json.loads(raw.decode("utf-8"))["users"]):
        items = entry.get("api_keys", [])
        if not isinstance(items, list):
            raise ConfigError(f"{path}: users[{n}]: 'api_keys' must be a list")
        for m, item in enumerate(items):
            digest, key = key_of(entry["identity"], item, f"{path}: users[{n}].api_keys[{m}]")
            if digest in keys:
                raise ConfigError(f"{path}: users[{n}].api_keys[{m}] reuses another key")
            keys[digest] = key
    return keys
