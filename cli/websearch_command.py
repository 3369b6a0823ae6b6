"""``hybrid-rag websearch``: run one live web search and print normalised results."""

from __future__ import annotations

import argparse
import json
from typing import Any

from tools.text import json_terminal_safe, shown_name
from tools.websearch import SearchResponse, WebSearchSettings, search_sync


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "websearch",
        help="search the live web with the configured provider",
        description=(
            "Search the web and print normalised results. The provider comes from "
            "--provider or $WEBSEARCH_PROVIDER (default 'auto': the first provider "
            "with a key or URL set). Keys are read from the environment."
        ),
    )
    parser.add_argument("query", help="the search query")
    parser.add_argument(
        "--provider", help="provider name, 'auto', or a failover list like 'serper,searxng'"
    )
    parser.add_argument("--hl", help="interface language, e.g. en, zh-CN (default: from query)")
    parser.add_argument("--gl", help="two-letter country, e.g. us, cn (default: from query)")
    parser.add_argument("--num", type=int, default=10, help="number of results (default 10)")
    parser.add_argument("--page", type=int, default=1, help="result page (default 1)")
    parser.add_argument("--news", action="store_true", help="search news instead of the web")
    parser.add_argument(
        "--snippet-chars", type=int, default=280, help="snippet length (default 280)"
    )
    parser.add_argument("--json", action="store_true", help="print the full response as JSON")
    parser.set_defaults(func=run)


def format_response(resp: SearchResponse) -> str:
    """Human-readable listing: one block per result, then a provenance line."""
    lines: list[str] = []
    for r in resp.results:
        date = r.published_at or "-"
        lines.append(f"{r.rank:>2}. {shown_name(r.title)}")  # a page names itself: escaped
        lines.append(f"    {shown_name(r.url)}")
        lines.append(f"    {date} | {shown_name(r.source)} | {r.kind}")
        if r.snippet:
            lines.append(f"    {r.snippet}")
    if not resp.results:
        lines.append("(no results)")
    origin = "cache" if resp.cache_hit else f"{resp.calls} call(s), ~${resp.cost:.4f}"
    stale = ", STALE" if resp.stale else ""
    lines.append(f"-- {resp.provider} ({origin}{stale}), fetched at {resp.fetched_at}")
    lines.extend(f"warning: {w}" for w in resp.warnings)
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    # Settings are built here, so the environment is read at call time only.
    settings = WebSearchSettings.from_env(provider=args.provider, snippet_chars=args.snippet_chars)
    resp = search_sync(
        args.query,
        settings=settings,
        hl=args.hl,
        gl=args.gl,
        page=args.page,
        num=args.num,
        news=args.news,
    )
    if args.json:
        print(json_terminal_safe(json.dumps(resp.to_dict(), ensure_ascii=False, indent=2)))
    else:
        print(format_response(resp))
    return 0
