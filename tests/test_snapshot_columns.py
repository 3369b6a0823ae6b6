"""The search snapshot in columns (issue 44 at 1M chunks): an incremental update (rows
masked and appended, compacted past a dead share) equals a full rebuild after many
changes; a snapshot file of the former format is ignored and read again; the metadata
view is read-only; the registry is read by sequence number, removals included."""

from __future__ import annotations

import pickle
import random
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tools.kb.index.snapshot_cache as snapshot_module
import tools.kb.store.chroma.chroma_registry as registry_module
from tools.access.acl import Reader
from tools.kb.index.snapshot import Snapshot
from tools.kb.index.snapshot_cache import SnapshotCache
from tools.kb.search.retrievers import readable_of
from tools.kb.store.chroma.chroma_registry import ChromaRegistry
from tools.kb.store.chroma.chroma_store import (
    StoreGuard,
    StoreLocation,
    open_client,
    open_collections,
)
from tools.kb.store.protocol import DocRecord, RegistryChanges, StoredChunk

DIM = 8


class Store:
    """A registry and a chunk store in memory, with the ``Registry.changes`` contract."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.versions: dict[str, str] = {}
        self.log: list[tuple[int, str]] = []
        self.scans = 0

    def put(self, doc_id: str) -> None:
        self.versions[doc_id] = f"v{self.rng.getrandbits(32):08x}"
        self.log.append((len(self.log) + 1, doc_id))

    def drop(self, doc_id: str) -> None:
        del self.versions[doc_id]
        self.log.append((len(self.log) + 1, doc_id))

    # -- the registry -------------------------------------------------------------------

    def generation(self) -> str:
        return f"g{len(self.log)}"

    def changes(self, after: int | None, generation: str | None = None) -> RegistryChanges:
        now = self.generation()
        if after is None or (generation is not None and generation != f"g{after}"):
            records = {d: DocRecord(version=v) for d, v in self.versions.items()}
            return RegistryChanges(len(self.log), records, True, now)
        docs = {d for n, d in self.log if n > after}
        found = {d: DocRecord(version=self.versions.get(d, "")) for d in docs}
        return RegistryChanges(len(self.log), found, False, now)

    # -- the chunks ---------------------------------------------------------------------

    def chunks(self, doc_id: str) -> Iterator[StoredChunk]:
        version = self.versions[doc_id]
        rng = random.Random(f"{doc_id}{version}")
        n = rng.randint(1, 5)
        acl = rng.choice(["", "group:a", "group:b"])
        for i in range(n):
            meta: dict[str, Any] = {"doc_id": doc_id, "source": f"/src/{doc_id}",
                                    "version": version, "chunk_index": i, "total_chunks": n,
                                    "is_table": rng.random() < 0.2}  # fmt: skip
            if rng.random() < 0.9:
                meta["lang"] = rng.choice(["en", "zh"])
            if i % 2:
                meta["heading"] = f"H{rng.randint(0, 3)}"
            if rng.random() < 0.3:
                meta["page"] = rng.randint(1, 9)
            if acl:
                meta["acl"] = acl
            vector = [rng.uniform(-1, 1) for _ in range(DIM)]
            yield StoredChunk(f"{doc_id}#{version}#{i:05d}", f"text {doc_id} {i} {version}",
                              meta, vector)  # fmt: skip

    def scan(self) -> Iterator[StoredChunk]:
        self.scans += 1
        for d in sorted(self.versions):
            yield from self.chunks(d)

    def document_chunks(self, doc_ids: Sequence[str]) -> Iterator[StoredChunk]:
        for d in doc_ids:
            yield from self.chunks(d)


def _cache(store: Store, folder: Path) -> SnapshotCache:
    return SnapshotCache(registry=store, chunks=store, tokenizer=str.split,  # type: ignore[arg-type]
                         tokenizer_tag="t", directory=folder, prefix="c.")  # fmt: skip


def _content(snap: Snapshot) -> dict[str, Any]:
    """Everything a search reads, keyed by chunk id (row numbers may differ)."""
    rows = {snap.ids[i]: i for i in np.flatnonzero(snap.live)}
    assert len(rows) == len(snap.ids) == len(snap.position) == len(list(snap.metadatas))
    assert all(snap.position[c] == i for c, i in rows.items())
    codes, acls = snap.acl_table
    ann = readable_of(snap, Reader.of("ann", ["a"])).mask
    return {
        "chunks": {
            c: (snap.texts[i], snap.metadatas[i], snap.vectors[i].round(6).tolist(), acls[codes[i]])
            for c, i in rows.items()
        },
        "ann": {snap.ids[i] for i in np.flatnonzero(ann)},
        "languages": {
            lang: {snap.ids[i] for i in np.flatnonzero(snap.language_mask(lang))}
            for lang in ("en", "zh", "?")
        },
        "counts": snap.language_counts,
        "documents": {d: sorted(snap.ids[i] for i in r) for d, r in snap.by_document.items()},
        "active": snap.active,
        "iterated": sorted(zip(snap.ids, snap.texts, strict=True)),
    }


def test_incremental_updates_equal_a_full_rebuild(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Documents changed, deleted and added over many generations (the dead rows
    compacted several times on the way): every chunk's text, metadata, vector and access
    list, the language and access masks, and the rows per document equal a snapshot read
    in full from the final state, in this process and from the saved file."""
    monkeypatch.setattr(snapshot_module, "SAVE_CHANGED", 100.0)  # compaction by DEAD_SHARE
    store = Store(44)
    for i in range(60):
        store.put(f"d{i:03d}")
    cache = _cache(store, tmp_path / "inc")
    snap = cache.current()
    compactions = 0
    for step in range(40):
        for doc_id in store.rng.sample(sorted(store.versions), 3):
            store.put(doc_id)
        if step % 3 == 0:
            store.drop(store.rng.choice(sorted(store.versions)))
        if step % 4 == 0:
            store.put(f"n{step:03d}")
        rows_before = snap.table.rows
        snap = cache.current()
        compactions += snap.table.rows < rows_before
        assert store.scans == 1
    store.put(sorted(store.versions)[0])
    snap = cache.current()
    assert compactions >= 2 and snap.table.rows > len(snap.position)  # dead rows, masked
    fresh = _cache(store, tmp_path / "full").current()
    assert _content(snap) == _content(fresh)
    monkeypatch.setattr(snapshot_module, "SAVE_CHANGED", 0.0)  # saved (compacted) ...
    store.put("d001")
    saved = cache.current()
    reloaded = _cache(store, tmp_path / "inc").current()  # ... and read back
    assert store.scans == 2 and _content(saved) == _content(reloaded)
    assert saved.table.rows == len(saved.position)


