"""Retrieval across languages: per-language pools (tools/kb/search/retrievers.py) and their
merge (tools/kb/search/joiner.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tools.kb.knowledge_base import KBConfig, KnowledgeBase
from tools.kb.search.candidates import BM25Score, CandidatePool
from tools.kb.search.joiner import (
    DEFAULT_RULE,
    Fusion,
    MergeRule,
    gate,
    gate_features,
    join,
    merge_language_pools,
)
from tools.kb.search.ranker import rank
from tools.kb.search.retrievers import (
    ONE_POOL,
    Filters,
    Retrieved,
    candidate_pool,
    document_languages,
)


def _pool(
    cos: dict[str, float], bm25: dict[str, float] | None = None, share: float = 0.0
) -> CandidatePool:
    bm = bm25 or {}
    ids = list(dict.fromkeys([*cos, *bm]))
    return CandidatePool(
        ids=ids,
        cosine={c: cos.get(c, 0.0) for c in ids},
        bm25={c: BM25Score(bm.get(c, 0.0), share if bm.get(c) else 0.0) for c in ids},
        vector_found=dict(cos),
        bm25_found={c: s for c, s in bm.items() if s > 0},
    )


def _order(scores: dict[str, float]) -> list[str]:
    return sorted(scores, key=lambda c: (-scores[c], c))


def _spread(best: float, prefix: str) -> dict[str, float]:
    """A dense pool whose best candidate stands ``best`` high above a flat crowd."""
    return {f"{prefix}1": best, **{f"{prefix}{i}": 0.78 - 0.002 * i for i in range(2, 12)}}


def test_cross_language_best_candidate_wins_when_it_stands_above() -> None:
    # An English question whose answer is only in Chinese: the Chinese pool's best stands
    # far above its crowd and above the English best, which covers few question words.
    pools = {
        "en": _pool(_spread(0.80, "en"), {"en1": 3.0, "en2": 2.9}, share=0.1),
        "zh": _pool(_spread(0.92, "zh")),
    }
    order = _order(merge_language_pools(pools, "en", Fusion(), DEFAULT_RULE))
    assert order[0] == "zh1"


def test_same_language_answer_keeps_first_place() -> None:
    # The English best stands out and holds every question word: English leads, and the
    # gate gives Chinese little chance, so each Chinese candidate loses nearly the whole
    # steepness (the best of them may still follow, not lead).
    pools = {
        "en": _pool(_spread(0.93, "en"), {"en1": 9.0, "en2": 1.0}, share=1.0),
        "zh": _pool(_spread(0.82, "zh")),
    }
    assert gate(gate_features(pools["en"], pools["zh"]), DEFAULT_RULE) < 0.05
    merged = merge_language_pools(pools, "en", Fusion(), DEFAULT_RULE)
    assert _order(merged)[0] == "en1"
    assert merged["zh1"] < 1.0 - 0.95 * DEFAULT_RULE.steepness


def test_lexically_empty_pool_does_not_drag_a_good_dense_pool() -> None:
    # BM25 of an English question in a Chinese pool matches one number: with the rule's
    # default it is ignored, so the dense order decides inside that pool.
    zh = _pool({"zh1": 0.90, "zh2": 0.80, "zh3": 0.79}, {"zh3": 4.0}, share=0.2)
    en = _pool({"en1": 0.70, "en2": 0.69})
    merged = merge_language_pools({"en": en, "zh": zh}, "en", Fusion(), DEFAULT_RULE)
    assert _order(merged)[0] == "zh1"
    assert merged["zh1"] > merged["zh2"] > merged["zh3"]
    rule = MergeRule(**{**DEFAULT_RULE.__dict__, "bm25_other": True})
    with_bm25 = merge_language_pools({"en": en, "zh": zh}, "en", Fusion(), rule)
    assert with_bm25["zh3"] > merged["zh3"]  # the flag is what lets the number count


def test_a_misjudged_gate_still_leaves_the_other_languages_best_a_slot() -> None:
    # The gate sides with English (its best covers every word), yet the other language's
    # best is kept at rank ``slot`` when the gate gives it at least ``slot_floor``; below
    # that floor, or with no slot, it stays behind the English crowd.
    english = {**_spread(0.93, "en"), "en2": 0.925, "en3": 0.92, "en4": 0.915}
    pools = {
        "en": _pool(english, {"en1": 9.0, "en2": 8.5, "en3": 8.0, "en4": 7.5}, share=1.0),
        "zh": _pool(_spread(0.82, "zh")),
    }
    p = gate(gate_features(pools["en"], pools["zh"]), DEFAULT_RULE)
    plain = MergeRule(**{**DEFAULT_RULE.__dict__, "slot": 0})
    assert _order(merge_language_pools(pools, "en", Fusion(), plain)).index("zh1") > 2
    kept = MergeRule(**{**DEFAULT_RULE.__dict__, "slot": 2, "slot_floor": p / 2})
    order = _order(merge_language_pools(pools, "en", Fusion(), kept))
    assert order[:3] == ["en1", "zh1", "en2"]
    refused = MergeRule(**{**DEFAULT_RULE.__dict__, "slot": 2, "slot_floor": p * 2})
    assert _order(merge_language_pools(pools, "en", Fusion(), refused)).index("zh1") > 2


def _write(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


ENGLISH = {
    "leave.md": "# Annual leave\n\nEmployees receive 15 days of annual leave after five years.\n",
    "expenses.md": "# Expenses\n\nTaxi receipts above 200 CNY need manager approval.\n",
    "it.txt": "IT incident process. Call extension 4455 for severity one outages.\n",
    "robot.md": "# Robot R2 manual\n\nThe R2 robot carries 300 kg and runs 8 hours per charge.\n",
    "travel.md": "# Travel\n\nBook flights through the travel desk two weeks ahead.\n",
}


def test_one_language_kb_ranks_exactly_as_the_single_pool(
    kb: KnowledgeBase, tmp_path: Path
) -> None:
    kb.ingest([_write(tmp_path / "en", ENGLISH)])
    snap = kb.snapshot()
    assert document_languages(snap) == ["en"]
    for query in ("annual leave days", "robot payload", "年假有几天", "extension 4455"):
        for mode in ("hybrid", "vector", "bm25"):
            vector = kb.model.embed_query(query) if mode != "bm25" else None
            qv = None if vector is None else np.asarray(vector, dtype=np.float32)
            filters = Filters.of()
            found = kb.pipeline.retrievers.retrieve(query, qv, snap, mode=mode, n=50)
            assert found.question_language is None  # one pool
            pool = candidate_pool(query, qv, snap, kb.chunks, mode=mode, filters=filters, n=50)
            floor = kb.model.similarity_floor
            fusion = Fusion(mode, kb.config.fusion, kb.config.vector_weight, floor)
            joined = join(Retrieved({ONE_POOL: pool}), fusion)
            expected = rank(joined, snap, mode=mode, similarity_floor=floor, top=10)
            got = kb.search(query, 10, mode=mode)
            assert [(h.chunk_id, h.fused_score, h.relevance) for h in got] == [
                (h.chunk_id, h.fused_score, h.relevance) for h in expected[:10]
            ]


def test_two_language_kb_searches_each_language(kb: KnowledgeBase, tmp_path: Path) -> None:
    files = dict(ENGLISH)
    files["nianjia.md"] = (
        "# 年假制度\n\n员工工作满一年后享有5天带薪年假。工作满十年享有10天年假。\n"
    )
    files["baoxiao.md"] = "# 报销\n\n出租车票超过200元需要经理审批。\n"
    kb.ingest([_write(tmp_path / "mixed", files)])
    snap = kb.snapshot()
    assert document_languages(snap) == ["en", "zh"]
    # A language filter restricts both retrievers.
    zh_only = candidate_pool(
        "annual leave 年假",
        None,
        snap,
        kb.chunks,
        mode="bm25",
        filters=Filters(language="zh"),
        n=50,
    )
    assert zh_only.ids
    assert {snap.metadatas[snap.position[c]]["lang"] for c in zh_only.ids} == {"zh"}
    # Every hybrid search holds candidates of both languages, whatever the question's.
    hits = kb.search("annual leave", 10)
    assert {h.metadata["lang"] for h in hits} == {"en", "zh"}
    assert hits[0].metadata["lang"] == "en"  # the question's language answers it
    assert all(0.0 <= h.relevance <= 1.0 for h in hits)
    assert hits[0].relevance == 1.0


# --- offline answers from a passage in the other language --------------------------------

SPEC_ZH = (
    "| 项目 | 参数 |\n|------|------|\n| 额定负载 | 1500公斤 |\n| 爬坡能力 | 3% |\n"
    "| 防护等级 | IP55 |\n"
)
SPEC_EN = (
    "| Item | NR-200 Porter |\n|------|------|\n| Rated payload | 300 kg |\n"
    "| Maximum gradient | 5% |\n| Ingress protection | IP54 |\n"
)


def test_extractive_answer_quotes_the_one_matching_table_row() -> None:
    from tools.policy.offline import extractive_answer

    sources = [{"label": "[内部-1]", "text": SPEC_ZH, "relevance": 1.0, "lang": "zh"}]
    answer = extractive_answer("爬坡能力是多少？", sources, "zh", max_sentences=1)
    assert answer == "爬坡能力 / 3% [内部-1]"


def test_extractive_answer_quotes_a_foreign_source_and_says_so() -> None:
    from tools.policy.offline import extractive_answer

    def similarity(question: str, texts: list[str]) -> list[float]:
        # Stands in for the embedding model: the gradient row is closest to the question.
        return [0.9 if "gradient" in t else 0.5 for t in texts]

    sources = [{"label": "[内部-1]", "text": SPEC_EN, "relevance": 1.0, "lang": "en"}]
    answer = extractive_answer(
        "最大爬坡能力是多少？", sources, "zh", max_sentences=1, similarity=similarity
    )
    assert answer.startswith("（以下来源为英文原文")
    assert answer.endswith("Maximum gradient / 5% [内部-1]")  # quoted as written
    # Without a similarity, no word matches: nothing is quoted.
    assert extractive_answer("最大爬坡能力是多少？", sources, "zh") == "没找到相关信息。"


def test_a_row_naming_the_questions_code_is_quoted_beside_the_closest_row() -> None:
    from tools.policy.offline import extractive_answer

    faults = (
        "| 故障代码 | 含义 |\n|---|---|\n| F-21 | 定位丢失 |\n| F-37 | 顶升电机过载 |\n"
        "| F-40 | 电池过热 |\n"
    )
    sources = [{"label": "[internal-1]", "text": faults, "relevance": 1.0, "lang": "zh"}]

    def similarity(question: str, texts: list[str]) -> list[float]:
        return [0.9 if "F-21" in t else 0.5 for t in texts]  # the model picks a wrong row

    answer = extractive_answer(
        "What does fault code F-37 mean?", sources, "en", similarity=similarity
    )
    assert "F-37 / 顶升电机过载 [internal-1]" in answer
    assert "F-40" not in answer


# --- centred cosines and cross-language evidence -------------------------------------


def test_sample_positions_are_bounded_and_spread() -> None:
    from tools.kb.search.dense import sample_positions

    assert sample_positions(5, 10).tolist() == [0, 1, 2, 3, 4]
    got = sample_positions(10_000, 100)
    assert len(got) == 100 and got[0] == 0 and got[-1] == 9_999
    assert len(set(got.tolist())) == 100


def test_centred_cosine_removes_the_language_offset() -> None:
    # Two topics in two languages: each vector is topic + the language's own direction.
    # Raw, an English question is closer to the English passage of the other topic than
    # to the Chinese passage of its own; centred, its own topic wins in either language.
    from tools.kb.search.dense import centre_cosines

    rng = np.random.default_rng(7)
    dim = 32
    en_dir, zh_dir = rng.normal(size=dim), rng.normal(size=dim)
    topics = [rng.normal(size=dim) for _ in range(6)]
    unit = lambda v: v / np.linalg.norm(v)  # noqa: E731
    en = np.stack([unit(t + 2.0 * en_dir) for t in topics])
    zh = np.stack([unit(t + 2.0 * zh_dir) for t in topics])
    centres = {"en": en.mean(axis=0), "zh": zh.mean(axis=0)}
    question = unit(topics[0] + 2.0 * en_dir + 0.1 * rng.normal(size=dim))
    raw_zh_own, raw_en_other = float(zh[0] @ question), float(en[1] @ question)
    assert raw_en_other > raw_zh_own  # the pooling problem
    got = centre_cosines(
        question, "en", centres, ["zh0", "en1"], ["zh", "en"], np.stack([zh[0], en[1]])
    )
    assert got["zh0"] > 0.5 > got["en1"]


def test_other_languages_cosines_are_mapped_to_the_question_languages_scale() -> None:
    from tools.kb.search.joiner import on_question_scale

    own_raw = {f"en{i}": 0.5 + 0.4 * (0.1 * i) for i in range(8)}
    centred = {f"en{i}": 0.1 * i for i in range(8)} | {"zh1": 0.9, "zh2": 0.2}
    own = _pool(own_raw)
    mapped = on_question_scale(own, centred, {"zh1": 0.7, "zh2": 0.65})
    assert mapped is not None
    assert mapped["zh1"] == pytest.approx(0.5 + 0.4 * 0.9)
    assert mapped["zh2"] == pytest.approx(0.5 + 0.4 * 0.2)
    few = _pool({"en1": 0.6, "en2": 0.7})
    assert on_question_scale(few, centred, {"zh1": 0.7}) is None  # too few for a line


def test_vector_mode_compares_the_other_language_on_the_questions_scale() -> None:
    # Raw cosines of the question's language sit near 0.8, centred ones near 0.1-0.3: in
    # vector mode (no per-pool normalisation) the other language's centred cosines alone
    # would always lose; mapped to the question language's scale, the best of them leads
    # when it stands above the question language's best.
    own_raw = {f"en{i}": 0.80 - 0.01 * i for i in range(8)}
    centred = {f"en{i}": 0.20 - 0.01 * i for i in range(8)}
    centred |= {"zh1": 0.45, "zh2": 0.15, "zh3": 0.14}
    pools = {
        "en": _pool(own_raw),
        "zh": _pool({"zh1": 0.76, "zh2": 0.74, "zh3": 0.73}),
    }
    rule = MergeRule(**{**DEFAULT_RULE.__dict__, "intercept": 5.0})  # the gate says zh
    merged = merge_language_pools(pools, "en", Fusion(mode="vector"), rule, centred)
    assert _order(merged)[0] == "zh1"
    assert merged["zh1"] > 0.8  # on the raw scale, above the English best


def test_cross_language_evidence_is_read_by_the_dense_model(tmp_path: Path) -> None:
    # The bundled multilingual model (a hash embedder aligns no languages).
    files = dict(ENGLISH)
    files["shitang.md"] = "# 员工食堂\n\n员工食堂每天早上七点开门，晚上八点关门。早餐免费。\n"
    files["baoxiao.md"] = "# 报销\n\n出租车票超过200元需要经理审批。\n"
    with KnowledgeBase(KBConfig(home=tmp_path / "home")) as kb:
        kb.ingest([_write(tmp_path / "mixed", files)])
        _check_cross_language_evidence(kb)


def _check_cross_language_evidence(kb: KnowledgeBase) -> None:
    pipeline = kb.pipeline
    assert pipeline.across_model.features == ("dense", "dense_gap", "terms")
    snap = kb.snapshot()
    assert set(pipeline.retrievers.centres(snap)) == {"en", "zh"}
    joined = pipeline.joined(
        "When does the staff canteen open?",
        mode="hybrid",
        vector_text="When does the staff canteen open?",
        n=50,
        snap=snap,
    )
    scores, across = joined.scores, joined.across
    assert across and joined.merged
    best = max(scores, key=lambda c: scores[c])
    assert snap.metadatas[snap.position[best]]["doc_id"].endswith("shitang.md")
    # Vector mode compares raw scores across pools: the other language's centred cosines
    # come back on the question language's scale, so its best still leads.
    assert kb.search("When does the staff canteen open?", 3, mode="vector")[0].doc_id.endswith(
        "shitang.md"
    )
    got = kb.retrieve("When does the staff canteen open?", 5)
    assert got.hits[0].metadata["lang"] == "zh"
    assert got.answerability == pytest.approx(pipeline.across_model.probability(got.evidence))
    # A question in the language of its answer keeps the full model.
    same = kb.retrieve("How many days of annual leave after five years?", 5)
    assert same.hits[0].metadata["lang"] == "en"
    full = pipeline.answerability_model.probability(same.evidence)
    assert same.answerability == pytest.approx(full)
