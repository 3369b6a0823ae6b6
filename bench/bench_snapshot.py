"""The search snapshot's memory and its one-file update at 100k to 1M chunks (on demand).

A snapshot (``tools.kb.index.snapshot``) of N synthetic chunks is built directly, without Chroma
or the lexical index, so 1M chunks take minutes: real sentences (CRUD-RAG news for Chinese,
SciFact for English, as ``bench_scale``), chunks of 250-480 characters (Chinese) or
900-1,600 (English), 1-10 chunks per document (5.3 on average: 1M chunks are ~190k
documents), eight group folders and a public one, and the metadata ingest stores
(``doc_id``, ``source``, ``heading``, ``chunk_index``, ``total_chunks``, ``content_hash``,
``version``, ``ingested_at``, ``is_table``, ``lang``, ``acl`` on group documents), with
fresh key strings per chunk as Chroma returns them. Reported per size (each in a fresh
process):

* bytes per chunk of each part the snapshot holds (a deep ``sys.getsizeof`` walk; numpy
  arrays by ``nbytes``, a memory-mapped one apart), and the process's RSS growth;
* the time of a one-document change (``SnapshotCache._update``), split into its steps
  (``timed_update``: the statements of the code measured; the commit before the redesign,
  3b50d6d, has the former ones),
  with the registry and the store served from memory (the registry's own read is measured
  apart: ``--registry``);
* the time of the derived properties the next search computes (languages, access lists,
  chunks per document).

``--registry N`` instead writes N document records to an embedded Chroma registry (pages
of 5,000, as ingest commits) and times ``Registry.records()``, the read a one-file change
made of the whole registry.

Usage::

    nice .venv/bin/python -m bench.bench_snapshot --sizes 100000 300000 1000000
    nice .venv/bin/python -m bench.bench_snapshot --chunks 100000     # one size, here
    nice .venv/bin/python -m bench.bench_snapshot --registry 200000
"""

from __future__ import annotations

import functools
import gc
import json
import mmap
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.bench_scale import rss_mb
from bench.harness import REPO, parser, rerun, write_json
from bench.snapshot_corpus import DIM, Corpus, MemoryRegistry, corpus_documents, hex_id


def deep_size(obj: object, seen: set[int] | None = None) -> tuple[int, int]:
    """(bytes in memory, bytes memory-mapped) of ``obj`` and what it holds."""
    seen = set() if seen is None else seen
    stack, size, mapped = [obj], 0, 0
    while stack:
        o = stack.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        if isinstance(o, np.ndarray):
            base = o.base if o.base is not None else o
            if isinstance(base, np.memmap) or isinstance(o, np.memmap):
                mapped += o.nbytes
            else:
                size += o.nbytes if o.base is None or id(o.base) not in seen else 0
            continue
        if isinstance(o, mmap.mmap):  # the saved texts (``TextColumn``)
            mapped += len(o)
            continue
        if isinstance(o, memoryview | bytes | bytearray | str | int | float | bool):
            size += sys.getsizeof(o)
            continue
        size += sys.getsizeof(o)
        if isinstance(o, dict):
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, list | tuple | set | frozenset):
            stack.extend(o)
        elif hasattr(o, "__dict__"):
            stack.append(vars(o))
    return size, mapped


def parts(snap: object) -> dict[str, dict[str, float]]:
    """Bytes per chunk of each attribute of the snapshot (cached properties included)."""
    n = max(1, len(getattr(snap, "ids")))  # noqa: B009
    out: dict[str, dict[str, float]] = {}
    attributes = dict(vars(snap))
    table = attributes.pop("table", None)  # since the redesign: its columns one by one
    if table is not None:
        attributes.update({f"table.{k}": v for k, v in vars(table).items()})
    for name, value in attributes.items():
        if name in ("bm25", "generation", "changed", "seq", "format"):
            continue
        size, mapped = deep_size(value)
        out[name] = {
            "bytes_per_chunk": round(size / n, 1),
            "mapped_per_chunk": round(mapped / n, 1),
        }
    return out