def test_a_snapshot_file_of_the_former_format_is_read_again(tmp_path: Path) -> None:
    """A pickled snapshot of lists of dicts (format 1) is ignored: the store is read."""
    store = Store(7)
    for i in range(5):
        store.put(f"d{i}")
    old = object.__new__(Snapshot)
    chunks = list(store.scan())
    old.__dict__.update(generation=store.generation(), active=dict(store.versions),
                        ids=[c.chunk_id for c in chunks], texts=[c.text for c in chunks],
                        metadatas=[c.metadata for c in chunks], position={}, changed=0,
                        vectors=np.zeros((len(chunks), DIM), dtype=np.float32))  # fmt: skip
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / f"c.t.{store.generation()}.pkl").write_bytes(pickle.dumps(old))
    snap = _cache(store, tmp_path).current()
    assert store.scans == 2 and len(snap.ids) == len(chunks)
    assert {c.chunk_id: c.metadata for c in chunks} == dict(
        zip(snap.ids, snap.metadatas, strict=True)
    )


def test_the_metadata_view_is_read_only(tmp_path: Path) -> None:
    store = Store(3)
    store.put("d0")
    snap = _cache(store, tmp_path).current()
    meta = snap.metadatas[0]
    meta["doc_id"] = "changed"
    assert snap.metadatas[0]["doc_id"] == "d0"
    with pytest.raises(TypeError):
        snap.metadatas[0] = {}  # type: ignore[index]
    with pytest.raises(AttributeError):
        snap.ids.append("x")  # type: ignore[attr-defined]


