"""Whom a run searches for: the knowledge-base ``Reader`` of the caller.

Identity travels in one key, ``configurable.langgraph_auth_user``, and only a trusted
party sets it:

* on a server, the server itself, from the verified credential (``server/auth.py``);
  no client may send it or any other key that names identity or access
  (``server/request_guard.py`` refuses them on both servers);
* in-process (the CLI, Python), the graph: ``graph/`` binds :data:`LOCAL_OPERATOR` to
  the graphs it exports for local use. The graphs a server serves are compiled without
  it.

The reader **fails closed**: a run with no identity, or one the server could not name,
reads no document at all (``Reader.nobody()``), never every document. Read here, at
each search, from the run's own config, so no state, cache or settings object can carry
one caller's reader into another's run.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from langgraph.config import get_config

from tools.access.acl import Reader
from tools.access.users import ALL_DOCUMENTS
from tools.kb.documents.collections import resolve_scope

AUTH_USER_KEY = "langgraph_auth_user"
# Who runs an in-process graph: the operator of the data home, who reads its files anyway.
LOCAL_OPERATOR: Mapping[str, Any] = {
    "identity": "local",
    "kb_access": ALL_DOCUMENTS,
    "is_admin": True,
}


def local_operator_config() -> dict[str, Any]:
    """The config an in-process graph is bound to: the local operator as its caller."""
    return {"configurable": {AUTH_USER_KEY: dict(LOCAL_OPERATOR)}}


def _field(user: Any, name: str) -> Any:
    # The server hands the user over as a dict, or wrapped (attributes and/or items).
    if isinstance(user, Mapping):
        return user.get(name)
    value = getattr(user, name, None)
    if value is None:
        try:
            value = user[name]
        except (KeyError, TypeError, IndexError):
            return None
    return value


def reader_of(user: Any) -> Reader:
    """The reader of a run's caller; no caller, or one without an identity, reads
    nothing."""
    if user is None:
        return Reader.nobody()
    identity = _field(user, "identity")
    if not isinstance(identity, str) or not identity.strip():
        return Reader.nobody()
    if _field(user, "kb_access") == ALL_DOCUMENTS:
        return Reader.everyone()
    groups = _field(user, "groups") or ()
    if isinstance(groups, str):  # one group, not its letters
        groups = (groups,)
    # Not validated: a name the ACL syntax cannot write simply matches no document.
    return Reader(frozenset([f"user:{identity}", *(f"group:{g}" for g in groups)]))


def run_operator() -> bool:
    """Whether the run's caller runs the server (an admin of the users file, or the local
    operator): they read how it is configured (``tools.policy.disclosure``)."""
    user = _run_user()
    return user is not None and _field(user, "is_admin") is True


def _run_user() -> Any:
    """The caller of the run being executed, or None (no identity)."""
    try:
        config = get_config()
    except RuntimeError:  # called outside a run: nobody
        return None
    return (config.get("configurable") or {}).get(AUTH_USER_KEY)


def run_reader(scope: str = "", home: Path | None = None) -> Reader:
    """The reader of the run being executed (nobody outside a run), limited to the run's
    collection ``scope`` (a named set is looked up in ``home``)."""
    reader = reader_of(_run_user())
    if reader.principals is not None and not reader.principals:
        return reader  # nobody: no scope can widen it, and none need be read
    found = resolve_scope(scope, home or Path(".")) if scope.strip() else None
    return reader.scoped(found)
