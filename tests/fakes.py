"""Deterministic stand-ins for unit tests (never used by the product)."""

from __future__ import annotations

import hashlib

import numpy as np
from langchain_core.embeddings import Embeddings

from tools.embeddings import EmbeddingModel
from tools.tokenizers import make_tokenizer


class HashEmbeddings(Embeddings):
    """Bag of hashed words and character bigrams, L2-normalised: similar texts, similar vectors."""

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.calls = 0
        self.texts_embedded = 0
        self._tok = make_tokenizer("bigram")

    def _vector(self, text: str) -> list[float]:
        vec = np.zeros(self.dim, dtype=np.float64)
        for token in self._tok(text):
            h = int.from_bytes(hashlib.md5(token.encode()).digest()[:4], "little")
            vec[h % self.dim] += 1.0
        norm = np.linalg.norm(vec)
        if norm == 0:
            vec[0] = 1.0
            norm = 1.0
        return (vec / norm).tolist()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        self.texts_embedded += len(texts)
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


def hash_model(dim: int = 256, model_id: str | None = None) -> EmbeddingModel:
    emb = HashEmbeddings(dim)
    return EmbeddingModel(
        embeddings=emb,
        model_id=model_id or f"test-hash-{dim}",
        similarity_floor=0.0,
        _dimension=dim,
    )
