"""One writer per knowledge base across processes (``tools.kb.store.writer_lock``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.fakes import hash_model
from tools.errors import StoreError
from tools.kb.knowledge_base import KBConfig, KnowledgeBase

REPO = Path(__file__).resolve().parents[3]

# A second process: ingests FOLDER into HOME with a slow hash embedder (so two of them
# overlap), or only holds the writer lock for HOLD seconds, or ("open") only opens a new
# store; prints its report as JSON.
CHILD = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from tests.fakes import hash_model
    from tools.kb.knowledge_base import KBConfig, KnowledgeBase
    home, folder, hold, start = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3]), sys.argv[4]
    model = hash_model()
    real = model.embeddings.embed_documents
    def slow(texts):
        time.sleep(0.3)
        return real(texts)
    model.embeddings.embed_documents = slow
    if folder == "open":  # only open a new store, all children at once
        while not Path(start).exists():
            time.sleep(0.01)
        KnowledgeBase(KBConfig(home=home, collection="team"), embedding_model=model).close()
        print("opened", flush=True)
        sys.exit(0)
    with KnowledgeBase(KBConfig(home=home, collection="team"), embedding_model=model) as kb:
        while not Path(start).exists():  # both children start writing together
            time.sleep(0.01)
        if folder == "-":
            with kb.writer.writing():
                print("holding", flush=True)
                time.sleep(hold)
        else:
            report = kb.ingest([folder])
            print(json.dumps({"added": report.added}), flush=True)
    """
)


def _child(home: Path, folder: str, start: Path, hold: float = 0.0) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(home), folder, str(hold), str(start)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _teams(tmp_path: Path) -> tuple[Path, Path]:
    folders = []
    for team, days in (("teamA", 12), ("teamB", 30)):
        folder = tmp_path / team
        folder.mkdir()
        (folder / "policy.md").write_text(f"# Leave\n\n{team} staff get {days} days of leave.\n")
        for i in range(6):  # more to embed, so the two ingests overlap
            (folder / f"note{i}.md").write_text(f"# Note {i}\n\n{team} note number {i}.\n")
        folders.append(folder)
    return folders[0], folders[1]


def test_two_processes_ingesting_same_named_files_keep_both(tmp_path: Path) -> None:
    # Without the lock both read an empty registry, both named their file "policy.md",
    # and the second commit replaced the first team's policy.
    home, start = tmp_path / "home", tmp_path / "go"
    team_a, team_b = _teams(tmp_path)
    children = [_child(home, str(f), start) for f in (team_a, team_b)]
    time.sleep(1.0)  # both opened the store
    start.touch()
    reports = []
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        reports.append(json.loads(out.strip().splitlines()[-1]))
    assert sorted(d for r in reports for d in r["added"] if "policy" in d) == [
        "policy.md",
        "teamB/policy.md",
    ] or sorted(d for r in reports for d in r["added"] if "policy" in d) == [
        "policy.md",
        "teamA/policy.md",
    ]
    with KnowledgeBase(KBConfig(home=home, collection="team"), embedding_model=hash_model()) as kb:
        assert kb.stats()["documents"] == 14
        texts = {h.doc_id: h.text for h in kb.search("staff days of leave", k=10)}
        policies = [t for d, t in texts.items() if d.endswith("policy.md")]
        assert sorted("12 days" in t for t in policies) == [False, True]  # both teams' files


def test_a_writer_waits_for_another_process_then_goes_on(tmp_path: Path) -> None:
    home, start = tmp_path / "home", tmp_path / "go"
    team_a, _ = _teams(tmp_path)
    start.touch()
    holder = _child(home, "-", start, hold=1.5)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
    notes: list[str] = []
    with KnowledgeBase(KBConfig(home=home, collection="team"), embedding_model=hash_model()) as kb:
        report = kb.ingest([team_a], progress=lambda d, t, item: notes.append(item))
    holder.communicate(timeout=60)
    assert len(report.added) == 7
    waiting = [n for n in notes if n.startswith("waiting for")]
    assert len(waiting) == 1 and f"pid {holder.pid}" in waiting[0], notes[:3]


def test_a_writer_gives_up_after_the_time_limit_naming_the_holder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HYBRID_RAG_WRITE_LOCK_TIMEOUT", "0.5")
    home, start = tmp_path / "home", tmp_path / "go"
    team_a, _ = _teams(tmp_path)
    start.touch()
    holder = _child(home, "-", start, hold=30)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        with (
            KnowledgeBase(
                KBConfig(home=home, collection="team"), embedding_model=hash_model()
            ) as kb,
            pytest.raises(StoreError, match=rf"being written by pid {holder.pid} .*waited 0.5 s"),
        ):
            kb.ingest([team_a])
        # nothing was written, and reading never waits for the writer
        with KnowledgeBase(
            KBConfig(home=home, collection="team"), embedding_model=hash_model()
        ) as kb:
            assert kb.stats()["documents"] == 0
    finally:
        holder.kill()
        holder.communicate(timeout=30)
    # the kernel released the dead holder's lock: no stale lock
    with KnowledgeBase(KBConfig(home=home, collection="team"), embedding_model=hash_model()) as kb:
        assert len(kb.ingest([team_a]).added) == 7


def test_processes_opening_a_new_store_at_once_all_succeed(tmp_path: Path) -> None:
    # Regression: Chroma's set-up of a new store raced ("table collections already exists")
    for round_ in range(2):
        home, start = tmp_path / f"home{round_}", tmp_path / f"go{round_}"
        children = [_child(home, "open", start) for _ in range(4)]
        time.sleep(0.8)  # all imported and waiting
        start.touch()
        for child in children:
            out, err = child.communicate(timeout=120)
            assert child.returncode == 0 and out.strip() == "opened", err[-500:]


def test_a_filesystem_without_locks_is_a_warning_not_a_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import errno

    from tools.kb.store import writer_lock

    def no_locks(fd: int, op: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(writer_lock.fcntl, "flock", no_locks)
    team_a, _ = _teams(tmp_path)
    with KnowledgeBase(
        KBConfig(home=tmp_path / "home", collection="team"), embedding_model=hash_model()
    ) as kb:
        assert len(kb.ingest([team_a]).added) == 7
    assert any("not serialised across processes" in r.getMessage() for r in caplog.records)
