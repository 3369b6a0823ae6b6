"""Who calls the server's own routes (server/webapp.py), and what they may grant.

langgraph-api runs the ``auth`` handler (server/auth.py) for its own routes only; custom
routes get it only with ``http.enable_custom_route_auth``, which would also put the token
check in front of the page's static files at /ui. The document API therefore checks the
same credentials of the same users file itself (``caller``: ``server/credentials.py``), and /ui stays loadable
without one. Without a users file every caller is the local admin, as on the graphs.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from dataclasses import dataclass

from starlette.requests import Request

from server.credentials import directory, resolve
from tools.access.acl import ACL, Reader, grant_refusal, may_change
from tools.access.users import USERS_FILE_ENV
from tools.errors import ConfigError

LOCAL_USER = "local"


class Refused(Exception):
    """A request the API answers with ``status`` and ``{"error": message}``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class Caller:
    identity: str
    reader: Reader
    admin: bool
    # The user's own principals (user:, group:), an admin's too: what is shared by name
    # (a conversation) goes to these, not to the admin's read-everything ``reader``.
    principals: frozenset[str] = frozenset()

    def may_grant(self, acl: ACL, users: Collection[str] | None = None) -> str:
        """Why this caller may not give ``acl`` to a document, or "" (the rule of
        ``tools.access.acl.grant_refusal``; ``users``: the known identities)."""
        return grant_refusal(self.admin, self.reader.principals, acl, users)

    def may_change(self, owner: str) -> bool:
        """The document rule of ``tools.access.acl.may_change``, for this caller."""
        return may_change(self.identity, self.admin, owner)


def _own(identity: str) -> frozenset[str]:
    return Reader.of(identity).principals or frozenset()


def caller(request: Request) -> Caller:
    """The caller of ``request`` (raises ``Refused`` 401/503)."""
    path = os.environ.get(USERS_FILE_ENV, "").strip()
    if not path:
        return Caller(LOCAL_USER, Reader.everyone(), admin=True, principals=_own(LOCAL_USER))
    try:  # the graphs' rule (server.credentials): a token or API key, else the session
        user = resolve(directory(path), request.headers)
    except ConfigError as exc:  # a broken users file refuses everyone, and says why
        raise Refused(503, str(exc)) from None
    if user is None or user.disabled:
        raise Refused(
            401,
            "missing or unknown bearer token (Authorization: Bearer <token>), "
            "or a session that ended: sign in again",
        )
    # An admin manages every document, so reads every one through this API (the graphs
    # still answer them from their groups' documents only: server/auth.py).
    reader = Reader.everyone() if user.admin else user.reader()
    own = user.reader().principals or frozenset()
    return Caller(user.identity, reader, admin=user.admin, principals=own)