def test_the_registry_is_read_by_sequence_number(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``changes`` returns the records committed since a number, a removed record as a
    tombstone (a reader that missed the tombstone still learns), and the whole registry
    once the removal log no longer reaches back that far."""
    location = StoreLocation(path=tmp_path / "chroma")
    _, docs = open_collections(open_client(location), "seqs", model_id="m", dimension=1)
    registry = ChromaRegistry(docs, StoreGuard(location))
    registry.commit({"a": {"version": "1"}, "b": {"version": "1"}})
    start = registry.changes(None)
    assert start.complete and set(start.records) == {"a", "b"} and start.seq == 1
    registry.commit({"c": {"version": "1"}})
    registry.commit({"b": {"version": ""}})  # a deletion: tombstone, then removal
    registry.forget("b")
    later = registry.changes(start.seq)
    assert not later.complete and later.seq == 4
    assert {d: r.get("version") for d, r in later.records.items()} == {"b": "", "c": "1"}
    assert registry.changes(later.seq).records == {} and len(registry.records()) == 2
    monkeypatch.setattr(registry_module, "FORGOTTEN_KEPT", 1)
    registry.commit({"a": {"version": ""}})
    registry.forget("a")
    registry.commit({"d": {"version": ""}})
    registry.forget("d")
    behind = registry.changes(later.seq)
    assert behind.complete and set(behind.records) == {"c"}


def test_a_store_the_reader_did_not_follow_is_read_whole(tmp_path: Path) -> None:
    """A store restored from a backup (or replaced) under a saved snapshot: its commit at
    the snapshot's number had another generation, or it is behind the snapshot, so the
    whole registry is read (the fault a fresh-clone run found: a restored backup still
    listed a document written after it)."""
    location = StoreLocation(path=tmp_path / "chroma")
    _, docs = open_collections(open_client(location), "lineage", model_id="m", dimension=1)
    registry = ChromaRegistry(docs, StoreGuard(location))
    registry.commit({"a": {"version": "1"}})
    first = registry.changes(None)
    registry.commit({"b": {"version": "1"}})
    registry.forget("zz")  # a removal takes a number, not a commit: still followed
    later = registry.changes(first.seq, first.generation)
    assert not later.complete and set(later.records) == {"b", "zz"}
    assert registry.changes(later.seq, later.generation).records == {}
    assert registry.changes(first.seq, "a-generation-of-another-store").complete
    assert registry.changes(later.seq + 3, later.generation).complete  # the store is behind


def test_a_loaded_snapshot_takes_its_first_change_in_place(tmp_path: Path) -> None:
    """The saved snapshot keeps the matrix's spare rows: the first change after a load
    appends in place (it copied every vector: 2 s at 200k chunks)."""
    store = Store(5)
    for i in range(40):
        store.put(f"d{i:03d}")
    saved = _cache(store, tmp_path / "c").current()
    cache = _cache(store, tmp_path / "c")
    loaded = cache.current()  # from the file
    assert store.scans == 1
    assert loaded.table.matrix.size == len(loaded.vectors) < len(loaded.table.matrix.data)
    before = loaded.table.matrix.data
    store.put("d001")
    snap = cache.current()
    # Written in place: the new rows in the same buffer, the vectors a view of it.
    assert snap.table.matrix.data is before and np.shares_memory(snap.vectors, before)
    assert snap.table.matrix.size == len(snap.vectors) > len(loaded.vectors)
    assert np.array_equal(snap.vectors[: len(loaded.vectors)], saved.vectors)
