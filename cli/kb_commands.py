"""``ingest``, ``search`` and ``kb stats`` / ``kb delete``."""

from __future__ import annotations

import argparse
from typing import Any

from cli.common import ProgressBar, add_kb_options, open_kb, print_json
from tools.access.acl import Reader, parse_acl
from tools.answer.sources import describe_location, location_fields
from tools.errors import ConfigError, InputError
from tools.kb.ingest.formats import LoadLimits
from tools.kb.ingest.loaders import SUPPORTED_SUFFIXES
from tools.kb.knowledge_base import SEARCH_MODES
from tools.kb.search.rerankers import make_reranker, rerank_chunks
from tools.settings import data_home
from tools.text import shown_name


def register(subparsers: Any) -> None:
    register_ingest(subparsers)
    register_search(subparsers)
    register_kb(subparsers)


def register_ingest(subparsers: Any) -> None:
    ingest = subparsers.add_parser("ingest", help="add or update documents in the knowledge base")
    ingest.add_argument(
        "paths",
        nargs="+",
        help=f"files or directories ({', '.join(sorted(SUPPORTED_SUFFIXES))})",
    )
    ingest.add_argument(
        "--max-file-mb",
        type=float,
        default=None,
        help="skip files larger than this (default: $HYBRID_RAG_MAX_FILE_MB or 100)",
    )
    ingest.add_argument(
        "--max-sheet-rows",
        type=int,
        default=None,
        help="rows indexed per spreadsheet sheet or CSV file "
        "(default: $HYBRID_RAG_MAX_SHEET_ROWS or 10000)",
    )
    ingest.add_argument(
        "--no-prune",
        action="store_true",
        help="keep documents whose files disappeared from the named directories",
    )
    ingest.add_argument(
        "--follow-links",
        action="store_true",
        help="follow symbolic links that point out of the named folders (default: skip them)",
    )
    ingest.add_argument(
        "--acl",
        help="who may read these files on a server with users: comma-separated user:NAME "
        "and group:NAME, or 'public' (default: public; a folder's .acl file overrides it)",
    )
    ingest.add_argument("--json", action="store_true", help="print the summary as JSON")
    add_kb_options(ingest)
    ingest.set_defaults(func=cmd_ingest, create_collection=True)


def register_search(subparsers: Any) -> None:
    search = subparsers.add_parser("search", help="search the knowledge base")
    search.add_argument("query")
    search.add_argument("--mode", choices=SEARCH_MODES, default="hybrid")
    search.add_argument("-k", type=int, default=5, help="number of results (default 5)")
    search.add_argument("--doc-id", action="append", help="restrict to this doc_id (repeatable)")
    search.add_argument("--json", action="store_true")
    search.add_argument("--rerank", default="none", help="none | lexical | cross-encoder:<model>")
    search.add_argument(
        "--as",
        dest="as_principals",
        metavar="PRINCIPALS",
        help="search only what these principals may read, e.g. user:alice,group:hr "
        "(what that server user sees; default: every document)",
    )
    add_kb_options(search)
    search.set_defaults(func=cmd_search)


def register_kb(subparsers: Any) -> None:
    kb = subparsers.add_parser("kb", help="inspect or change the knowledge base")
    kb_sub = kb.add_subparsers(dest="kb_command", required=True, metavar="ACTION")
    stats = kb_sub.add_parser("stats", help="documents, chunks, languages, embedding model")
    stats.add_argument("--json", action="store_true")
    add_kb_options(stats)
    stats.set_defaults(func=cmd_stats)
    migrate = kb_sub.add_parser(
        "migrate",
        help="copy this home's embedded knowledge base into PostgreSQL (vectors copied, "
        "not re-embedded; run again to resume)",
    )
    migrate.add_argument("--to", required=True, metavar="URL", help="postgresql://user@host/db")
    migrate.add_argument("--collection", default="knowledge", help="(default: knowledge)")
    migrate.add_argument(
        "--index-memory",
        type=int,
        default=4096,
        metavar="MB",
        help="most memory the database server may use to build the vector index at the "
        "end (default 4096: 1M chunks of 384 dimensions need ~2.4 GB to build in memory)",
    )
    migrate.set_defaults(func=cmd_migrate)
    delete = kb_sub.add_parser("delete", help="remove a document by doc_id")
    delete.add_argument("doc_id")
    add_kb_options(delete)
    delete.set_defaults(func=cmd_delete)


