"""Who calls the server's own routes (server/webapp.py), and what they may grant.

langgraph-api runs the ``auth`` handler (server/auth.py) for its own routes only; custom
routes get it only with ``http.enable_custom_route_auth``, which would also put the token
check in front of the page's static files at /ui. The document API therefore checks the
same credentials of the same users file itself (``caller``: ``server/credentials.py``), and /ui stays loadable
without one. Without a users file every caller is the local admin, as on the graphs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from starlette.requests import Request

from server.credentials import directory, resolve
from tools.access.acl import ACL, Reader, may_change
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

    def may_grant(self, acl: ACL) -> str:
        """Why this caller may not give ``acl`` to a document, or "" (an admin may give
        any; a user only principals they are, and never 'public')."""
        if self.admin:
            return ""
        if not acl:
            return "only an admin may make a document public: name principals you belong to"
        mine = self.reader.principals or frozenset()  # not None: not an admin
        foreign = [p for p in acl if p not in mine]
        if foreign:
            return (
                f"you may only grant access to principals you belong to; not {', '.join(foreign)}"
            )
        return ""

    def may_change(self, owner: str) -> bool:
        """The document rule of ``tools.access.acl.may_change``, for this caller."""
        return may_change(self.identity, self.admin, owner)


def caller(request: Request) -> Caller:
    """The caller of ``request`` (raises ``Refused`` 401/503)."""
    path = os.environ.get(USERS_FILE_ENV, "").strip()
    if not path:
        return Caller(LOCAL_USER, Reader.everyone(), admin=True)
    try:  # the graphs' rule: a bearer token or x-api-key, else the session cookie
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
    return Caller(user.identity, reader, admin=user.admin)
