"""Opening Chroma: embedded by default, a ``chroma run`` server when a host is set.

Two collections make one knowledge base:

* ``<name>`` holds the chunks (vectors, text, metadata). Its metadata records the
  embedding model id and dimension; opening it with another model is refused.
* ``<name>-docs`` is the document registry: one record per ``doc_id`` naming the
  version (content hash) that is *active*, plus a ``__generation__`` record that
  changes whenever the active set changes. A document's registry record and the
  generation are written by one ``upsert`` call, which Chroma applies as one
  write; that single write is the commit point of an ingest (see
  ``tools.kb.knowledge_base``).
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import chromadb
from chromadb.api import ClientAPI
from chromadb.api.models.Collection import Collection

from tools.errors import ConfigError, EmbeddingMismatchError, StoreError
from tools.kb.embeddings import spec_for_model_id

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{1,500}[A-Za-z0-9]$")
REGISTRY_SUFFIX = "-docs"


@dataclass(frozen=True)
class StoreLocation:
    """Embedded at ``path``, or a server at ``host:port`` when ``host`` is set."""

    path: Path
    host: str | None = None
    port: int = 8000
    ssl: bool = False

    def describe(self) -> str:
        if self.host:
            return f"Chroma server at {self.host}:{self.port}"
        return f"embedded Chroma at {self.path}"


def validate_collection_name(name: str) -> str:
    if not _NAME_RE.match(name) or len(name) + len(REGISTRY_SUFFIX) > 512:
        raise ConfigError(
            f"invalid collection name {name!r}: use 3-500 characters of letters, digits, "
            "'.', '_' or '-', starting and ending with a letter or digit"
        )
    return name


def open_client(location: StoreLocation) -> ClientAPI:
    settings = chromadb.Settings(anonymized_telemetry=False)
    if location.host:
        try:
            client = chromadb.HttpClient(
                host=location.host, port=location.port, ssl=location.ssl, settings=settings
            )
            client.heartbeat()
        except Exception as exc:  # chromadb raises several unrelated types here
            raise StoreError(
                f"cannot reach the Chroma server at {location.host}:{location.port}: "
                f"{type(exc).__name__}"
            ) from exc
        return client
    location.path.mkdir(parents=True, exist_ok=True)
    try:
        return chromadb.PersistentClient(path=str(location.path), settings=settings)
    except Exception as exc:
        raise StoreError(f"cannot open embedded Chroma at {location.path}: {exc}") from exc


def _reopen_hint(stored_model: str) -> str:
    # The default local model changed from USE to e5: old knowledge bases must stay openable.
    spec = spec_for_model_id(stored_model)
    return f"To open it as it is, set HYBRID_RAG_EMBEDDING={spec}. " if spec else ""


def open_collections(
    client: ClientAPI, name: str, *, model_id: str, dimension: int
) -> tuple[Collection, Collection]:
    """Return ``(chunks, registry)``, creating them if needed, refusing a model change."""
    validate_collection_name(name)
    meta: dict[str, Any] = {"embedding_model": model_id, "embedding_dimension": dimension}
    chunks = client.get_or_create_collection(
        name, metadata=meta, configuration={"hnsw": {"space": "cosine"}}, embedding_function=None
    )
    stored = chunks.metadata or {}
    if stored.get("embedding_model") != model_id or stored.get("embedding_dimension") != dimension:
        raise EmbeddingMismatchError(
            f"collection {name!r} was built with embedding model "
            f"{stored.get('embedding_model')!r} (dimension {stored.get('embedding_dimension')}); "
            f"it cannot be opened with {model_id!r} (dimension {dimension}). "
            + _reopen_hint(str(stored.get("embedding_model")))
            + "Use another collection name, or delete this one and re-ingest."
        )
    registry = client.get_or_create_collection(
        name + REGISTRY_SUFFIX, metadata={"role": "registry"}, embedding_function=None
    )
    return chunks, registry


def drop_collections(client: ClientAPI, name: str) -> None:
    for n in (name, name + REGISTRY_SUFFIX):
        with contextlib.suppress(Exception):  # absent already: nothing to drop
            client.delete_collection(n)
