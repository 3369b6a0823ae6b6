"""Document access lists and the reader a search runs as.

A document's ACL is a set of principals, ``user:NAME`` or ``group:NAME``; an empty ACL
(``public``, or no ACL given) means every reader of the knowledge base. A reader may
read a document when the document is public or shares a principal with the reader.
``Reader.everyone()`` is local use (the CLI, Python, a server without a user directory):
no filter at all; ``Reader.nobody()`` a run without an identity: not even public documents.

The ACL is stored on every chunk of a restricted document as the metadata string ``acl``
(``group:hr,user:alice``); a chunk without it is public, so a store written before ACLs
existed stays public. Searches do not ask Chroma to filter on it (a metadata ``where``
costs ~80 ms per clause in embedded Chroma): the knowledge base lists the chunks a reader
may read from its in-memory snapshot and restricts Chroma's query to those ids.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tools.access.scope import Scope
from tools.errors import InputError

PUBLIC = "public"  # the ACL keyword for "every reader"; written as an empty list
KINDS = ("user", "group")
NO_IDENTITY = "(no identity)"  # the empty scope of Reader.nobody(); no set can be named so
RULES_FILE = ".acl"  # a folder's rule file: the ACL of every file under it
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$")
MAX_RULE_BYTES = 64 * 1024  # a rule file is a line of principals, not a document

ACL = tuple[str, ...]  # sorted, unique principals; () is public


def principal(kind: str, name: str) -> str:
    """``user:NAME`` / ``group:NAME``, checked."""
    if kind not in KINDS:
        raise InputError(f"access principal kind must be one of {KINDS}, got {kind!r}")
    if not _NAME.match(name):
        raise InputError(
            f"access principal name {name!r} is not valid: use letters, digits and . _ @ + - "
            "(at most 128 characters, starting with a letter or digit)"
        )
    return f"{kind}:{name}"


def parse_acl(text: str | Iterable[str], *, where: str = "--acl") -> ACL:
    """Parse ``"group:hr, user:alice"`` (or a list of such items) into an ACL.

    ``public`` alone means every reader. Raises ``InputError`` naming the bad item and
    ``where`` it came from.
    """
    items = text.replace("\n", ",").split(",") if isinstance(text, str) else list(text)
    out: set[str] = set()
    public = False
    for raw in items:
        item = raw.strip()
        if not item:
            continue
        if item == PUBLIC:
            public = True
            continue
        kind, sep, name = item.partition(":")
        if not sep:
            raise InputError(
                f"{where}: {item!r} is not an access principal: write user:NAME or "
                "group:NAME (comma-separated), or 'public'"
            )
        try:
            out.add(principal(kind.strip(), name.strip()))
        except InputError as exc:
            raise InputError(f"{where}: {exc}") from None
    if public and out:
        raise InputError(f"{where}: 'public' cannot be combined with principals {sorted(out)}")
    if not public and not out:
        raise InputError(f"{where}: empty access list: name principals, or write 'public'")
    return tuple(sorted(out))


def read_rules_file(path: Path) -> ACL:
    """The ACL in a folder's ``.acl`` file (principals, comma- or line-separated; ``#``
    starts a comment)."""
    try:
        if path.stat().st_size > MAX_RULE_BYTES:
            raise InputError(f"{path}: access rule file is over {MAX_RULE_BYTES // 1024} KiB")
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{path}: access rule file is not UTF-8 text") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read the access rule file: {exc.strerror}") from None
    lines = [line.split("#", 1)[0] for line in text.splitlines()]
    return parse_acl(",".join(lines), where=str(path))


class FolderRules:
    """The ACL of each file: the ``.acl`` file nearest to it (its own folder, else the
    closest folder above it, up to the filesystem's root, so ingesting a sub-folder keeps
    its parent's rule), else the default (``--acl``, or public). Rule files are read once
    each; a bad one stops the ingest before anything is written.
    """

    def __init__(self, default: ACL = ()) -> None:
        self.default = default
        self._seen: dict[Path, ACL | None] = {}

    def acl_for(self, file: Path) -> ACL:
        """``file``'s ACL (``file`` as found: a link inside a folder takes that folder's
        rule)."""
        here = file.absolute().parent
        for folder in (here, *here.parents):  # bounded by the path's depth
            rule = self._rule(folder)
            if rule is not None:
                return rule
        return self.default

    def _rule(self, folder: Path) -> ACL | None:
        if folder not in self._seen:
            path = folder / RULES_FILE
            self._seen[folder] = read_rules_file(path) if path.is_file() else None
        return self._seen[folder]


def acl_metadata(acl: Sequence[str]) -> dict[str, Any]:
    """The chunk metadata that carries ``acl`` (nothing for a public document)."""
    return {"acl": ",".join(acl)} if acl else {}


@dataclass(frozen=True)
class Reader:
    """Who a search runs as: ``principals`` (``user:NAME``, ``group:NAME``), or ``None``
    for every document (local use)."""

    principals: frozenset[str] | None = None
    scope: Scope | None = None  # the run's collection: narrows, never widens

    @classmethod
    def everyone(cls) -> Reader:
        return cls(None)

    @classmethod
    def nobody(cls) -> Reader:
        """A run whose caller has no identity: it reads no document, public ones included
        (failing closed; an empty set as its scope, so every search path narrows to none)."""
        return cls(frozenset(), Scope("set", NO_IDENTITY))

    @classmethod
    def of(cls, identity: str, groups: Iterable[str] = ()) -> Reader:
        """A server user: ``user:IDENTITY`` and ``group:G`` for each group."""
        return cls(
            frozenset([principal("user", identity), *(principal("group", g) for g in groups)])
        )

    @property
    def unrestricted(self) -> bool:
        return self.principals is None and self.scope is None

    def scoped(self, scope: Scope | None) -> Reader:
        """This reader limited to ``scope`` (the same reader without one)."""
        return self if scope is None else replace(self, scope=scope)

    def key(self) -> str:
        """Identifies what this reader may see (cache keys)."""
        who = "*" if self.principals is None else ",".join(sorted(self.principals))
        return who if self.scope is None else f"{who}|{self.scope.key()}"

    def may_read(self, metadata: Mapping[str, Any]) -> bool:
        """Whether a chunk (its metadata) is visible to this reader."""
        if self.scope is not None and not self.scope.allows(metadata):
            return False
        acl = metadata.get("acl")
        if self.principals is None or not acl:
            return True
        return any(p in self.principals for p in str(acl).split(","))


def may_change(identity: str, admin: bool, owner: str) -> bool:
    """Whether ``identity`` may replace or delete a document (or see an upload job) owned
    by ``owner``: its owner or an admin. A document with no owner (ingested by the
    command line) is an admin's only. The document API's routes and the ``can_delete``
    field of its listings both ask this."""
    return admin or (bool(owner) and owner == identity)


def grant_refusal(
    admin: bool,
    principals: frozenset[str] | None,
    acl: ACL,
    users: Collection[str] | None = None,
) -> str:
    """Why a caller (``admin``, their ``principals``) may not give ``acl`` to a document,
    or "". An admin may give any access list. A user may name themselves, the groups they
    are in and any other user (sharing with a named colleague); never a group they are not
    in (that would reach people they cannot name), and never ``public``. ``users``: the
    server's identities, so a mistyped colleague is named instead of silently granted."""
    if admin:
        return ""
    if not acl:
        return "only an admin may make a document public: name users, or groups you belong to"
    mine = principals or frozenset()
    foreign = [p for p in acl if p not in mine and not p.startswith("user:")]
    if foreign:
        return f"you may share with users and with groups you belong to; not {', '.join(foreign)}"
    unknown = [p for p in acl if users is not None and p.startswith("user:") and p[5:] not in users]
    if unknown:
        return f"no such user: {', '.join(unknown)}"
    return ""
