"""Helpers shared by the CLI sub-commands: opening the knowledge base, printing."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from tools.kb.knowledge_base import KBConfig, KnowledgeBase
from tools.settings import chroma_server_env, kb_database_env
from tools.text import json_terminal_safe, shown_name


def kb_environment() -> dict[str, Any]:
    """The knowledge-base settings the environment gives every command (Context field
    names): ``CHROMA_HOST``, ``CHROMA_PORT``, ``HYBRID_RAG_EMBEDDING``,
    ``HYBRID_RAG_KB_DATABASE_URL``, ``HYBRID_RAG_KB_READ_URLS``; read when called."""
    values: dict[str, Any] = {}
    database_url, read_urls = kb_database_env()
    if database_url:
        values["kb_database_url"] = database_url
    if read_urls:
        values["kb_read_urls"] = ",".join(read_urls)
    host, port = chroma_server_env()
    if host:
        values["chroma_host"] = host
    if port is not None:
        values["chroma_port"] = port
    embedding = os.environ.get("HYBRID_RAG_EMBEDDING", "").strip()
    if embedding:
        values["embedding"] = embedding
    return values


def add_kb_options(parser: argparse.ArgumentParser) -> None:
    env = kb_environment()
    group = parser.add_argument_group("knowledge base")
    group.add_argument(
        "--collection", default="knowledge", help="Chroma collection (default: knowledge)"
    )
    group.add_argument(
        "--embedding",
        default=env.get("embedding", "local"),
        help="embedding model: 'local' or 'openai:<model>' (default: $HYBRID_RAG_EMBEDDING or local)",
    )
    group.add_argument("--embedding-base-url", default=None, help="OpenAI-compatible embedding URL")
    group.add_argument(
        "--chroma-host",
        default=env.get("chroma_host"),
        help="Chroma server host (default: $CHROMA_HOST; unset = embedded Chroma)",
    )
    group.add_argument(
        "--chroma-port",
        type=int,
        default=env.get("chroma_port", 8000),
        help="Chroma server port (default: $CHROMA_PORT or 8000)",
    )
    group.add_argument(
        "--database-url",
        default=env.get("kb_database_url", ""),
        help="PostgreSQL (pgvector) knowledge base, postgresql://user@host:port/db "
        "(default: $HYBRID_RAG_KB_DATABASE_URL; unset = Chroma)",
    )
    group.add_argument(
        "--read-urls",
        default=env.get("kb_read_urls", ""),
        help="comma-separated replica URLs serving reads (default: $HYBRID_RAG_KB_READ_URLS)",
    )


def kb_config(args: argparse.Namespace) -> KBConfig:
    return KBConfig(
        home=args.home,
        collection=args.collection,
        embedding=args.embedding,
        embedding_base_url=args.embedding_base_url,
        chroma_host=args.chroma_host,  # with a database URL too: a ConfigError names both
        chroma_port=args.chroma_port,
        database_url=args.database_url,
        read_urls=tuple(args.read_urls.split(",")) if args.database_url else (),
        # Only commands that write (ingest, the evaluation indexes) create a collection.
        create=getattr(args, "create_collection", False),
    )


def open_kb(args: argparse.Namespace) -> KnowledgeBase:
    return KnowledgeBase(kb_config(args))


def print_json(data: Any) -> None:
    text = json.dumps(data, ensure_ascii=False, indent=2, default=str)
    sys.stdout.write(json_terminal_safe(text) + "\n")  # lossless: controls as \u escapes


HEARTBEAT_S = 5.0  # seconds between plain progress lines while one item takes long


class ProgressBar:
    """A one-line progress bar on stderr (plain lines when stderr is not a terminal)."""

    def __init__(self, label: str, width: int = 30) -> None:
        self.label = label
        self.width = width
        self.tty = sys.stderr.isatty()
        self._last_pct = -1
        self._started = time.monotonic()
        self._last_line = self._started

    def eta(self, done: int, total: int) -> str:
        """Time left at the rate so far ("" until there is a rate to go by)."""
        elapsed = time.monotonic() - self._started
        if done <= 0 or done >= total or elapsed < 1.0:
            return ""
        left = elapsed / done * (total - done)
        return f"ETA {int(left // 60)}:{int(left % 60):02d}"

    def __call__(self, done: int, total: int, item: str) -> None:
        pct = 100 if total == 0 else done * 100 // total
        eta = self.eta(done, total)
        if self.tty:
            filled = self.width * pct // 100
            bar = "#" * filled + "-" * (self.width - filled)
            # the end of a long item is what moves ("docs/…/big.md: chunk 1,280/39,116")
            item = shown_name(item)
            shown = item if len(item) <= 30 else "…" + item[-29:]
            sys.stderr.write(f"\r{self.label} [{bar}] {done}/{total} {eta:<10} {shown:<30}")
            if done >= total:
                sys.stderr.write("\n")
            sys.stderr.flush()
        elif pct // 10 != self._last_pct // 10 or done >= total:
            self._last_pct = pct
            self._last_line = time.monotonic()
            print(f"{self.label}: {done}/{total} ({pct}%) {eta}".rstrip(), file=sys.stderr)
        elif time.monotonic() - self._last_line >= HEARTBEAT_S:
            # a long file: say what is happening inside it, every few seconds
            self._last_line = time.monotonic()
            line = f"{self.label}: {done}/{total} ({pct}%) {shown_name(item)}"
            print(line.rstrip(), file=sys.stderr)
