"""The synthetic knowledge base ``bench_snapshot`` measures: N chunks of real sentences
(CRUD-RAG news for Chinese, SciFact for English), 1-10 per document, with the metadata
ingest stores, served from memory as the store and the registry a snapshot reads."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from bench.bench_scale import GROUPS, sentences
from tools.kb.store.protocol import DocRecord, RegistryChanges, StoredChunk

DIM = 384
PAGE = 2000  # chunks per page of the synthetic store (as ``READ_PAGE``)
NOW = "2026-12-06T04:00:00+00:00"


def hex_id(*parts: object) -> str:
    return hashlib.blake2b("|".join(map(str, parts)).encode(), digest_size=32).hexdigest()


def corpus_documents(chunks: int, seed: int) -> list[tuple[str, str, int, str]]:
    """``(doc_id, acl, chunks, lang)`` of documents adding up to ``chunks``."""
    rng = random.Random(seed)
    out: list[tuple[str, str, int, str]] = []
    total = 0
    while total < chunks:
        folder = rng.choice([*GROUPS, "public"])
        count = min(rng.randint(1, 10), chunks - total)
        lang = "zh" if rng.random() < 0.57 else "en"
        acl = "" if folder == "public" else f"group:{folder}"
        out.append((f"{folder}/doc-{len(out):07d}.md", acl, count, lang))
        total += count
    return out


class Corpus:
    """The synthetic store: chunks made on demand from the documents' seeds."""

    def __init__(self, chunks: int, seed: int, data_dir: Path) -> None:
        self.docs = corpus_documents(chunks, seed)
        self.index = {d[0]: i for i, d in enumerate(self.docs)}
        self.versions = {d[0]: hex_id(d[0], 0)[:16] for d in self.docs}
        self.zh, self.en = sentences(data_dir)
        self.seed = seed

    def records(self) -> dict[str, DocRecord]:
        return {
            doc_id: {"version": self.versions[doc_id], "content_hash": hex_id(doc_id, "c"),
                     "source": doc_id, "acl": acl, "chunks": n, "ingested_at": NOW, "title": ""}
            for doc_id, acl, n, _ in self.docs
        }  # fmt: skip

    def text(self, rng: random.Random, lang: str) -> str:
        pool, low, high = (self.zh, 250, 480) if lang == "zh" else (self.en, 900, 1600)
        target, parts = rng.randint(low, high), list[str]()
        while sum(len(p) for p in parts) < target:
            parts.append(rng.choice(pool))
        return ("" if lang == "zh" else " ").join(parts)[:high]

    def document(self, doc: tuple[str, str, int, str], version: str) -> Iterator[StoredChunk]:
        doc_id, acl, n, lang = doc
        rng = random.Random(f"{self.seed}|{doc_id}|{version}")
        vectors = np.random.default_rng(rng.getrandbits(32)).standard_normal((n, DIM))
        content = hex_id(doc_id, version)
        for i in range(n):
            # Fresh key strings per chunk, as Chroma's reads return them.
            meta = {"".join(k): v for k, v in [
                (("doc_", "id"), doc_id), (("sour", "ce"), doc_id),
                (("head", "ing"), f"Doc {doc_id[-7:]} > Part {i // 3}" if i % 2 else ""),
                (("chunk_", "index"), i), (("total_", "chunks"), n),
                (("content_", "hash"), content), (("ver", "sion"), version),
                (("ingested_", "at"), NOW), (("is_", "table"), False), (("la", "ng"), lang),
            ]}  # fmt: skip
            if acl:
                meta["".join(("a", "cl"))] = acl
            yield StoredChunk(f"{doc_id}#{version}#{i:05d}", self.text(rng, lang), meta,
                              vectors[i].astype(np.float32))  # fmt: skip

    def scan(self) -> Iterator[StoredChunk]:
        for doc in self.docs:
            yield from self.document(doc, self.versions[doc[0]])

    def change(self, doc_id: str, step: int) -> None:
        self.versions[doc_id] = hex_id(doc_id, step)[:16]

    def document_chunks(self, doc_ids: Sequence[str]) -> Iterator[StoredChunk]:
        for d in doc_ids:
            yield from self.document(self.docs[self.index[d]], self.versions[d])


class MemoryRegistry:
    """The registry served from memory (its Chroma read is measured by ``--registry``)."""

    def __init__(self, corpus: Corpus) -> None:
        self.corpus = corpus
        self.generation_now = "g0"
        self.log: list[tuple[int, str]] = []  # (seq, doc_id) of each change

    def records(self) -> dict[str, DocRecord]:
        got = self.corpus.records()
        for d, r in got.items():
            r["version"] = self.corpus.versions[d]
        return got

    def change(self, doc_id: str, step: int) -> None:
        self.corpus.change(doc_id, step)
        self.log.append((step, doc_id))
        self.generation_now = f"g{step}"

    def changes(self, after: int | None, generation: str | None = None) -> RegistryChanges:
        seq = self.log[-1][0] if self.log else 0
        if after is None:
            return RegistryChanges(seq, self.records(), True, self.generation_now)
        docs = {d for n, d in self.log if n > after}
        found = {d: DocRecord(version=self.corpus.versions[d]) for d in docs}
        return RegistryChanges(seq, found, False, self.generation_now)

    def generation(self) -> str:
        return self.generation_now
