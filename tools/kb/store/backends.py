"""Which store a knowledge base uses: Chroma (embedded or a server), or PostgreSQL with
pgvector when a ``database_url`` is set. Free of psycopg: the ``postgres`` extra is
imported only when a PostgreSQL knowledge base is opened."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from tools.errors import ConfigError
from tools.kb.store.chroma.chroma_store import StoreLocation
from tools.kb.store.postgres.pg_urls import parse_database_url, parse_read_urls

if TYPE_CHECKING:
    from tools.kb.embed.embeddings import EmbeddingModel
    from tools.kb.store.postgres.pg_backend import PgBackend


class PgSettings(Protocol):
    """What opening a PostgreSQL knowledge base reads of ``KBConfig``."""

    @property
    def database_url(self) -> str: ...
    @property
    def read_urls(self) -> tuple[str, ...]: ...
    @property
    def collection(self) -> str: ...
    @property
    def create(self) -> bool: ...


def checked_database(
    database_url: str, read_urls: Sequence[str], chroma_host: str | None
) -> tuple[str, ...]:
    """The replica URLs, once the primary's URL and the combination are checked."""
    if database_url:
        parse_database_url(database_url)
        if chroma_host:
            raise ConfigError("set either a Chroma host or a database_url, not both")
    elif read_urls:
        raise ConfigError("read_urls (PostgreSQL replicas) need a database_url (the primary)")
    return parse_read_urls(read_urls)


def open_postgres(home: Path, config: PgSettings, model: EmbeddingModel) -> PgBackend:
    """The knowledge base's PostgreSQL side (``tools.kb.store.postgres.pg_backend.open_pg``)."""
    try:
        from tools.kb.store.postgres.pg_backend import open_pg
    except ImportError as exc:
        raise ConfigError(
            "a PostgreSQL knowledge base needs the postgres extra: "
            "pip install 'hybrid-rag[postgres]'"
        ) from exc
    return open_pg(
        home,
        config.database_url,
        config.read_urls,
        config.collection,
        model_id=model.model_id,
        dimension=model.dimension,
        create=config.create,
    )


def backend_stats(location: StoreLocation, pg: PgBackend | None) -> dict[str, Any]:
    """Which store serves the knowledge base (``kb stats``); for PostgreSQL, the primary
    (no password) and each replica's ``lag_bytes`` and ``lag_seconds``."""
    if pg is not None:
        return pg.stats()
    if location.host:
        return {"backend": "chroma", "mode": "server", "at": f"{location.host}:{location.port}"}
    return {"backend": "chroma", "mode": "embedded", "at": str(location.path)}