def timed_update(cache: Any, old: Any, generation: str) -> tuple[Any, dict[str, float]]:
    """``SnapshotCache._update`` and ``snapshot.with_changes`` of this commit, step by
    step (the same statements)."""
    from tools.kb.index import chunk_table as rows
    from tools.kb.index import snapshot as module

    steps: dict[str, float] = {}
    t = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal t
        now = time.perf_counter()
        steps[name] = round((now - t) * 1000, 1)
        t = now

    read = cache._registry.changes(old.seq)
    active = module.moved(old.active, read.records)
    changed = sorted(d for d in read.records if old.active.get(d) != active.get(d))
    lap("registry changes since the snapshot, active versions")
    fresh = list(cache._chunks.document_chunks([d for d in changed if d in active]))
    lap("changed documents read (from memory here)")
    dead = [old.by_document[d] for d in changed if d in old.by_document]
    dead_rows = np.concatenate(dead) if dead else np.zeros(0, dtype=np.int64)
    table = rows.killed(old.table, dead_rows)
    lap("old rows masked (the live mask copied)")
    start = table.rows
    table = rows.appended(table, module._current(active, fresh))
    lap("new rows appended (lists and columns copied, vectors in place)")
    position = old.position.copy()  # not dict(): after deletions that re-inserts, 5x slower
    for i in dead_rows.tolist():
        position.pop(old.table.ids[i], None)
    position.update(zip(table.ids[start:], range(start, table.rows), strict=True))
    lap("position map copied and updated")
    by_document = old.by_document.copy()
    for d in changed:
        by_document.pop(d, None)
    by_document.update(rows.documents_of(table, np.arange(start, table.rows)))
    lap("rows per document copied and updated")
    snap = module.Snapshot(generation=generation, active=active, table=table,
                           position=position, by_document=by_document, bm25=old.bm25,
                           changed=old.changed + len(changed), seq=read.seq)  # fmt: skip
    dead, tail = table.rows - len(position), table.rows - table.sorted_rows
    if max(dead / module.DEAD_SHARE, tail / module.TAIL_SHARE) > max(1, table.rows):
        snap = module.compact(snap)
    lap("compaction (when due)")
    return snap, steps


def derived(snap: Any) -> dict[str, float]:
    """Milliseconds of each derived property the next search reads."""
    out: dict[str, float] = {}
    for name in ("languages", "language_names", "acl_table", "by_document", "language_counts"):
        if not isinstance(getattr(type(snap), name, None), functools.cached_property):
            continue
        snap.__dict__.pop(name, None)
        started = time.perf_counter()
        getattr(snap, name)
        out[name] = round((time.perf_counter() - started) * 1000, 1)
    if hasattr(snap, "language_mask"):
        snap.__dict__.pop("_language_masks", None)
        started = time.perf_counter()
        snap.language_mask("zh")
        out["language_mask"] = round((time.perf_counter() - started) * 1000, 1)
    return out


def one_size(chunks: int, data_dir: Path, seed: int, changes: int) -> dict[str, Any]:
    from tools.kb.index.snapshot_cache import SnapshotCache

    corpus = Corpus(chunks, seed, data_dir)
    registry = MemoryRegistry(corpus)
    with tempfile.TemporaryDirectory() as tmp:
        cache = SnapshotCache(registry=registry, chunks=corpus, tokenizer=str.split,  # type: ignore[arg-type]
                              tokenizer_tag="bench", directory=Path(tmp), prefix="bench.")  # fmt: skip
        gc.collect()
        rss_before = rss_mb()
        started = time.perf_counter()
        snap = cache.current()  # read, sorted and saved (its texts then read from the file)
        build_s = time.perf_counter() - started
        gc.collect()
        rss_built = rss_mb()
        times = derived(snap)
        gc.collect()
        rss_derived = rss_mb()
        sizes = parts(snap)
        rng = random.Random(seed + 1)
        updates: list[dict[str, float]] = []
        peak = rss_derived
        for step in range(1, changes + 1):
            doc_id = rng.choice(corpus.docs)[0]
            registry.change(doc_id, step)
            started = time.perf_counter()
            new, steps = timed_update(cache, snap, f"g{step}")
            steps["total"] = round((time.perf_counter() - started) * 1000, 1)
            steps.update({f"then {k}": v for k, v in derived(new).items()})
            peak = max(peak, rss_mb())
            updates.append(steps)
            snap = new
            gc.collect()
    median = {k: float(np.median([u[k] for u in updates])) for k in updates[0]} if updates else {}
    return {
        "chunks": len(snap.ids),
        "documents": len(snap.active),
        "build_s": round(build_s, 1),
        "rss_growth_mb": {
            "built": round(rss_built - rss_before),
            "with_derived": round(rss_derived - rss_before),
            "peak_during_updates": round(peak - rss_before),
        },
        "rss_bytes_per_chunk": round((rss_derived - rss_before) * 2**20 / max(1, chunks)),
        "parts_bytes_per_chunk": sizes,
        "derived_ms": times,
        "one_document_update_ms": median,
    }


