"""Ranking on small and lopsided knowledge bases (issue 47).

A chunk that is first on both legs (the best cosine and the best BM25 hit) must rank above
every chunk worse on both, and never get relevance 0 while another gets more, whatever the
sizes of the language pools: one chunk in a language, two, five, twenty, none at all, the
answer in the minority language or in the majority one, a reader who may read only one or
two documents. The sweep is deterministic (seeded): a planted embedder gives each chunk a
vector made of its language's offset plus its own content, and the answer chunk the
question's own vector, so it is first on the dense leg raw and centred alike.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from langchain_core.embeddings import Embeddings

from tools.access.acl import Reader, parse_acl
from tools.kb.embed.embeddings import EmbeddingModel
from tools.kb.knowledge_base import KBConfig, KnowledgeBase
from tools.kb.search.candidates import BM25Score, CandidatePool, RetrievedChunk
from tools.kb.search.joiner import DEFAULT_RULE, Fusion, Joined, merge_language_pools
from tools.kb.search.ranker import rank

# --- the shape, on the merge alone -------------------------------------------------


def _pool(cos: dict[str, float], bm25: dict[str, float]) -> CandidatePool:
    ids = list(cos)
    best = max(bm25.values(), default=0.0) or 1.0
    return CandidatePool(
        ids=ids,
        cosine=dict(cos),
        bm25={c: BM25Score(bm25.get(c, 0.0), bm25.get(c, 0.0) / best) for c in ids},
        vector_found=dict(cos),
        bm25_found={c: s for c, s in bm25.items() if s > 0},
    )


def test_a_language_of_one_chunk_keeps_its_best_match_first() -> None:
    # Issue 47 as reported: a Chinese question; the KB's only Chinese chunk (a table) is
    # the best on both legs, the two English chunks match no word of it. Its pool of one
    # was min-max normalised to 0, so it ranked last with relevance 0 and the offline
    # answer said "not found".
    pools = {
        "zh": _pool({"docx": 0.933}, {"docx": 7.681}),
        "en": _pool({"pdf": 0.755, "html": 0.752}, {}),
    }
    merged = merge_language_pools(pools, "zh", Fusion(), DEFAULT_RULE)
    assert max(merged, key=lambda c: merged[c]) == "docx"
    union = CandidatePool(
        ["docx", "pdf", "html"],
        {**pools["zh"].cosine, **pools["en"].cosine},
        {**pools["zh"].bm25, **pools["en"].bm25},
        pools["zh"].vector_found,
        pools["zh"].bm25_found,
    )
    snap = _FakeSnap(union.ids)
    hits = rank(
        Joined(union, merged, merged=True),
        snap,  # type: ignore[arg-type]
        mode="hybrid",
        similarity_floor=0.0,
        top=3,
    )
    assert hits[0].chunk_id == "docx"
    assert hits[0].relevance == 1.0 and hits[0].fused_score > 0


class _FakeSnap:
    def __init__(self, ids: list[str]) -> None:
        self.position = {c: i for i, c in enumerate(ids)}
        self.metadatas = [{"doc_id": c} for c in ids]
        self.texts = ids


# --- the sweep through the knowledge base -------------------------------------------------

ZH_WORDS = [
    "仓库",
    "机器人",
    "电池",
    "速度",
    "维护",
    "安全",
    "培训",
    "报销",
    "差旅",
    "网络",
    "密码",
    "会议",
    "预算",
    "采购",
    "合同",
    "质量",
]
EN_WORDS = [
    "warehouse",
    "robot",
    "battery",
    "speed",
    "maintenance",
    "safety",
    "training",
    "expense",
    "travel",
    "network",
    "password",
    "meeting",
    "budget",
    "purchase",
    "contract",
    "quality",
]
ZH_QUESTION = ("额定负载", "续航时间", "型号")  # the answer chunk holds all three
EN_QUESTION = ("payload", "runtime", "model")
SIZES = (0, 1, 2, 3, 5, 20)
DIM = 64


class PlantedEmbeddings(Embeddings):
    """Each chunk's vector: its language's offset plus its own content (seeded by the
    marker ``cNNN`` in its text); a question's vector is looked up in ``planted``."""

    def __init__(self, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.offset = {lang: 1.2 * _unit(rng.normal(size=DIM)) for lang in ("zh", "en")}
        self.seed = seed
        self.planted: dict[str, np.ndarray] = {}

    def vector(self, text: str) -> np.ndarray:
        for key, vec in self.planted.items():
            if key in text:
                return vec
        marker = re.search(r"c(\d{3})", text)
        n = int(marker.group(1)) if marker else 999
        content = np.random.default_rng(self.seed * 1000 + n).normal(size=DIM)
        lang = "zh" if re.search("[\u4e00-\u9fff]", text) else "en"
        return _unit(self.offset[lang] + _unit(content))

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.vector(t).tolist() for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.vector(text).tolist()


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def _chunk_text(lang: str, n: int, rng: random.Random, answer: bool) -> str:
    words = ZH_WORDS if lang == "zh" else EN_WORDS
    asked = ZH_QUESTION if lang == "zh" else EN_QUESTION
    body = rng.sample(words, 6)
    # Every other chunk shares at most one question word: worse on the lexical leg.
    body += list(asked) if answer else rng.sample(asked, rng.randint(0, 1))
    body += rng.sample(words, 3 - (len(body) - 6)) if not answer else []
    sep = "，" if lang == "zh" else " "
    return f"c{n:03d} " + sep.join(body) + ("。" if lang == "zh" else ".")


def _build(
    tmp: Path, seed: int, sizes: dict[str, int], answer_lang: str
) -> tuple[KnowledgeBase, PlantedEmbeddings, str]:
    """A KB of ``sizes`` one-chunk documents per language, the answer in ``answer_lang``;
    the answer and the next chunk are readable by group ``few`` only, the rest by ``many``."""
    rng = random.Random(seed)
    emb = PlantedEmbeddings(seed)
    folder = tmp / f"kb{seed}"
    folder.mkdir()
    files: list[Path] = []
    n = 0
    for lang in ("zh", "en"):
        for i in range(sizes[lang]):
            answer = lang == answer_lang and i == 0
            path = folder / f"{'answer' if answer else 'doc'}-{lang}-{n:03d}.txt"
            path.write_text(_chunk_text(lang, n, rng, answer), encoding="utf-8")
            files.append(path)
            n += 1
    question = (
        "型号AGV的额定负载和续航时间？"
        if answer_lang == "zh"
        else "What payload and runtime does the model have?"
    )
    answer_file = next(f for f in files if f.name.startswith("answer"))
    emb.planted[question] = emb.vector(answer_file.read_text(encoding="utf-8"))
    model = EmbeddingModel(
        embeddings=emb, model_id=f"planted-{seed}", similarity_floor=0.0, _dimension=DIM
    )
    kb = KnowledgeBase(KBConfig(home=tmp / f"home{seed}"), embedding_model=model)
    few = files[:2] if files[0] == answer_file else [answer_file, files[0]]
    kb.ingest(few, acl=parse_acl("group:few"), prune=False)
    rest = [f for f in files if f not in few]
    if rest:
        kb.ingest(rest, acl=parse_acl("group:many"), prune=False)
    return kb, emb, question


def _check(hits: list[RetrievedChunk], where: str) -> None:
    """The answer chunk is first on both legs here; it ranks above every chunk worse on
    both, and its relevance is not 0 while another's is more."""
    answer = next(h for h in hits if "answer" in h.source)
    others = [h for h in hits if h is not answer]
    assert all(
        (h.vector_score or 0.0) <= (answer.vector_score or 0.0) and h.bm25_score < answer.bm25_score
        for h in others
    ), where  # the construction: first on both legs
    position = hits.index(answer)
    for h in hits[:position]:
        worse = (h.vector_score or 0.0) < (answer.vector_score or 0.0) and (
            h.bm25_score < answer.bm25_score
        )
        assert not worse, f"{where}: {h.source} worse on both ranks above the answer"
    if any(h.relevance > 0 for h in others):
        assert answer.relevance > 0, f"{where}: the answer has relevance 0"


def _cases() -> Iterator[tuple[int, int, str]]:
    for zh, en in itertools.product(SIZES, SIZES):
        for answer_lang in ("zh", "en"):
            if {"zh": zh, "en": en}[answer_lang] > 0:
                yield zh, en, answer_lang


@pytest.mark.parametrize(("zh", "en", "answer_lang"), list(_cases()))
def test_first_on_both_legs_is_never_ranked_below_a_worse_chunk(
    tmp_path: Path, zh: int, en: int, answer_lang: str
) -> None:
    sizes = {"zh": zh, "en": en}
    for seed in (1, 2):
        kb, _emb, question = _build(tmp_path, seed * 100 + zh * 10 + en, sizes, answer_lang)
        try:
            where = f"zh={zh} en={en} answer in {answer_lang}, seed {seed}"
            for reader, label in ((None, "everyone"), (Reader.of("r", ["few"]), "two documents")):
                _check(kb.search(question, 50, reader=reader), f"{where}, {label}")
        finally:
            kb.close()


def test_the_agents_internal_search_ranks_the_same_way(tmp_path: Path) -> None:
    # The agent's tool and both graphs read the KB through SearchService.search_kb.
    from graph.agent.tool_work import SourceRegistry, internal_search
    from tools.answer.search_service import SearchService

    kb, _emb, question = _build(tmp_path, 7, {"zh": 1, "en": 2}, "zh")
    try:
        service = SearchService(kb=lambda: kb, web_settings=lambda: None)
        text, outcome = asyncio.run(
            internal_search(service, SourceRegistry("zh"), question, question=question, top_k=3)
        )
        assert outcome["ok"] and outcome["sources"]
        first = outcome["sources"][0]
        assert Path(str(first["source"])).name.startswith("answer-zh"), outcome["sources"]
        assert first["relevance"] > 0
        assert "额定负载" in text
    finally:
        kb.close()


def test_a_language_of_one_chunk_is_not_centred(tmp_path: Path) -> None:
    # Its centre would be the chunk itself: centred, it is the zero vector, cosine 0 to
    # any question. Then every cosine stays raw; two chunks a language are centred.
    from tools.kb.search.dense import centring_applies

    assert not centring_applies({"zh": 1, "en": 20})
    assert centring_applies({"zh": 2, "en": 20})
    assert not centring_applies({"en": 20})
    kb, _emb, _question = _build(tmp_path, 3, {"zh": 1, "en": 3}, "zh")
    try:
        assert kb.pipeline.retrievers.centres(kb.snapshot()) == {}
    finally:
        kb.close()
    kb, _emb, _question = _build(tmp_path, 4, {"zh": 2, "en": 3}, "zh")
    try:
        assert set(kb.pipeline.retrievers.centres(kb.snapshot())) == {"en", "zh"}
    finally:
        kb.close()


# --- the offline state graph, through `hybrid-rag ask` ------------------------------------

WEB_KEYS = (
    "SERPBASE_API_KEY",
    "SERPER_API_KEY",
    "SERPAPI_API_KEY",
    "SCAVIO_API_KEY",
    "TAVILY_API_KEY",
    "BRAVE_API_KEY",
    "SEARXNG_BASE_URL",
)
ROBOTS = {
    "zh": [
        ["型号", "额定负载", "续航时间", "最高速度"],
        ["AGV-100", "500公斤", "8小时", "1.5米/秒"],
        ["AGV-200", "1200公斤", "10小时", "1.2米/秒"],
        ["AGV-300", "2000公斤", "6小时", "1.0米/秒"],
    ],
    "en": [
        ["Model", "Rated payload", "Runtime", "Top speed"],
        ["AGV-100", "500 kg", "8 hours", "1.5 m/s"],
        ["AGV-200", "1200 kg", "10 hours", "1.2 m/s"],
        ["AGV-300", "2000 kg", "6 hours", "1.0 m/s"],
    ],
}
TRAVEL = {
    "en": "Employees book flights through the travel desk at least two weeks ahead. Economy "
    "class is the default for flights under six hours. Hotel costs are reimbursed up to the "
    "city limit.",
    "zh": "员工须至少提前两周通过差旅服务台预订机票。六小时以内的航班默认乘坐经济舱。"
    "酒店费用按城市标准报销。",
}
SUPPORT = {
    "en": "Call extension 4455 for severity one outages. Password resets are handled by the "
    "self-service portal within one hour.",
    "zh": "严重故障请拨打分机4455。密码重置由自助服务门户在一小时内处理。",
}


def _three_documents(folder: Path, table_lang: str) -> Path:
    """The issue's KB: a DOCX holding a table in ``table_lang``, a PDF and an HTML page in
    the other language, one chunk each."""
    from tests.docgen import write_docx, write_html, write_pdf

    other = "en" if table_lang == "zh" else "zh"
    folder.mkdir()
    title = "仓储机器人参数表" if table_lang == "zh" else "Warehouse robot specifications"
    write_docx(folder / "robots.docx", [("h1", title), ("table", ROBOTS[table_lang])])
    travel = "差旅制度" if other == "zh" else "Travel policy"
    write_pdf(folder / "travel.pdf", [[("h1", travel), ("p", TRAVEL[other])]])
    support = "IT支持" if other == "zh" else "IT support"
    write_html(folder / "support.html", [("h1", support), ("p", SUPPORT[other])], title=support)
    return folder


@pytest.mark.parametrize(
    ("table_lang", "question", "row"),
    [
        ("zh", "AGV-300的续航时间是多少？", "AGV-300 / 2000公斤 / 6小时 / 1.0米/秒"),
        ("en", "What is the rated payload of the AGV-200?", "AGV-200 / 1200 kg / 10 hours"),
    ],
)
def test_the_offline_graph_answers_from_the_table_row(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    table_lang: str,
    question: str,
    row: str,
) -> None:
    # Issue 47 end to end with the bundled multilingual embedder: the table's language has
    # one chunk, the other two; before, this answered "没找到相关信息" with no citation.
    import json

    from cli.main import main

    for key in WEB_KEYS:
        monkeypatch.delenv(key, raising=False)
    home = str(tmp_path / "home")
    folder = _three_documents(tmp_path / "kb", table_lang)
    assert main(["--home", home, "ingest", str(folder)]) == 0
    capsys.readouterr()
    assert main(["--home", home, "ask", question, "--json", "--quiet"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["mode"] == "offline"
    label = "[内部-1]" if table_lang == "zh" else "[internal-1]"
    assert f"{row}" in result["answer"] and label in result["answer"], result["answer"]
    cited = {s["label"]: s["source"] for s in result["sources"]}
    assert cited[label].endswith("robots.docx")
    # Only the row: no other row of the table, and no passage of the other language.
    assert "AGV-100" not in result["answer"]
    assert ("Call extension" not in result["answer"]) and ("分机" not in result["answer"])


def test_the_row_naming_the_questions_code_is_quoted_when_rows_tie() -> None:
    # "200" is in the AGV-200 row and in "2000公斤" of the AGV-300 row: the words tie, the
    # code of the question names one row.
    from tools.policy.offline import extractive_answer

    table = "\n".join("| " + " | ".join(r) + " |" for r in ROBOTS["zh"])
    sources = [{"label": "[内部-1]", "text": table, "relevance": 1.0, "lang": "zh"}]
    answer = extractive_answer("AGV-200的额定负载是多少？", sources, "zh")
    assert answer == "AGV-200 / 1200公斤 / 10小时 / 1.2米/秒 [内部-1]"


def test_a_passage_chosen_by_meaning_alone_follows_no_word_match() -> None:
    # A source in another language is quoted for its closest sentence in meaning: not
    # after a passage in the question's language that matches its words.
    from tools.policy.offline import extractive_answer

    table = "\n".join("| " + " | ".join(r) + " |" for r in ROBOTS["zh"])
    sources = [
        {"label": "[内部-1]", "text": table, "relevance": 1.0, "lang": "zh"},
        {"label": "[内部-2]", "text": SUPPORT["en"], "relevance": 0.4, "lang": "en"},
    ]
    near = lambda q, texts: [0.5] * len(texts)  # noqa: E731
    answer = extractive_answer("AGV-300的续航时间是多少？", sources, "zh", similarity=near)
    assert answer == "AGV-300 / 2000公斤 / 6小时 / 1.0米/秒 [内部-1]"
    # Alone, or first, the other language's passage is still quoted (and said so).
    alone = extractive_answer("AGV-300的续航时间是多少？", sources[1:], "zh", similarity=near)
    assert "[内部-2]" in alone and "英文原文" in alone
