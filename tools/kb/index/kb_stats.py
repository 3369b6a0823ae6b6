"""What ``kb stats`` reports of one knowledge base: the snapshot's counts (documents,
chunks, languages, access lists) beside the store, the embedding model and the embedding
cache that serve it. Read from the snapshot's columns: the registry is not read whole."""

from __future__ import annotations

import heapq
from typing import Any

from tools.kb.embed.embedding_cache import EmbeddingCache
from tools.kb.embed.embeddings import EmbeddingModel
from tools.kb.index.snapshot import Snapshot
from tools.kb.store.opened_store import OpenedStore

STATS_LISTED = 100  # document ids in the stats: the first ones, by id


def kb_stats(
    snap: Snapshot,
    *,
    collection: str,
    store: OpenedStore,
    model: EmbeddingModel,
    cache: EmbeddingCache,
) -> dict[str, Any]:
    """The statistics of the knowledge base ``snap`` is the snapshot of."""
    stored = store.chunks.count()
    listed = heapq.nsmallest(STATS_LISTED + 1, snap.active)
    return {
        "collection": collection,
        "store": store.describe(),
        "backend": store.stats(),
        "embedding_model": model.model_id,
        "embedding_dimension": model.dimension,
        "documents": len(snap.active),
        "chunks": len(snap.ids),
        "stale_chunks": stored - len(snap.ids),
        "languages": dict(snap.language_counts),
        # The first document ids only: a list of every one grows with the KB (172k
        # at 1M chunks); the document API (GET /kb/documents) pages through them all.
        "documents_list": listed[:STATS_LISTED],
        "documents_list_truncated": len(listed) > STATS_LISTED,
        # Documents with an access list (tools.access.acl); the rest are public. From
        # the snapshot's columns: the registry is not read whole (~50 s at 180k records).
        "restricted_documents": snap.restricted_documents,
        "embedding_cache": {"hits": cache.hits, "misses": cache.misses},
    }
