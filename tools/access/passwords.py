"""Passwords for teams without an identity provider: Argon2id hashes (``argon2-cffi``,
RFC 9106's parameters) in the users file's ``password_argon2`` field, set by
``hybrid-rag users passwd`` or an admin (``POST /admin/users/{identity}/password``).

A sign-in with an unknown identity, a user without a password or a disabled one is
verified against a dummy hash all the same, so its answer and its time are those of a
wrong password: a caller cannot learn which names exist.
"""

from __future__ import annotations

import secrets
from functools import cache
from pathlib import Path

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

from tools.access.users import User, editing
from tools.errors import InputError

MIN_LENGTH = 10  # NIST SP 800-63B asks for 8 at least; a team's shared tool gets a bit more
MAX_LENGTH = 1024  # Argon2 takes any length; this bounds the work one request can ask for
_HASHER = PasswordHasher()  # argon2id, t=3, m=64 MiB, p=4: argon2-cffi's RFC 9106 profile


def check_password(password: str) -> None:
    """``InputError`` naming what is wrong with a new password."""
    if len(password) < MIN_LENGTH:
        raise InputError(f"a password needs {MIN_LENGTH} characters at least")
    if len(password) > MAX_LENGTH:
        raise InputError(f"a password has {MAX_LENGTH} characters at most")


def hash_password(password: str) -> str:
    check_password(password)
    return _HASHER.hash(password)


@cache
def _dummy() -> str:
    """A hash no password matches, made once (not at import: it costs a hash)."""
    return _HASHER.hash(secrets.token_urlsafe(32))


def verify_login(user: User | None, password: str) -> bool:
    """Whether ``password`` signs ``user`` in; the same work whatever the reason it does not."""
    usable = user is not None and bool(user.password) and not user.disabled
    stored = user.password if usable and user is not None else _dummy()
    try:
        return _HASHER.verify(stored, password[:MAX_LENGTH]) and usable
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


def set_password(path: Path, identity: str, password: str) -> None:
    """Store ``identity``'s new password (as its hash); their sessions end (their stamp
    changes). ``InputError`` for an unknown user or a password too short or long."""
    hashed = hash_password(password)
    with editing(path) as entries:
        for entry in entries:
            if entry.get("identity") == identity:
                entry["password_argon2"] = hashed
                return
        raise InputError(f"no user {identity!r} in {path}")
