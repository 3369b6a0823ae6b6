"""Where the project keeps its data.

Everything stored (vector store, embedding cache, run statistics) lives under one
directory: ``$HYBRID_RAG_HOME`` when set, else ``~/.local/share/hybrid-rag``
(``$XDG_DATA_HOME/hybrid-rag`` when that is set) — unless ``$CHROMA_HOST`` names a
Chroma server, which then holds the chunks and the registry. The environment is read when
a function is called, never at import time.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from tools.errors import ConfigError

ENV_HOME = "HYBRID_RAG_HOME"


def home_path(
    override: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None
) -> Path:
    """The data directory's path (``override``, else ``$HYBRID_RAG_HOME``, else under
    ``$XDG_DATA_HOME``), not created."""
    env = os.environ if environ is None else environ
    if override:
        home = Path(override)
    elif env.get(ENV_HOME):
        home = Path(env[ENV_HOME])
    else:
        xdg = env.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
        home = Path(xdg) / "hybrid-rag"
    return home.expanduser()


def data_home(override: str | os.PathLike[str] | None = None, *, create: bool = True) -> Path:
    """Return the data directory, creating it if needed (``create=False``: a reader, which
    leaves a missing one missing)."""
    home = home_path(override)
    named = "--home" if override else f"${ENV_HOME}" if os.environ.get(ENV_HOME) else "data home"
    if home.exists() and not home.is_dir():
        raise ConfigError(f"{named} {home} is a file, not a directory: name a directory")
    if not create:
        return home
    try:
        home.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(
            f"{named} {home} cannot be created: {exc.strerror or type(exc).__name__}"
        ) from exc
    return home


def chroma_server_env(
    environ: Mapping[str, str] | None = None,
) -> tuple[str | None, int | None]:
    """``($CHROMA_HOST, $CHROMA_PORT)`` of ``environ`` (default ``os.environ``), each
    ``None`` when unset or empty.

    The CLI and the graph servers (replicas) read the Chroma server's location here when
    nothing more specific (an option, the run's context) names one."""
    env = os.environ if environ is None else environ
    host = env.get("CHROMA_HOST", "").strip() or None
    raw = env.get("CHROMA_PORT", "").strip()
    if not raw:
        return host, None
    try:
        port = int(raw)
    except ValueError as exc:
        raise ConfigError(f"$CHROMA_PORT must be a number, got {raw!r}") from exc
    if not 1 <= port <= 65535:
        raise ConfigError(f"$CHROMA_PORT must be between 1 and 65535, got {port}")
    return host, port


def kb_database_env(environ: Mapping[str, str] | None = None) -> tuple[str, tuple[str, ...]]:
    """``($HYBRID_RAG_KB_DATABASE_URL, $HYBRID_RAG_KB_READ_URLS)`` of ``environ`` (default
    ``os.environ``): the PostgreSQL knowledge base's primary (empty: Chroma) and its
    replicas (comma-separated; empty: the primary serves reads). Checked where the
    knowledge base is configured (``KBConfig``), naming the bad URL."""
    env = os.environ if environ is None else environ
    replicas = env.get("HYBRID_RAG_KB_READ_URLS", "").split(",")
    return env.get("HYBRID_RAG_KB_DATABASE_URL", "").strip(), tuple(
        u.strip() for u in replicas if u.strip()
    )


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


def seconds_env(
    name: str,
    default: float,
    low: float = 0.1,
    high: float = 3600.0,
    environ: Mapping[str, str] | None = None,
) -> float:
    """A time limit in seconds from ``$name`` of ``environ`` (default ``os.environ``;
    ``default`` when unset), checked."""
    raw = (os.environ if environ is None else environ).get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError as exc:
        raise ConfigError(f"${name} must be a number of seconds, got {raw!r}") from exc
    if not low <= value <= high:
        raise ConfigError(f"${name} must be between {low:g} and {high:g} seconds, got {raw}")
    return value


# Most tokens a model writes in one call (``Context.max_output_tokens``): a weak model that
# never stops (a real 135M model wrote 3,000-4,500 tokens per call) otherwise burns the
# whole model timeout, twice with the retry.
DEFAULT_MAX_OUTPUT_TOKENS = 1024


def model_timeout(environ: Mapping[str, str] | None = None) -> float:
    """Seconds one chat-model or embedding request may take (``$HYBRID_RAG_MODEL_TIMEOUT``)."""
    return seconds_env("HYBRID_RAG_MODEL_TIMEOUT", 60.0, environ=environ)


def store_timeout() -> float:
    """Seconds one Chroma-server request may take (``$HYBRID_RAG_STORE_TIMEOUT``)."""
    return seconds_env("HYBRID_RAG_STORE_TIMEOUT", 30.0)


def write_lock_timeout() -> float:
    """Seconds a writer waits for another process's ingest of the same knowledge base
    (``$HYBRID_RAG_WRITE_LOCK_TIMEOUT``)."""
    return seconds_env("HYBRID_RAG_WRITE_LOCK_TIMEOUT", 600.0, low=0.0, high=86400.0)


def job_workers(environ: Mapping[str, str] | None = None) -> int:
    """Threads running a server's upload and sync jobs (``$HYBRID_RAG_JOB_WORKERS``,
    default 2, 1..16): jobs are shared fairly between their owners (``tools.kb.documents.scheduler``),
    so with two or more one user's slow file never holds up another user's upload."""
    raw = (os.environ if environ is None else environ).get("HYBRID_RAG_JOB_WORKERS", "").strip()
    if not raw:
        return 2
    if not raw.isdigit() or not 1 <= int(raw) <= 16:
        raise ConfigError(f"$HYBRID_RAG_JOB_WORKERS must be a whole number in 1..16, got {raw!r}")
    return int(raw)


def write_lock_dir(home: Path) -> Path:
    """Lock files of the knowledge bases' writers (one per store and collection)."""
    return home / "locks"
