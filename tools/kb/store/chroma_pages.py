"""Reading the chunk collection page by page (``tools.kb.store.chroma.ChunkStore``)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from chromadb.api.models.Collection import Collection

READ_PAGE = 2000  # chunks per get when reading the whole collection
STORED = ("documents", "metadatas", "embeddings")  # what a snapshot reads of a chunk


@dataclass(frozen=True)
class StoredChunk:
    """One chunk as read back from the store."""

    chunk_id: str
    text: str
    metadata: dict[str, Any]
    vector: Any = None  # its embedding (a sequence of floats), when read with it


def read_pages(
    collection: Collection,
    guard: Callable[[str, Callable[[], Any]], Any],
    where: dict[str, Any] | None,
    what: str,
    include: Sequence[str] = STORED,
) -> Iterator[StoredChunk]:
    """The chunks ``where`` selects (None: all), ``READ_PAGE`` per read, through ``guard``
    (``StoreGuard``: a failure names the step)."""
    for offset in itertools.count(0, READ_PAGE):
        page = guard(
            what,
            lambda offset=offset: collection.get(  # type: ignore[misc]
                where=where,
                include=list(include),  # type: ignore[arg-type]
                limit=READ_PAGE,
                offset=offset,
            ),
        )
        n = len(page["ids"])
        texts, metas = page["documents"] or [""] * n, page["metadatas"] or [{}] * n
        vectors = page["embeddings"] if page["embeddings"] is not None else [None] * n
        for cid, text, meta, vec in zip(page["ids"], texts, metas, vectors, strict=True):
            yield StoredChunk(cid, text or "", dict(meta or {}), vec)
        if n < READ_PAGE:
            return
