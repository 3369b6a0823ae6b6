"""Embedding models, chosen by a string (the vectors' cache: ``embedding_cache``).

Specs:

* ``local`` — the offline default bundled in a registry package (see
  ``tools.kb.embed.local_embeddings`` and docs/HOW-IT-WORKS.md, "Embedding choice").
* ``openai:<model>`` — any OpenAI-compatible embedding endpoint through
  langchain-openai (``openai:text-embedding-3-small``); ``base_url`` points it at
  Ollama, vLLM or another server. The key is read from ``OPENAI_API_KEY`` by the
  client when the model is built, never at import.

Every model carries a stable ``model_id`` (recorded in the collection so a
different model is refused) and a ``similarity_floor`` used to map cosine
similarity to a [0, 1] relevance (``tools.kb.search.fusion``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

from langchain_core.embeddings import Embeddings

from tools.errors import ConfigError, EmbeddingError
from tools.settings import model_timeout

DEFAULT_EMBEDDING = "local"
# Typical cosine similarity of unrelated texts for OpenAI's text-embedding-3
# family; used as the relevance floor for remote models unless overridden.
REMOTE_SIMILARITY_FLOOR = 0.1


T = TypeVar("T")


@dataclass
class EmbeddingModel:
    """An embeddings implementation with the facts retrieval needs about it."""

    embeddings: Embeddings
    model_id: str
    similarity_floor: float
    _dimension: int | None = None

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            self._dimension = len(self._guarded(lambda: self.embeddings.embed_query("probe")))
        return self._dimension

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return self._guarded(lambda: self.embeddings.embed_documents(list(texts)))

    def embed_query(self, text: str) -> list[float]:
        return self._guarded(lambda: self.embeddings.embed_query(text))

    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        """Several queries in one batch when the model can (the bundled ones can)."""
        batch = getattr(self.embeddings, "embed_queries", None)
        if callable(batch):
            return self._guarded(lambda: list(batch(list(texts))))
        return self._guarded(lambda: [self.embeddings.embed_query(t) for t in texts])

    def _guarded(self, call: Callable[[], T]) -> T:
        if not self.model_id.startswith("openai:"):
            return call()  # bundled models: their errors are programming errors
        try:
            return call()
        except Exception as exc:  # openai raises timeouts, connection and API errors alike
            where = _endpoint(getattr(self.embeddings, "openai_api_base", None))
            raise EmbeddingError(
                f"embedding endpoint {where} ({self.model_id}) failed: "
                f"{_remote_failure(exc, self.model_id)}"
            ) from exc


def _remote_failure(exc: Exception, model_id: str) -> str:
    """What went wrong with a remote embedding call, in words (never the request, whose
    headers hold the key)."""
    name = type(exc).__name__
    if "Timeout" in name:
        return f"{name} after {model_timeout():g} s (HYBRID_RAG_MODEL_TIMEOUT)"
    if name == "APIConnectionError":
        return f"{name}: cannot connect (is the server running, is the base URL right?)"
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        hint = {
            401: ": the server refused the key (OPENAI_API_KEY)",
            403: ": the key may not use this model (OPENAI_API_KEY)",
            404: f": no model {model_id.partition(':')[2]!r} or no embeddings API at this URL",
            429: ": rate limited or out of quota",
        }.get(status, "")
        return f"{name} (HTTP {status}){hint}"
    return name


def validate_embedding_spec(spec: str) -> None:
    """The spec's form only (nothing is loaded): 'local', 'local:<name>', 'openai:<model>'."""
    provider, sep, model = spec.strip().partition(":")
    if provider == "local" or (provider == "openai" and sep and model):
        return
    raise ConfigError(
        f"unknown embedding model {spec!r}: use 'local', 'local:<name>' or 'openai:<model>'"
    )


def embedding_model_id(spec: str) -> str:
    """The ``model_id`` ``spec`` resolves to, without building a client or loading weights."""
    spec = spec.strip()
    if spec in ("local", "") or spec.startswith("local:"):
        from tools.kb.embed import local_embeddings

        return local_embeddings.load_local_embeddings(spec.partition(":")[2] or None).model_id
    return spec


def spec_for_model_id(model_id: str) -> str | None:
    """The spec that builds the model a collection records (``embedding_model_id``'s
    inverse), or None for a model this project cannot name."""
    from tools.kb.embed import local_embeddings

    for name in ("e5", "use"):
        if local_embeddings.load_local_embeddings(name).model_id == model_id:
            return f"local:{name}"
    return model_id if model_id.startswith("openai:") else None


def make_embedding_model(
    spec: str = DEFAULT_EMBEDDING,
    *,
    base_url: str | None = None,
    similarity_floor: float | None = None,
) -> EmbeddingModel:
    """Build the model named by ``spec`` (nothing is loaded or called yet)."""
    spec = spec.strip()
    if spec in ("local", "") or spec.startswith("local:"):
        from tools.kb.embed import local_embeddings

        name = spec.partition(":")[2] or None
        emb = local_embeddings.load_local_embeddings(name)
        return EmbeddingModel(
            embeddings=emb,
            model_id=emb.model_id,
            similarity_floor=emb.similarity_floor if similarity_floor is None else similarity_floor,
            _dimension=emb.dimension,
        )
    provider, sep, model = spec.partition(":")
    if provider == "openai" and sep and model:
        from langchain_openai import OpenAIEmbeddings

        # Time-limited, one retry: a hung endpoint fails an ingest or a search with an
        # EmbeddingError naming it instead of hanging.
        # No context-length check: chunks are far below every model's limit, and the check
        # tokenises with tiktoken, which downloads its tables at run time (fails offline)
        # and sends token ids that non-OpenAI servers do not accept.
        kwargs: dict[str, Any] = {
            "model": model,
            "timeout": model_timeout(),
            "max_retries": 1,
            "check_embedding_ctx_length": False,
        }
        if base_url:
            kwargs["base_url"] = base_url
        try:
            embeddings = OpenAIEmbeddings(**kwargs)
        except Exception as exc:  # openai.OpenAIError: no key; pydantic: a bad value
            problem = (
                "OPENAI_API_KEY is not set"
                if "OPENAI_API_KEY" in str(exc) and not os.environ.get("OPENAI_API_KEY")
                else _first_line(exc)
            )
            raise ConfigError(
                f"cannot use embedding model {spec!r}: {problem} (set OPENAI_API_KEY; an "
                "OpenAI-compatible server also needs OPENAI_BASE_URL or --embedding-base-url)"
            ) from exc
        return EmbeddingModel(
            embeddings=embeddings,
            model_id=f"openai:{model}",
            similarity_floor=REMOTE_SIMILARITY_FLOOR
            if similarity_floor is None
            else similarity_floor,
        )
    raise ConfigError(
        f"unknown embedding model {spec!r}: use 'local' or 'openai:<model>' "
        "(with a base URL for Ollama, vLLM or another OpenAI-compatible server)"
    )


def _endpoint(base_url: str | None) -> str:
    """The host (and port) an OpenAI client talks to, never its credentials."""
    url = base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
    parts = urlsplit(url if "//" in url else f"//{url}")
    host = parts.hostname or url
    return f"{host}:{parts.port}" if parts.port else host


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:200]
