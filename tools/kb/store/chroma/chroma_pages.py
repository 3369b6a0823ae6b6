"""Reading the chunk collection page by page (``ChromaChunkStore``, ``kb migrate``)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from chromadb.api.models.Collection import Collection

from tools.kb.store.protocol import READ_PAGE, StoredChunk

STORED = ("documents", "metadatas", "embeddings")  # what a snapshot reads of a chunk


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
