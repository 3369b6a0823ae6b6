"""Durability of the knowledge base under a real ``SIGKILL`` and under concurrent readers.

Crash tests: a child process (a script written to a temp file, repo on ``sys.path``,
``tests.fakes.hash_model`` embeddings) opens a ``KnowledgeBase`` on a temp home, ingests
a corpus cleanly, copies the changed tree over it and re-ingests with a hook that calls
``os.kill(os.getpid(), signal.SIGKILL)`` at one point of the update:

* ``after_chunk_upsert`` — the new version's chunks are written, nothing committed;
* ``mid_chunk_upsert``   — only part of the new version's chunks are written;
* ``after_commit``       — the registry upsert (commit point) went through;
* ``mid_remove_stale``   — part of the old chunks of a committed document are deleted;
* ``mid_batch``          — ``batch_documents=2``: killed after the second batch's commit;
* ``mid_bm25_write``     — while the BM25 snapshot pickle is half written;
* ``after_tombstone``    — ``prune`` deleting a vanished file: tombstone committed, chunks not.

Then, in the test process, the index opens and answers every search mode, every
document has exactly one active version (old or new, never a mix), the chunks
served for it are exactly those of a clean ingest of that version, and
``stats()["chunks"]`` is the clean-ingest count; re-running the ingest completes the
update (``stale_chunks == 0``, chunk count of a clean ingest of the new tree).

Concurrency: a writer thread updates a larger corpus in small batches while reader
threads (on the same instance and on a second instance over the same directory, as
a server and a CLI ingest would) search repeatedly; every search succeeds and
returns a single, known version of each document.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
import traceback
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import hash_model
from tools.kb.ingest.loaders import SourceDocument, load_file
from tools.kb.knowledge_base import KBConfig, KnowledgeBase, SearchMode
from tools.kb.store.protocol import DocRecord

REPO = Path(__file__).resolve().parents[3]
MODES: tuple[SearchMode, ...] = ("hybrid", "bm25", "vector")
WORDS = [
    "policy",
    "budget",
    "approval",
    "travel",
    "hotel",
    "receipt",
    "manager",
    "warehouse",
    "robot",
    "schedule",
    "incident",
    "outage",
    "contract",
    "vendor",
    "invoice",
    "payment",
    "laptop",
    "security",
    "badge",
    "training",
    "holiday",
    "overtime",
    "salary",
    "review",
    "audit",
    "archive",
    "backup",
    "network",
    "printer",
    "meeting",
]


# --- corpus ---------------------------------------------------------------------------------


def doc_text(i: int, version: int, sections: int) -> str:
    """A Markdown document of several ~300-token chunks with a per-doc keyword."""
    rng = random.Random(i * 1000 + version)
    parts = [f"# Topic{i} handbook\n"]
    for s in range(sections):
        words = " ".join(rng.choice(WORDS) for _ in range(190))
        parts.append(
            f"## Section {s} of topic{i}\n\nRelease v{version} of topic{i} section {s}. {words}.\n"
        )
    return "\n".join(parts)


def write_tree(root: Path, docs: dict[str, str]) -> Path:
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    for name, text in docs.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


def crash_corpus() -> tuple[dict[str, str], dict[str, str]]:
    """v1 and v2 trees: 6 changed docs (chunk counts change), 1 unchanged, 1 added, 1 gone."""
    v1 = {f"doc{i}.md": doc_text(i, 1, 3) for i in range(7)}
    v1["gone.md"] = doc_text(90, 1, 2)
    v2 = {f"doc{i}.md": doc_text(i, 2, 3 + i % 3) for i in range(6)}
    v2["doc6.md"] = v1["doc6.md"]  # unchanged
    v2["new.md"] = doc_text(91, 2, 2)
    return v1, v2


def versions_of(tree: Path) -> dict[str, str]:
    """doc_id -> the version id the KB gives it (content hash prefix)."""
    out: dict[str, str] = {}
    for f in sorted(tree.iterdir()):
        loaded = load_file(f, f.name)
        assert isinstance(loaded, SourceDocument), loaded
        out[f.name] = loaded.content_hash[:16]
    return out


@dataclass
class Reference:
    """Clean-ingest chunk texts per (doc_id, version)."""

    chunks: dict[tuple[str, str], list[str]]

    def count(self, doc_id: str, version: str) -> int:
        return len(self.chunks[(doc_id, version)])


def chunk_texts_by_doc(kb: KnowledgeBase) -> dict[tuple[str, str], list[str]]:
    snap = kb.snapshot()
    out: dict[tuple[str, str], list[tuple[int, str]]] = defaultdict(list)
    for text, meta in zip(snap.texts, snap.metadatas, strict=True):
        out[(str(meta["doc_id"]), str(meta["version"]))].append((int(meta["chunk_index"]), text))
    return {k: [t for _, t in sorted(v)] for k, v in out.items()}


def clean_reference(base: Path, trees: list[Path]) -> Reference:
    chunks: dict[tuple[str, str], list[str]] = {}
    for n, tree in enumerate(trees):
        with KnowledgeBase(KBConfig(home=base / f"ref{n}"), embedding_model=hash_model()) as kb:
            kb.ingest([tree])
            chunks.update(chunk_texts_by_doc(kb))
    return Reference(chunks)


# --- the child process ----------------------------------------------------------------------

CHILD = textwrap.dedent(
    """
    import os, pickle, shutil, signal, sys
    sys.path.insert(0, sys.argv[1])
    home, tree, v2_tree, hook = sys.argv[2:6]

    from tests.fakes import hash_model
    from tools.kb.index import snapshot as snapmod
    from tools.kb.knowledge_base import KBConfig, KnowledgeBase, SearchMode

    def die():
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)

    kb = KnowledgeBase(KBConfig(home=home), embedding_model=hash_model())
    kb.ingest([tree])
    kb.search("topic1 handbook", k=3)  # a BM25 snapshot of the clean state on disk
    shutil.rmtree(tree)
    shutil.copytree(v2_tree, tree)

    class Chunks:
        # Proxy of the chunk collection with a hooked upsert.
        def __init__(self, inner, mode):
            self.inner, self.mode = inner, mode
        def __getattr__(self, name):
            return getattr(self.inner, name)
        def upsert(self, *, ids, **kw):
            if self.mode == "after":
                self.inner.upsert(ids=ids, **kw)
            else:  # write the first half, die
                half = max(1, len(ids) // 2)
                self.inner.upsert(ids=ids[:half], **{k: v[:half] for k, v in kw.items()})
            die()

    if hook == "after_chunk_upsert":
        kb.chunks.collection = Chunks(kb.chunks.collection, "after")
    elif hook == "mid_chunk_upsert":
        kb.chunks.collection = Chunks(kb.chunks.collection, "half")
    elif hook == "after_commit":
        original = kb.registry.commit
        def commit(records):
            original(records)
            die()
        kb.registry.commit = commit
    elif hook == "mid_remove_stale":
        def remove(doc_id, version):
            where = {"$and": [{"doc_id": doc_id}, {"version": {"$ne": version}}]}
            stale = kb.chunks.collection.get(where=where)["ids"]
            if not stale:
                return
            kb.chunks.collection.delete(ids=stale[: max(1, len(stale) // 2)])
            die()
        kb.chunks.delete_other_versions = remove
    elif hook == "mid_batch":
        kb.ingester.batch_documents = 2
        original = kb.registry.commit
        commits = []
        def commit(records):
            original(records)
            commits.append(sorted(records))
            if len(commits) == 2:
                die()
        kb.registry.commit = commit
    elif hook == "mid_bm25_write":
        def dump(obj, fh, protocol=None):
            fh.write(pickle.dumps(obj, protocol=protocol)[:100])
            fh.flush()
            die()
        snapmod.pickle.dump = dump
        kb.ingest([tree])
        kb.search("topic1 handbook", k=3)  # builds and saves the new snapshot
        sys.exit(3)
    elif hook == "after_tombstone":
        original = kb.registry.commit
        def commit(records):
            original(records)
            if any(r.get("version") == "" for r in records.values()):
                die()
        kb.registry.commit = commit
    else:
        sys.exit(f"unknown hook {hook}")
    kb.ingest([tree])
    sys.exit(4)  # the hook did not fire
    """
)


@dataclass
class CrashSetup:
    base: Path
    v1_tree: Path
    v2_tree: Path
    v1: dict[str, str]  # doc_id -> version
    v2: dict[str, str]
    ref: Reference
    script: Path


@pytest.fixture(scope="module")
def crash_setup(tmp_path_factory: pytest.TempPathFactory) -> CrashSetup:
    base = tmp_path_factory.mktemp("durability")
    v1_docs, v2_docs = crash_corpus()
    v1_tree = write_tree(base / "v1", v1_docs)
    v2_tree = write_tree(base / "v2", v2_docs)
    script = base / "child.py"
    script.write_text(CHILD, encoding="utf-8")
    return CrashSetup(
        base,
        v1_tree,
        v2_tree,
        versions_of(v1_tree),
        versions_of(v2_tree),
        clean_reference(base, [v1_tree, v2_tree]),
        script,
    )


# Run by default (in parallel, one module fixture); the extra ones are marked slow.
HOOKS = ("after_chunk_upsert", "after_commit", "mid_remove_stale", "mid_batch", "after_tombstone")
SLOW_HOOKS = ("mid_chunk_upsert", "mid_bm25_write")


@dataclass
class Crashed:
    home: Path
    tree: Path
    returncode: int
    stderr: str


def launch(setup: CrashSetup, hooks: tuple[str, ...]) -> dict[str, Crashed]:
    """Run the hooked children in parallel (each pays ~3 s of imports), by hook name."""
    running: dict[str, tuple[subprocess.Popen[str], Path, Path]] = {}
    for hook in hooks:
        work = setup.base / hook
        home, tree = work / "home", work / "docs"
        shutil.copytree(setup.v1_tree, tree)
        env = {**os.environ, "HYBRID_RAG_HOME": str(home), "PYTHONUNBUFFERED": "1"}
        cmd = [sys.executable, str(setup.script), str(REPO), str(home), str(tree)]
        proc = subprocess.Popen(
            [*cmd, str(setup.v2_tree), hook],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        running[hook] = (proc, home, tree)
    out: dict[str, Crashed] = {}
    for hook, (proc, home, tree) in running.items():
        try:
            _, err = proc.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        out[hook] = Crashed(home, tree, proc.returncode, err or "")
    return out


@pytest.fixture(scope="module")
def crashed(crash_setup: CrashSetup) -> dict[str, Crashed]:
    return launch(crash_setup, HOOKS)


def killed(crashed: dict[str, Crashed], hook: str) -> Crashed:
    """The child of ``hook``, asserted to have died of SIGKILL at its hook."""
    child = crashed[hook]
    assert child.returncode == -signal.SIGKILL, (hook, child.returncode, child.stderr[-3000:])
    return child


def check_consistent(kb: KnowledgeBase, setup: CrashSetup) -> dict[str, str]:
    """One complete version per document, old or new; returns doc_id -> active version."""
    stats = kb.stats()
    active = dict(kb.snapshot().active)
    for doc_id, version in active.items():
        assert version in {setup.v1.get(doc_id), setup.v2.get(doc_id)}, (doc_id, version)
    # Documents present before and after the update never disappear.
    assert {d for d in setup.v1 if d in setup.v2} <= set(active)
    served = chunk_texts_by_doc(kb)
    for doc_id, version in active.items():
        # Exactly the chunks of a clean ingest of that version, and no other version.
        assert served[(doc_id, version)] == setup.ref.chunks[(doc_id, version)], doc_id
        assert [k for k in served if k[0] == doc_id] == [(doc_id, version)], doc_id
        n = setup.ref.count(doc_id, version)
        for mode in MODES:
            hits = kb.search(f"topic{doc_id_number(doc_id)} handbook", k=50, mode=mode,
                             doc_ids=[doc_id])  # fmt: skip
            assert hits, (doc_id, mode)
            assert {h.metadata["version"] for h in hits} == {version}, (doc_id, mode)
            assert {h.chunk_id.split("#")[1] for h in hits} == {version}, (doc_id, mode)
            assert len(hits) == n, (doc_id, mode, len(hits), n)
    for mode in MODES:  # unfiltered: never two versions of a document in one answer
        hits = kb.search("release section policy budget", k=60, mode=mode)
        assert hits
        by_doc: dict[str, set[str]] = defaultdict(set)
        for h in hits:
            by_doc[h.doc_id].add(str(h.metadata["version"]))
        for doc_id, versions in by_doc.items():
            assert versions == {active[doc_id]}, (mode, doc_id, versions)
    assert stats["chunks"] == sum(setup.ref.count(d, v) for d, v in active.items())
    assert stats["documents"] == len(active)
    return active


def doc_id_number(doc_id: str) -> int:
    stem = doc_id.removesuffix(".md")
    return {"gone": 90, "new": 91}.get(stem) or int(stem.removeprefix("doc"))


def check_rerun_completes(kb: KnowledgeBase, tree: Path, setup: CrashSetup) -> None:
    kb.ingest([tree])
    stats = kb.stats()
    assert stats["stale_chunks"] == 0, stats
    assert dict(kb.snapshot().active) == setup.v2
    assert stats["chunks"] == sum(setup.ref.count(d, v) for d, v in setup.v2.items())
    check_consistent(kb, setup)


CHANGED = [f"doc{i}.md" for i in range(6)]


def expected_new(hook: str) -> set[str]:
    """Documents whose new version must be active after the kill."""
    if hook in ("after_chunk_upsert", "mid_chunk_upsert"):
        return set()
    if hook == "mid_batch":  # batches of 2 changed/added docs, in doc_id order
        return set(sorted([*CHANGED, "new.md"])[:4])
    return {*CHANGED, "new.md"}  # the whole update is one committed batch


@pytest.mark.parametrize(
    "hook",
    [
        *(h for h in HOOKS if h != "after_tombstone"),
        *(pytest.param(h, marks=pytest.mark.slow) for h in SLOW_HOOKS),
    ],
)
def test_sigkill_during_update_leaves_one_complete_version(
    crash_setup: CrashSetup, request: pytest.FixtureRequest, hook: str
) -> None:
    if hook in HOOKS:
        child = killed(request.getfixturevalue("crashed"), hook)
    else:
        child = killed(launch(crash_setup, (hook,)), hook)
    with KnowledgeBase(KBConfig(home=child.home), embedding_model=hash_model()) as kb:
        active = check_consistent(kb, crash_setup)
        new = {d for d, v in active.items() if v == crash_setup.v2.get(d) != crash_setup.v1.get(d)}
        assert new == expected_new(hook), sorted(new)
        if hook == "mid_bm25_write":  # the update had finished; the cache write was killed
            assert active == crash_setup.v2 and kb.stats()["stale_chunks"] == 0
        else:
            assert "gone.md" in active  # pruning comes after the documents: not reached
            assert kb.stats()["stale_chunks"] > 0  # leftovers of the killed run exist...
        check_rerun_completes(kb, child.tree, crash_setup)  # ...the next ingest removes them


def test_sigkill_after_delete_tombstone_is_cleaned_by_next_ingest(
    crash_setup: CrashSetup, crashed: dict[str, Crashed]
) -> None:
    child = killed(crashed, "after_tombstone")
    with KnowledgeBase(KBConfig(home=child.home), embedding_model=hash_model()) as kb:
        active = check_consistent(kb, crash_setup)
        assert active == crash_setup.v2  # the tombstone is the delete's commit point
        kb.ingest([child.tree])
        assert kb.stats()["stale_chunks"] == 0


# --- concurrent readers ---------------------------------------------------------------------

N_BIG = 24  # documents of the concurrency corpus


def big_corpus(version: int, n: int = N_BIG) -> dict[str, str]:
    return {f"doc{i}.md": doc_text(i, version, 2 + (i + version) % 2) for i in range(n)}


@pytest.fixture
def big_trees(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str], dict[str, str]]]:
    tree = write_tree(tmp_path / "big", big_corpus(1))
    v1 = versions_of(tree)
    v2_tree = write_tree(tmp_path / "big_v2", big_corpus(2))
    v2 = versions_of(v2_tree)
    yield tree, v1, v2
    shutil.rmtree(v2_tree, ignore_errors=True)


def test_searches_during_batched_ingest_always_see_one_known_version(
    tmp_path: Path, big_trees: tuple[Path, dict[str, str], dict[str, str]]
) -> None:
    tree, v1, v2 = big_trees
    home = tmp_path / "home"
    writer = KnowledgeBase(KBConfig(home=home), embedding_model=hash_model())
    writer.ingest([tree])
    reader = KnowledgeBase(KBConfig(home=home), embedding_model=hash_model())  # e.g. a server
    shutil.rmtree(tree)
    shutil.copytree(tmp_path / "big_v2", tree)
    writer.batch_documents = 3

    done = threading.Event()
    errors: list[str] = []
    searches: Counter[str] = Counter()
    lock = threading.Lock()

    def read(kb: KnowledgeBase, name: str, seed: int) -> None:
        rng = random.Random(seed)
        attempts = 0
        while (not done.is_set() or searches[name] < 5) and attempts < 2000:
            attempts += 1
            i = rng.randrange(N_BIG)
            mode = rng.choice(MODES)
            try:
                hits = kb.search(f"topic{i} handbook release", k=20, mode=mode)
                by_doc: dict[str, set[str]] = defaultdict(set)
                for h in hits:
                    version = str(h.metadata["version"])
                    assert version in {v1[h.doc_id], v2[h.doc_id]}, (h.doc_id, version)
                    assert h.chunk_id.split("#")[1] == version
                    by_doc[h.doc_id].add(version)
                for doc_id, vs in by_doc.items():
                    assert len(vs) == 1, (doc_id, vs)  # never a mix within one answer
            except BaseException:  # reported by the main thread
                errors.append(f"{name}: {traceback.format_exc()}")
                continue
            with lock:
                searches[name] += 1

    threads = [
        threading.Thread(target=read, args=(reader, "other-instance-1", 1)),
        threading.Thread(target=read, args=(reader, "other-instance-2", 2)),
        threading.Thread(target=read, args=(writer, "same-instance", 3)),
    ]
    for t in threads:
        t.start()
    time.sleep(0.2)
    try:
        report = writer.ingest([tree])
    finally:
        done.set()
        for t in threads:
            t.join(timeout=60)
    assert not errors, f"{len(errors)} searches failed; first: {errors[0]}"
    assert len(report.updated) == N_BIG
    assert all(searches[n] >= 5 for n in ("other-instance-1", "other-instance-2", "same-instance"))
    stats = reader.stats()
    assert stats["stale_chunks"] == 0 and dict(reader.snapshot().active) == v2
    writer.close()
    reader.close()


def test_snapshot_built_during_a_foreign_commit_never_loses_a_document(
    tmp_path: Path, kb_dir: Path
) -> None:
    home = tmp_path / "home"
    writer = KnowledgeBase(KBConfig(home=home), embedding_model=hash_model())
    writer.ingest([kb_dir])  # no search: no BM25 snapshot on disk yet
    reader = KnowledgeBase(KBConfig(home=home), embedding_model=hash_model())
    (kb_dir / "leave.md").write_text(
        "# Annual leave\n\nEmployees now receive 20 days of annual leave.\n", encoding="utf-8"
    )
    original = reader.registry.records
    fired: list[bool] = []

    def registry_then_foreign_update() -> dict[str, DocRecord]:
        records = original()
        if not fired:  # deterministic interleaving: the writer commits right after our read
            fired.append(True)
            writer.ingest([kb_dir])
        return records

    reader.registry.records = registry_then_foreign_update  # type: ignore[method-assign]
    hits = reader.search("annual leave days", k=10, doc_ids=["leave.md"])
    assert fired
    assert hits, "leave.md (present before and after the update) was not found"
    writer.close()
    reader.close()


def test_search_racing_an_ingest_on_the_same_instance_does_not_crash(
    kb: KnowledgeBase, kb_dir: Path
) -> None:
    kb.ingest([kb_dir])
    assert kb.search("annual leave days", k=3)  # snapshot of generation g1 cached
    (kb_dir / "leave.md").write_text(
        "# Annual leave\n\nEmployees now receive 20 days of annual leave.\n", encoding="utf-8"
    )
    original = kb.registry.generation
    writer: list[threading.Thread] = []

    def generation_then_ingest() -> str:
        generation = original()
        if not writer:  # an ingest on another thread starts right after the read
            writer.append(threading.Thread(target=kb.ingest, args=([kb_dir],)))
            writer[0].start()
            writer[0].join(timeout=0.5)  # it must wait: the search holds the instance lock
        return generation

    kb.registry.generation = generation_then_ingest  # type: ignore[method-assign]
    hits = kb.search("annual leave days", k=5, mode="hybrid")
    leave_versions = {h.metadata["version"] for h in hits if h.doc_id == "leave.md"}
    writer[0].join(timeout=60)
    kb.registry.generation = original  # type: ignore[method-assign]
    assert hits and not writer[0].is_alive()
    # The search saw one consistent version per document (the one active before the
    # update, since the writer waited), and the update then landed completely.
    assert len(leave_versions) == 1  # never a mix of the old and the new version
    texts = " ".join(h.text for h in kb.search("annual leave days", k=10) if h.doc_id == "leave.md")
    assert "20 days" in texts and kb.snapshot().active["leave.md"] not in leave_versions


def test_two_instances_saving_the_same_bm25_snapshot_do_not_fail_a_search(
    tmp_path: Path, kb_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tools.kb.index.snapshot_cache as kbmod

    home = tmp_path / "home"
    first = KnowledgeBase(KBConfig(home=home), embedding_model=hash_model())
    first.ingest([kb_dir])
    second = KnowledgeBase(KBConfig(home=home), embedding_model=hash_model())
    real_dump = kbmod.pickle.dump
    nested: list[bool] = []

    def dump(obj: Any, fh: Any, protocol: int | None = None) -> None:
        real_dump(obj, fh, protocol=protocol)
        if not nested:  # while `first` is between dump and replace, `second` saves too
            nested.append(True)
            fh.flush()
            second.search("annual leave", k=1)

    monkeypatch.setattr(kbmod.pickle, "dump", dump)
    try:
        assert first.search("annual leave", k=1)
    finally:
        first.close()
        second.close()