def registry_read(documents: int) -> dict[str, Any]:
    """Write ``documents`` registry records to an embedded Chroma and time ``records()``."""
    from tools.kb.store.chroma import chroma_store as cs
    from tools.kb.store.chroma.chroma_registry import ChromaRegistry

    records = Corpus.__new__(Corpus)
    records.docs = corpus_documents(documents * 7, 44)[:documents]
    records.versions = {d[0]: hex_id(d[0], 0)[:16] for d in records.docs}
    with tempfile.TemporaryDirectory() as tmp:
        location = cs.StoreLocation(path=Path(tmp) / "chroma")
        client = cs.open_client(location)
        _, docs = cs.open_collections(client, "bench", model_id="bench", dimension=DIM)
        registry = ChromaRegistry(docs, cs.StoreGuard(location))
        items = list(Corpus.records(records).items())
        started = time.perf_counter()
        for start in range(0, len(items), 5000):
            registry.commit(dict(items[start : start + 5000]))
        write_s = time.perf_counter() - started
        whole, one = [], []
        for i in range(3):
            started = time.perf_counter()
            got = registry.records()
            whole.append(round(time.perf_counter() - started, 2))
            assert len(got) == documents
            changes = getattr(registry, "changes", None)
            if changes is not None:  # since the redesign: one commit's records read
                doc_id, record = items[i]
                registry.commit({doc_id: {**record, "version": hex_id(doc_id, i + 1)[:16]}})
                seq = changes(2**62).seq  # the sequence number alone (nothing is newer)
                started = time.perf_counter()
                read = changes(seq - 1)
                one.append(round((time.perf_counter() - started) * 1000, 1))
                assert list(read.records) == [doc_id]
    return {"registry_documents": documents, "write_s": round(write_s, 1),
            "records_s": whole, "changes_after_one_commit_ms": one}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__, data=True, json_out=True)
    p.add_argument("--sizes", type=int, nargs="*", default=[],
                   help="sizes in chunks, each in a fresh process (100000 300000 1000000)")  # fmt: skip
    p.add_argument("--chunks", type=int, default=100_000, help="one size, in this process")
    p.add_argument("--changes", type=int, default=5, help="one-document changes timed")
    p.add_argument("--seed", type=int, default=44)
    p.add_argument("--registry", type=int, default=0, help="time a registry of N documents")
    args = p.parse_args(argv)
    if args.registry:
        figures: Any = registry_read(args.registry)
    elif args.sizes:
        figures = []
        for size in args.sizes:
            with tempfile.TemporaryDirectory() as tmp:
                out = Path(tmp) / "size.json"
                cmd = rerun(__spec__.name, "--chunks", str(size), "--json", str(out),
                            "--data-dir", str(args.data_dir), "--changes", str(args.changes))  # fmt: skip
                subprocess.run(cmd, cwd=REPO, check=True)
                figures.append(json.loads(out.read_text()))
    else:
        figures = one_size(args.chunks, args.data_dir, args.seed, args.changes)
    print(json.dumps(figures, indent=1))
    write_json(args.json, figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
