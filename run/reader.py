"""Whom a run searches for: the knowledge-base ``Reader`` of the caller.

On a LangGraph server the auth handler (``server/auth.py``) identifies the caller, and
the server puts that user into the run's config (``configurable.langgraph_auth_user``,
a key callers cannot set). Everything else, the CLI, Python, a server without auth, is
local use: every document. Read here, at each search, from the run's own config, so no
state, cache or settings object can carry one caller's reader into another's run.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from langgraph.config import get_config

from tools.access.acl import Reader
from tools.access.users import ALL_DOCUMENTS
from tools.kb.documents.collections import resolve_scope


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
    """The reader of a server user (``None``: local use, every document)."""
    if user is None:
        return Reader.everyone()
    if _field(user, "kb_access") == ALL_DOCUMENTS:
        return Reader.everyone()
    identity = str(_field(user, "identity") or "")
    groups = _field(user, "groups") or ()
    # Not validated: a name the ACL syntax cannot write simply matches no document.
    return Reader(frozenset([f"user:{identity}", *(f"group:{g}" for g in groups)]))


def run_operator() -> bool:
    """Whether the run's caller runs the server (an admin of the users file, or local
    use): they read how it is configured (``tools.policy.disclosure``)."""
    user = _run_user()
    return user is None or bool(_field(user, "is_admin"))


def _run_user() -> Any:
    """The server user of the run being executed, or None (local use)."""
    try:
        config = get_config()
    except RuntimeError:  # called outside a run (tests, Python helpers): local use
        return None
    return (config.get("configurable") or {}).get("langgraph_auth_user")


def run_reader(scope: str = "", home: Path | None = None) -> Reader:
    """The reader of the run being executed (every document outside a server run),
    limited to the run's collection ``scope`` (a named set is looked up in ``home``)."""
    found = resolve_scope(scope, home or Path(".")) if scope.strip() else None
    return reader_of(_run_user()).scoped(found)
