"""Users who sign in through an identity provider (OpenID Connect, ``server/oidc.py``).

The provider is the source of truth for them: each sign-in writes the groups and the admin
flag its claims give into the user's entry (marked ``"sso": true``), so the next request
reads the documents of the groups the provider says now. A first sign-in creates the
entry, with a random token nobody is shown (the file needs one; the user signs in through
the provider), unless creation is turned off. An entry made by hand (a token user) is
never taken over by a sign-in of the same name: a provider whose users choose their names
could otherwise hand its user someone else's documents.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from tools.access.acl import principal
from tools.access.users import User, editing, hash_token, new_token, read_users
from tools.errors import InputError


class SsoRefused(InputError):
    """A sign-in the users file does not allow (named in the message)."""


def valid_groups(groups: Iterable[str]) -> list[str]:
    """The names usable as groups (others, e.g. with spaces, are left out)."""
    kept = set()
    for group in groups:
        try:
            principal("group", group)
        except InputError:
            continue
        kept.add(group)
    return sorted(kept)


def sign_in_sso(
    path: Path, identity: str, groups: list[str] | None, admin: bool, create: bool
) -> User:
    """The user ``identity`` as the provider describes them, written to the users file;
    ``SsoRefused`` when the file does not allow it. ``groups`` None: the provider sends
    no groups (Google), so the file's groups and admin flag stay as an admin set them."""
    principal("user", identity)
    with editing(path, create=True) as entries:
        entry = next((e for e in entries if e.get("identity") == identity), None)
        if entry is None:
            if not create:
                raise SsoRefused(
                    f"{identity!r} is not in the users file, and single sign-on does not "
                    "create users here (HYBRID_RAG_OIDC_CREATE_USERS=0): ask an admin"
                )
            entry = {"identity": identity, "token_sha256": hash_token(new_token()), "sso": True}
            entries.append(entry)
        elif entry.get("sso") is not True:
            raise SsoRefused(
                f"{identity!r} is a user of the users file who does not sign in with single "
                'sign-on: an admin can mark them "sso": true'
            )
        if entry.get("disabled"):
            raise SsoRefused(f"user {identity!r} is disabled")
        if groups is not None:  # else the file's groups and admin flag stay
            entry["groups"] = groups
            if admin:
                entry["admin"] = True
            else:
                entry.pop("admin", None)
    for user in read_users(path).values():
        if user.identity == identity:
            return user
    raise SsoRefused(f"user {identity!r} vanished from the users file")  # pragma: no cover