def cmd_ingest(args: argparse.Namespace) -> int:
    limits = LoadLimits.from_env(max_file_mb=args.max_file_mb, max_sheet_rows=args.max_sheet_rows)
    acl = parse_acl(args.acl) if args.acl is not None else ()  # named before the store opens
    with open_kb(args) as kb:
        report = kb.ingest(
            args.paths,
            prune=not args.no_prune,
            progress=ProgressBar("ingest"),
            limits=limits,
            follow_links=args.follow_links,
            acl=acl,
        )
    if args.json:
        print_json(
            {
                "added": report.added,
                "updated": report.updated,
                "unchanged": report.unchanged,
                "deleted": report.deleted,
                "skipped": [{"source": s.source, "reason": s.reason} for s in report.skipped],
                "notes": [{"source": n.source, "note": n.note} for n in report.notes],
                "chunks_written": report.chunks_written,
                "seconds": round(report.seconds, 3),
            }
        )
        return 0
    print(report.summary())
    for label, items in (
        ("added", report.added),
        ("updated", report.updated),
        ("deleted", report.deleted),
    ):
        for doc_id in items:
            print(f"  {label:<8} {shown_name(doc_id)}")
    for skipped in report.skipped:  # names escaped: a file name cannot forge a line
        print(f"  skipped  {shown_name(skipped.source)}: {shown_name(skipped.reason)}")
    for note in report.notes:
        print(f"  note     {shown_name(note.source)}: {shown_name(note.note)}")
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    if args.k < 1:  # arguments first: a bad one is named before any store is opened
        raise ConfigError(f"k must be >= 1, got {args.k}")
    reader = (  # `--as ""` is an empty list (an error), not "no restriction"
        Reader(frozenset(parse_acl(args.as_principals, where="--as")))
        if args.as_principals is not None
        else None
    )
    with open_kb(args) as kb:
        reranker = make_reranker(args.rerank)  # before searching: a missing model fails fast
        results = kb.search(
            args.query, max(args.k, 20), mode=args.mode, doc_ids=args.doc_id, reader=reader
        )
        results = rerank_chunks(args.query, results, reranker, args.k)
    if args.json:
        print_json(
            [
                {
                    "rank": i,
                    "chunk_id": r.chunk_id,
                    "doc_id": r.doc_id,
                    "heading": r.heading,
                    "relevance": round(r.relevance, 4),
                    "fused_score": round(r.fused_score, 5),
                    "vector_score": None if r.vector_score is None else round(r.vector_score, 4),
                    "vector_relevance": round(r.vector_relevance, 4),
                    "bm25_score": round(r.bm25_score, 4),
                    "bm25_relevance": round(r.bm25_relevance, 4),
                    **location_fields(r.metadata),
                    "text": r.text,
                }
                for i, r in enumerate(results, start=1)
            ]
        )
        return 0
    if not results and reader is not None:
        print(f"no results that {args.as_principals} may read")
    elif not results:
        print("no results (is the knowledge base empty? run 'hybrid-rag ingest PATH')")
    for i, r in enumerate(results, start=1):
        vec = "-" if r.vector_score is None else f"{r.vector_score:.3f}"
        where = shown_name(describe_location(r.metadata))
        print(
            f"{i}. {shown_name(r.doc_id)}{' ' + where if where else ''} "
            f"§ {shown_name(r.heading or '(top)')}  "
            f"relevance={r.relevance:.3f} "
            f"fused={r.fused_score:.4f} vector={vec} (rel {r.vector_relevance:.3f}) "
            f"bm25={r.bm25_score:.3f} (rel {r.bm25_relevance:.3f})"
        )
        snippet = " ".join(r.text.split())
        print(f"   {snippet[:200]}{'…' if len(snippet) > 200 else ''}")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    with open_kb(args) as kb:
        stats = kb.stats()
    if args.json:
        print_json(stats)
        return 0
    for key in (
        "collection",
        "store",
        "embedding_model",
        "embedding_dimension",
        "documents",
        "chunks",
        "stale_chunks",
        "restricted_documents",
    ):
        print(f"{key:<20} {stats[key]}")
    print(f"{'languages':<20} {stats['languages']}")
    backend = stats["backend"]
    where = backend.get("primary") or backend.get("at")
    print(f"{'backend':<20} {backend['backend']} {backend.get('mode', 'primary')} {where}")
    for replica in backend.get("replicas", []):
        lag = (
            f"lag_bytes={replica['lag_bytes']} lag_seconds={replica['lag_seconds']}"
            if replica["status"] != "unreachable"
            else "unreachable"
        )
        print(f"{'replica':<20} {replica['replica']} {lag}")
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    with open_kb(args) as kb:
        removed = kb.delete(args.doc_id)
    print(f"deleted {shown_name(args.doc_id)} ({removed} chunks)")
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    from tools.kb.store.postgres.pg_urls import parse_database_url

    parse_database_url(args.to, "--to")  # named before anything is opened
    from tools.kb.store.pg_migrate import migrate  # the postgres extra

    if args.index_memory < 64:
        raise InputError(f"--index-memory is in MB and at least 64, got {args.index_memory}")
    home = data_home(args.home, create=False)
    report = migrate(home, args.to, args.collection, progress=ProgressBar("migrate"),
                     index_memory_cap_mb=args.index_memory)  # fmt: skip
    built = ""
    if report.index_built_s is not None:
        built = f"; vector index built in {report.index_built_s:.1f} s"
    print(
        f"migrated {args.collection!r} to {report.target}: {report.chunks} chunks "
        f"({report.copied} copied this run), {report.documents} documents; counts verified"
        f"{built}"
    )
    return 0
