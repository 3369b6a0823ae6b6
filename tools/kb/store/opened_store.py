"""The store one knowledge base opened: Chroma (embedded or a server) or PostgreSQL with a
``database_url``, its chunks and registry (``tools.kb.store.protocol``), and other
processes' commits followed (an embedded Chroma is reopened when one moved the store)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tools.kb.embed.embeddings import EmbeddingModel
from tools.kb.store.backends import PgSettings, backend_stats, open_postgres
from tools.kb.store.chroma import chroma_store as chroma
from tools.kb.store.chroma.chroma_registry import ChromaRegistry
from tools.kb.store.chroma.chroma_store import ChromaChunkStore, StoreLocation
from tools.kb.store.protocol import ChunkStore, Registry
from tools.kb.store.writer_lock import lock_path, writer_lock
from tools.settings import write_lock_dir, write_lock_timeout

if TYPE_CHECKING:  # the postgres extra: imported only when a database_url is set
    from tools.kb.store.postgres.pg_backend import PgBackend


class OpenedStore:
    """The chunks and the registry of one knowledge base, in the backend its settings
    name; ``lock`` is the knowledge base's (writers and snapshot rebuilds)."""

    def __init__(
        self,
        home: Path,
        location: StoreLocation,
        config: PgSettings,
        model: EmbeddingModel,
        lock: contextlib.AbstractContextManager[Any],
    ) -> None:
        self.home, self.location, self.config, self.model = home, location, config, model
        self._lock = lock
        self.pg: PgBackend | None = None
        self._chroma: tuple[ChromaChunkStore, ChromaRegistry] | None = None
        self.on_reopen: Callable[[], None] | None = None  # after a reopen (the searches' caches)
        self.chunks, self.registry = self._open_backend()

    def follow_from_now(self) -> None:
        """Start following other processes' commits (the CLI beside a server): from the
        generation the store has now (see :meth:`follow_writers`)."""
        self._seen_generation = self.registry.generation()
        if self.location.host is None:
            self.chunks.on_stale = self.reopen

    def _open_backend(self) -> tuple[ChunkStore, Registry]:
        """The chunk store and registry: Chroma, or PostgreSQL with a ``database_url``."""
        if not self.config.database_url:
            chunks, registry = self._open_chroma()
            guard = chroma.StoreGuard(self.location)
            self._chroma = (ChromaChunkStore(chunks, guard), ChromaRegistry(registry, guard))
            return self._chroma
        self.pg = open_postgres(self.home, self.config, self.model)
        return self.pg.chunks, self.pg.registry

    def describe(self) -> str:
        """Where the knowledge base lives, as messages name it (no password)."""
        return self.pg.location.describe() if self.pg else self.location.describe()

    def _open_chroma(self) -> tuple[Any, Any]:
        """The Chroma client and the two collections (chunks, registry)."""
        # Two processes opening a new embedded store at once race in Chroma's own set-up
        # ("table collections already exists"): opening it is serialised like writing. A
        # server sets itself up once.
        opening = lock_path(write_lock_dir(self.home), self.location.describe(), "")
        with (
            writer_lock(opening, timeout=write_lock_timeout(), what="the store", best_effort=True)
            if self.location.host is None
            else contextlib.nullcontext()
        ):
            self._client = chroma.open_client(self.location)
            if not self.config.create:
                chroma.require_collection(
                    self._client, self.config.collection, self.location.describe()
                )
            return chroma.open_collections(
                self._client,
                self.config.collection,
                model_id=self.model.model_id,
                dimension=self.model.dimension,
            )

    def writing(self) -> contextlib.AbstractContextManager[Any]:
        """The backend's own side of a write (PostgreSQL: its writer lock)."""
        return self.pg.writing() if self.pg else contextlib.nullcontext()

    def follow_writers(self) -> str | None:
        """Reopen embedded Chroma when another process committed since this instance last
        looked (the registry's generation moved, and not by this instance's commit): its
        in-memory vector index would miss the new chunks and fail on the replaced ones.
        Checked at every snapshot (each search) and before every write, so a commit by
        the CLI, a sync or another server is searched by the next question. A Chroma
        server serves every process the same store: nothing to do. Caller holds the lock."""
        if self.location.host is not None or self.pg is not None:
            return None
        now = self.registry.generation()
        if now not in (self._seen_generation, self.registry.written):
            self.reopen()
        self._seen_generation = now
        return now  # the generation read (the snapshot need not read it again)

    def reopen(self) -> None:
        with self._lock:
            self._client = chroma.reopen_client(self.location)
            chunks, registry = chroma.open_collections(
                self._client,
                self.config.collection,
                model_id=self.model.model_id,
                dimension=self.model.dimension,
            )
            assert self._chroma is not None  # embedded Chroma: the only store reopened
            self._chroma[0].collection, self._chroma[1].collection = chunks, registry
            if self.on_reopen is not None:
                self.on_reopen()

    def drop(self) -> None:
        """Delete both collections (caller holds the knowledge base's writer lock)."""
        if self.pg is not None:
            self.pg.drop()
        else:
            chroma.drop_collections(self._client, self.config.collection)

    def stats(self) -> dict[str, Any]:
        """Which store serves the knowledge base (``kb stats``)."""
        return backend_stats(self.location, self.pg)

    def close(self) -> None:
        if self.pg is not None:
            self.pg.close()
