"""A restricted search's vector side (issue 44: a restricted user in milliseconds at 1M
chunks): compared exactly on the contiguous slices of the reader's access lists in one
language (rows sorted by language, then access list), plus the rows appended since the
last sort, equals a brute-force comparison over every chunk the reader may read, through
changes, deletions and compactions; the store's nearest-neighbour query is not asked."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tools.kb.search.dense as dense
from tests.test_snapshot_columns import Store, _cache
from tools.access.acl import Reader
from tools.kb.index.snapshot import Snapshot
from tools.kb.search.retrievers import Filters, candidate_pool, readable_of

READERS = [Reader.of("ann", ["a"]), Reader.of("bob", ["b"]), Reader.of("eve", [])]


class NoStore:
    def nearest(self, *args: object, **kwargs: object) -> list[tuple[str, float]]:
        raise AssertionError("the store was probed; the share should be compared exactly")


def _brute(snap: Snapshot, q: np.ndarray, filters: Filters, n: int) -> list[str]:
    selection = filters.selection(snap)
    assert selection is not None
    rows = np.flatnonzero(selection)
    sims = snap.vectors[rows] @ (q / np.linalg.norm(q)).astype(np.float32)
    return [snap.ids[rows[j]] for j in np.argsort(-sims, kind="stable")[:n]]


def _check(snap: Snapshot, rng: np.random.Generator) -> int:
    compared = 0
    for reader in READERS:
        readable = readable_of(snap, reader)
        for lang in ("en", "zh"):  # a KB with unlabelled chunks is one pool
            filters = Filters(reader=reader, readable=readable, language=lang)
            q = rng.standard_normal(snap.vectors.shape[1])
            pool = candidate_pool("", q, snap, NoStore(), mode="vector",  # type: ignore[arg-type]
                                  filters=filters, n=5)  # fmt: skip
            assert list(pool.vector_found) == _brute(snap, q, filters, 5)
            compared += len(pool.vector_found)
    return compared


def test_exact_slices_equal_brute_force_through_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dense, "EXACT_LIMIT", 0)  # every share by slices or rows
    monkeypatch.setattr(dense, "PROBE_DEPTH", 0)
    rng = np.random.default_rng(44)
    store = Store(7)
    for i in range(80):
        store.put(f"d{i:03d}")
    cache = _cache(store, tmp_path / "c")
    snap = cache.current()
    # Sorted by language, then access list: each (language, list) one contiguous range.
    t = snap.table
    acl = snap.acl_table[0]
    keys = list(zip(t.lang[: t.sorted_rows].tolist(), acl[: t.sorted_rows].tolist(), strict=True))
    assert keys == sorted(keys) and t.sorted_rows == t.rows
    for (lang, code), (a, b) in snap.groups.items():
        assert set(keys[a:b]) == {(lang, code)}
    assert _check(snap, rng) > 0
    tails = 0
    for step in range(12):
        for doc_id in store.rng.sample(sorted(store.versions), 2):
            store.put(doc_id)
        if step % 3 == 0:
            store.drop(store.rng.choice(sorted(store.versions)))
        store.put(f"n{step:03d}")
        snap = cache.current()
        tails += snap.table.sorted_rows < snap.table.rows
        assert _check(snap, rng) > 0
    assert tails >= 3  # rows appended since the sort were compared by index


def test_a_few_documents_asked_for_are_compared_by_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search within two documents compares their rows, not their access lists' slices."""
    monkeypatch.setattr(dense, "EXACT_LIMIT", 0)
    monkeypatch.setattr(dense, "PROBE_DEPTH", 0)
    store = Store(8)
    for i in range(60):
        store.put(f"d{i:03d}")
    snap = _cache(store, tmp_path / "c").current()
    reader = Reader.everyone()
    wanted = ("d003", "d010")
    filters = Filters(doc_ids=frozenset(wanted), reader=reader, readable=readable_of(snap, reader))
    q = np.random.default_rng(1).standard_normal(snap.vectors.shape[1])
    pool = candidate_pool("", q, snap, NoStore(), mode="vector", filters=filters, n=50)  # type: ignore[arg-type]
    assert list(pool.vector_found) == _brute(snap, q, filters, 50)
    assert {snap.metadatas[snap.position[c]]["doc_id"] for c in pool.vector_found} == set(wanted)
