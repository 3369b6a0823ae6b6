"""``sources add|list|sync|remove|worker``: sources the knowledge base stays in sync with
(``tools.sources``)."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from cli.common import add_kb_options, open_kb, print_json
from tools.access.acl import parse_acl
from tools.errors import InputError
from tools.kb.documents.library import Library, catalog_path
from tools.sources.model import KINDS, LastSync, Source, SourceStore, interval_s
from tools.sources.sync import remove_documents, sync
from tools.sources.worker import POLL_S, run_worker
from tools.text import shown_name


def register(subparsers: Any) -> None:
    sources = subparsers.add_parser("sources", help="folders, URLs, sitemaps, S3 kept in sync")
    sub = sources.add_subparsers(dest="sources_command", required=True, metavar="ACTION")
    add = sub.add_parser("add", help="register a source (then: sources sync ID)")
    add.add_argument("id", help="a short name: lower-case letters, digits, - and _")
    add.add_argument("kind", choices=KINDS)
    add.add_argument(
        "location",
        help="folder: a path on this machine; urls: URLs separated by commas; "
        "sitemap: its URL; s3: s3://BUCKET/PREFIX",
    )
    add.add_argument("--acl", default="public", help="who may read its documents (default: public)")
    add.add_argument("--every", default="", help="sync schedule, e.g. 1h, 30m, 1d (default: none)")
    add.add_argument("--endpoint-url", default="", help="s3: an S3-compatible server's URL")
    add.add_argument("--region", default="", help="s3: the bucket's region")
    add.set_defaults(func=cmd_add)
    listing = sub.add_parser("list", help="sources and their last sync")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(func=cmd_list)
    run = sub.add_parser("sync", help="sync a source now (add, update, remove documents)")
    run.add_argument("id", nargs="?", help="the source (omit with --all)")
    run.add_argument("--all", action="store_true", help="sync every source")
    run.add_argument("--json", action="store_true", help="print the results as JSON")
    run.set_defaults(func=cmd_sync)
    remove = sub.add_parser("remove", help="forget a source and remove its documents")
    remove.add_argument("id")
    remove.add_argument("--keep-documents", action="store_true", help="leave its documents")
    remove.set_defaults(func=cmd_remove)
    worker = sub.add_parser("worker", help="sync sources on their schedules until stopped")
    worker.add_argument("--poll", type=float, default=POLL_S, help="seconds between looks")
    worker.add_argument("--passes", type=int, default=0, help="stop after N looks (0: never)")
    worker.set_defaults(func=cmd_worker)
    for p in (add, listing, run, remove, worker):
        add_kb_options(p)
        p.set_defaults(create_collection=True)


@contextlib.contextmanager
def _opened(args: argparse.Namespace) -> Iterator[tuple[Library, SourceStore]]:
    with open_kb(args) as kb:
        library = Library(kb)
        store = SourceStore(catalog_path(kb.home, kb.config.collection))
        try:
            yield library, store
        finally:
            store.close()
            library.close()


def cmd_add(args: argparse.Namespace) -> int:
    location = args.location
    if args.kind == "folder":
        folder = Path(location).expanduser().resolve()
        if not folder.is_dir():
            raise InputError(f"folder {location} does not exist or is not a folder")
        location = str(folder)
    interval_s(args.every)
    options = {k: v for k, v in (("endpoint_url", args.endpoint_url), ("region", args.region)) if v}
    source = Source(args.id, args.kind, location, parse_acl(args.acl), args.every, options)
    with _opened(args) as (_, store):
        store.add(source)
    print(
        f"source {source.id} ({source.kind} {location}) added; sync it: hybrid-rag sources sync {source.id}"
    )
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    with _opened(args) as (_, store):
        sources = store.all()
    if args.json:
        print_json([s.view() for s in sources])
        return 0
    if not sources:
        print("no sources (add one: hybrid-rag sources add ID folder PATH)")
    for s in sources:
        last = s.last_sync
        when = f"last sync {last.at}: {last.summary()}" if last else "never synced"
        print(f"{s.id:<16} {s.kind:<8} {s.location}  [{s.schedule or 'manual'}] {when}")
        for error in (last.errors if last else [])[:5]:
            print(f"{'':<18}error: {error}")
    return 0


def _print_item(name: str, doc_id: str, status: str, reason: str, chunks: int) -> None:
    if status != "unchanged":
        print(f"  {status:<9} {name}" + (f": {reason}" if reason else ""), flush=True)


def cmd_sync(args: argparse.Namespace) -> int:
    if bool(args.id) == bool(args.all):
        raise InputError("name one source, or --all")
    results: dict[str, LastSync] = {}
    with _opened(args) as (library, store):
        chosen = store.all() if args.all else [store.get(args.id)]
        if chosen == [None]:
            raise InputError(f"no source {args.id!r} (see: hybrid-rag sources list)")
        for source in chosen:
            assert source is not None
            if not args.json:
                print(f"syncing {source.id} ({source.kind} {source.location})", flush=True)
            result = sync(library, source, on_item=None if args.json else _print_item)
            store.record(source.id, result)
            results[source.id] = result
            if not args.json:
                print(f"{source.id}: {result.summary()}")
                for error in result.errors[:10]:
                    print(f"  error: {error}")
                for line in result.left_out[:10]:
                    print(f"  left out: {shown_name(line)}")
    if args.json:
        print_json({k: asdict(v) for k, v in results.items()})
    return 0 if all(r.finished for r in results.values()) else 1


def cmd_remove(args: argparse.Namespace) -> int:
    with _opened(args) as (library, store):
        source = store.get(args.id)
        if source is None:
            raise InputError(f"no source {args.id!r} (see: hybrid-rag sources list)")
        removed = 0 if args.keep_documents else remove_documents(library, source)
        store.remove(source.id)
    print(f"source {args.id} removed ({removed} documents removed)")
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    def report(source: Source, result: LastSync) -> None:
        print(f"{result.at} {source.id}: {result.summary()}", flush=True)

    if args.poll < 1:
        raise InputError(f"--poll must be at least 1 second, got {args.poll:g}")
    with _opened(args) as (library, store):
        print(f"sources worker: looking for due syncs every {args.poll:g} s", flush=True)
        run_worker(library, store, report, passes=args.passes, poll_s=args.poll)
    return 0
