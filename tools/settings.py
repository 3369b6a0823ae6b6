"""Where the project keeps its data.

Everything stored (vector store, embedding cache, run statistics) lives under one
directory: ``$HYBRID_RAG_HOME`` when set, else ``~/.local/share/hybrid-rag``
(``$XDG_DATA_HOME/hybrid-rag`` when that is set). The environment is read when a
function is called, never at import time.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_HOME = "HYBRID_RAG_HOME"


def data_home(override: str | os.PathLike[str] | None = None) -> Path:
    """Return the data directory, creating it if needed."""
    if override:
        home = Path(override)
    elif os.environ.get(ENV_HOME):
        home = Path(os.environ[ENV_HOME])
    else:
        xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
        home = Path(xdg) / "hybrid-rag"
    home = home.expanduser()
    home.mkdir(parents=True, exist_ok=True)
    return home


def chroma_path(home: Path) -> Path:
    """Directory of the embedded Chroma database."""
    return home / "chroma"


def embedding_cache_path(home: Path) -> Path:
    """SQLite file of the embedding cache."""
    return home / "embedding_cache.sqlite3"


def bm25_cache_dir(home: Path) -> Path:
    """Directory of persisted BM25 snapshots (derived from Chroma, never authoritative)."""
    return home / "bm25"


def run_stats_path(home: Path) -> Path:
    """JSON-lines file of per-run statistics."""
    return home / "runs.jsonl"
