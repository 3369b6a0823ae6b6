"""Groups, managed rather than typed: the groups of the users file with their members,
and a member added or removed by an admin (the ``/admin/groups`` routes).

A group exists while a user is in it (``groups`` of each user entry). A user whose entry
says it came from an identity provider (``"source": "oidc"``: signed in through SSO) has
the groups that provider gives: those are read-only here, and so is every group such a
user is in (``edit_refusal``), since the next sign-in would undo the edit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.access.acl import principal
from tools.access.users import editing, entries_of
from tools.errors import InputError

LOCAL = "local"  # a user the users file itself manages


@dataclass(frozen=True)
class Group:
    name: str
    members: tuple[str, ...]
    source: str = LOCAL  # LOCAL, or the identity provider its members come from

    @property
    def read_only(self) -> bool:
        return self.source != LOCAL

    def view(self) -> dict[str, Any]:
        return {"name": self.name, "members": list(self.members), "source": self.source,
                "read_only": self.read_only}  # fmt: skip


def source_of(entry: Mapping[str, Any]) -> str:
    return str(entry.get("source") or LOCAL)


def groups_of(entries: Sequence[Mapping[str, Any]]) -> list[Group]:
    """Every group named by a user entry, with its members, by name."""
    members: dict[str, set[str]] = {}
    sources: dict[str, str] = {}
    for entry in entries:
        for name in entry.get("groups", []):
            members.setdefault(name, set()).add(str(entry.get("identity")))
            if source_of(entry) != LOCAL:
                sources[name] = source_of(entry)
    return [Group(n, tuple(sorted(m)), sources.get(n, LOCAL)) for n, m in sorted(members.items())]


def edit_refusal(entries: Sequence[Mapping[str, Any]], group: str, identity: str) -> str:
    """Why an admin may not add ``identity`` to ``group`` or remove them from it here,
    or "" (the rule the routes and the page's read-only marks both follow)."""
    entry = next((e for e in entries if e.get("identity") == identity), None)
    if entry is None:
        known = ", ".join(sorted(str(e.get("identity")) for e in entries)) or "none"
        return f"no user {identity!r} (users: {known})"
    if source_of(entry) != LOCAL:
        return f"{identity}'s groups come from {source_of(entry)}: change them there"
    found = next((g for g in groups_of(entries) if g.name == group), None)
    if found is not None and found.read_only:
        return f"group {group!r} comes from {found.source}: manage its members there"
    return ""


class GroupRefused(InputError):
    """An edit ``edit_refusal`` does not allow."""


def list_groups(path: Path) -> list[Group]:
    return groups_of(entries_of(path))


def set_member(path: Path, group: str, identity: str, member: bool) -> Group:
    """Add ``identity`` to ``group`` (``member``) or remove them; returns the group as it
    is now (no members: it no longer exists)."""
    principal("group", group)  # a valid name, as the users file requires
    with editing(path) as entries:
        problem = edit_refusal(entries, group, identity)
        if problem:
            raise GroupRefused(problem)
        entry = next(e for e in entries if e.get("identity") == identity)
        groups = set(entry.get("groups", []))
        if not member and group not in groups:
            raise GroupRefused(f"{identity} is not in group {group!r}")
        entry["groups"] = sorted(groups | {group} if member else groups - {group})
        now = next((g for g in groups_of(entries) if g.name == group), Group(group, ()))
    return now
