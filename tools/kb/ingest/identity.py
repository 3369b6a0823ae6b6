"""Which files an ingest reads, and the doc_id each one gets.

A document's identity is its file: the resolved absolute path, recorded as the registry's
``source``. Its doc_id is the readable name shown in citations and taken by ``delete``:
the path relative to the folder that was named (the bare name for a file named directly).
Names are assigned (:func:`assign_doc_ids`) so that

* a file already in the registry keeps its doc_id whichever route reaches it: its
  folder, the file itself, a symbolic link;
* two different files never share one: a name held by another file gets the folder's
  name in front (``teamB/policy.md``), then a short hash of the path
  (``policy.md~3fa2c1d0``). A name whose recorded file no longer exists is taken over
  (the file moved).

Stores written before this rule keep their doc_ids (the source matches). A store that
holds one file under two doc_ids (the former folder-then-file route) is repaired by the
next ingest of that file: :func:`aliases` names the extra records to delete.

Symbolic links (:func:`find_files`) are followed only inside the named folder unless
``follow_links``; a link out of it, a dangling link, a loop (a link to itself, or to a
folder that contains it or the named folder) and anything that is not a regular file are
skipped with the reason. Hidden files and folders are ignored.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tools.errors import InputError
from tools.kb.ingest.loaders import SkippedFile
from tools.kb.store.protocol import DocRecord
from tools.text import undecodable_bytes

BAD_NAME = "file name is not valid UTF-8: rename it (convmv converts legacy encodings)"
MAX_FOLDERS = 100_000  # folders walked per ingest, links included: a bound, not a target


@dataclass(frozen=True)
class Found:
    """A file an ingest will read."""

    path: Path  # where it was found (a link, maybe)
    source: str  # the resolved absolute path: the document's identity
    name: str  # the preferred doc_id: the path relative to the named folder
    folder: str  # the named folder's name ('' for a file named directly)
    via: str = ""  # the absolute path of the link that reached it, if any


def find_files(
    paths: Iterable[str | os.PathLike[str]], *, follow_links: bool = False
) -> tuple[list[Found], list[SkippedFile]]:
    """Every file under ``paths``, and the entries skipped with their reasons.

    Raises ``InputError`` for a path that does not exist, before anything is read.
    """
    roots = [Path(p) for p in paths]
    for root in roots:
        if not root.exists():
            raise InputError(f"path does not exist: {root}")
    found: list[Found] = []
    skipped: list[SkippedFile] = []
    for root in roots:
        if root.is_file():
            source = root.resolve()
            found.append(Found(root, str(source), root.name, "", _via(root)))
        else:
            start = len(found)
            _walk(root, follow_links, found, skipped)
            # path order (as sorted Paths compare), so batches and ids are reproducible
            found[start:] = sorted(found[start:], key=lambda f: Path(f.name).parts)
    return _utf8_named(found, skipped)


def _utf8_named(
    found: list[Found], skipped: list[SkippedFile]
) -> tuple[list[Found], list[SkippedFile]]:
    """The files whose path is text, and each other one skipped with the reason: a name
    with a byte that is not UTF-8 cannot be a doc_id, a Chroma id or a line of output."""
    named: list[Found] = []
    for f in found:
        shown = undecodable_bytes(str(f.path)) or undecodable_bytes(f.source)
        if shown is None and undecodable_bytes(f.name + f.folder + f.via) is None:
            named.append(f)
        else:
            skipped.append(SkippedFile(shown or str(f.path), BAD_NAME))
    return named, skipped


def _via(path: Path) -> str:
    # The link's folder resolved (not the link): pruning compares it with resolved folders.
    return str(path.absolute().parent.resolve() / path.name) if path.is_symlink() else ""


NOT_FOLLOWED = (
    "symbolic link to {target}, outside the folder: not followed "
    "(ingest --follow-links to follow it)"
)


def _walk(root: Path, follow_links: bool, found: list[Found], skipped: list[SkippedFile]) -> None:
    top = root.resolve()
    visited = {top}
    # (real folder to list, the same folder as the user sees it under root, reached by a link)
    todo: list[tuple[Path, Path, bool]] = [(top, Path(), False)]
    while todo:
        if len(visited) > MAX_FOLDERS:
            raise InputError(f"{root}: more than {MAX_FOLDERS:,} folders; name a smaller one")
        real, shown, linked = todo.pop()
        try:
            entries = sorted(os.scandir(real), key=lambda e: e.name)
        except OSError as exc:
            skipped.append(SkippedFile(str(real), f"cannot list: {exc.strerror or exc}"))
            continue
        for entry in entries:
            if entry.name.startswith("."):
                continue
            path = Path(entry.path)
            rel = shown / entry.name
            where = str(top / rel)
            if entry.is_symlink():
                target, reason = _link_target(path)
                if target is None:
                    skipped.append(SkippedFile(where, reason))
                    continue
                if real.is_relative_to(target) or top.is_relative_to(target):
                    # following it would walk a folder that is being walked again
                    skipped.append(SkippedFile(where, f"symbolic link loop (to {target})"))
                    continue
                inside = target.is_relative_to(top)
                if not inside and not follow_links:
                    skipped.append(SkippedFile(where, NOT_FOLLOWED.format(target=target)))
                    continue
                if target.is_dir():
                    if target in visited or inside:
                        # inside: its files are indexed where they are
                        continue
                    visited.add(target)
                    todo.append((target, rel, True))
                    continue
                if target.is_file():
                    found.append(Found(path, str(target), rel.as_posix(), root.name, where))
                else:
                    skipped.append(SkippedFile(where, "not a regular file"))
                continue
            if entry.is_dir(follow_symlinks=False):
                if path not in visited:  # two followed links may share a subfolder
                    visited.add(path)
                    todo.append((path, rel, linked))
            elif entry.is_file(follow_symlinks=False):
                found.append(
                    Found(path, str(path), rel.as_posix(), root.name, where if linked else "")
                )
            else:
                skipped.append(SkippedFile(where, "not a regular file (device, pipe or socket)"))


def _link_target(link: Path) -> tuple[Path | None, str]:
    try:
        return link.resolve(strict=True), ""
    except FileNotFoundError:
        return None, f"dangling symbolic link (to {os.readlink(link)})"
    except RuntimeError:  # Python 3.11 reports a loop this way
        return None, "symbolic link loop"
    except OSError as exc:
        if exc.errno == 40:  # ELOOP
            return None, "symbolic link loop"
        return None, f"cannot follow symbolic link: {exc.strerror or exc}"


def assign_doc_ids(
    found: Sequence[Found], records: Mapping[str, DocRecord]
) -> list[tuple[Found, str]]:
    """``(file, doc_id)`` per distinct file, by the rule of the module docstring."""
    owner: dict[str, str] = {}  # doc_id -> source
    ids_of: dict[str, list[str]] = {}  # source -> doc_ids
    for doc_id, record in records.items():
        source = str(record.get("source", ""))
        owner[doc_id] = source
        ids_of.setdefault(source, []).append(doc_id)
    out: list[tuple[Found, str]] = []
    done: set[str] = set()
    direct = {f.source for f in found if not f.via}
    for f in found:
        if f.source in done or (f.via and f.source in direct):
            continue  # the same file by a second route in this ingest: the file wins
        done.add(f.source)
        doc_id = _kept_id(f, ids_of[f.source]) if f.source in ids_of else _free_name(f, owner)
        owner[doc_id] = f.source
        ids_of[f.source] = [doc_id]
        out.append((f, doc_id))
    return out


def aliases(assigned: Sequence[tuple[Found, str]], records: Mapping[str, DocRecord]) -> list[str]:
    """Records holding a just-ingested file under another doc_id (to delete)."""
    kept = {f.source: doc_id for f, doc_id in assigned}
    return [
        doc_id
        for doc_id, record in records.items()
        if str(record.get("source", "")) in kept and kept[str(record["source"])] != doc_id
    ]


def _kept_id(f: Found, ids: Sequence[str]) -> str:
    # One file under several ids (a store from before this rule): keep its natural name.
    if f.name in ids:
        return f.name
    return min(ids, key=lambda d: (len(d), d))


def _free_name(f: Found, owner: Mapping[str, str]) -> str:
    digest = hashlib.sha256(f.source.encode()).hexdigest()
    candidates = [f.name]
    if f.folder:
        candidates.append(f"{f.folder}/{f.name}")
    candidates += [f"{f.name}~{digest[:8]}", f"{f.name}~{digest}"]
    for name in candidates:
        holder = owner.get(name)
        if holder is None or holder == f.source or _vanished(holder):
            return name
    raise InputError(f"cannot name {f.source}: every candidate doc_id is taken")


def _vanished(source: str) -> bool:
    """A recorded file that no longer exists (corpus documents have no path: kept)."""
    return os.path.isabs(source) and not os.path.lexists(source)


def under(record: DocRecord, roots: Sequence[Path]) -> bool:
    """Whether a document came from one of the named folders (by the route that reached
    it: a followed link counts where the link is, not where it points)."""
    route = str(record.get("via") or record.get("source") or "")
    if not os.path.isabs(route):
        return False
    path = Path(route)
    return any(path.is_relative_to(root) for root in roots)


def copies_elsewhere(root: Path, records: Mapping[str, DocRecord]) -> list[str]:
    """Documents that are copies of ``root``'s files from another checkout of the same
    folder: recorded outside ``root`` under a path ending in ``<root's name>/<the file's
    path in root>``. (Two checkouts hold two sets of the same files, each a document of
    its own: what the demo must not show twice.)"""
    here = root.resolve()
    wanted = {
        f"/{here.name}/{p.relative_to(here).as_posix()}" for p in here.rglob("*") if p.is_file()
    }
    return sorted(
        doc_id
        for doc_id, record in records.items()
        if record.get("version")
        and os.path.isabs(source := str(record.get("source") or ""))
        and not Path(source).is_relative_to(here)
        and any(Path(source).as_posix().endswith(w) for w in wanted)
    )
