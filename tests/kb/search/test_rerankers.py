"""Reranking stage and cross-lingual queries (issue: reranking, one ranking, cross-lingual)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from graph import Context, build_graph
from tests.fakes import ScriptedChatModel, grade_every
from tools.errors import ConfigError
from tools.kb.knowledge_base import KnowledgeBase
from tools.kb.search.rerankers import (
    Candidate,
    LexicalReranker,
    NoReranker,
    ScoringReranker,
    make_reranker,
    reorder,
)


def cands() -> list[Candidate]:
    return [
        Candidate("a", "expense rules for taxis", 0.9),
        Candidate("b", "annual leave: 18 days after five years", 0.5),
        Candidate("c", "office locations", 0.7),
    ]


def test_scoring_reranker_orders_cuts_and_clamps() -> None:
    scores = {"expense rules for taxis": 0.1, "annual leave: 18 days after five years": 3.0}
    rr = ScoringReranker("fake", lambda q, texts: [scores.get(t, -1.0) for t in texts])
    out = rr.rerank("annual leave", cands(), top_n=2)
    assert [c.id for c in out] == ["b", "a"]
    assert out[0].relevance == 1.0  # clamped into [0, 1]
    assert all(0.0 <= c.relevance <= 1.0 for c in out)


def test_scoring_reranker_rejects_wrong_score_count() -> None:
    rr = ScoringReranker("broken", lambda q, texts: [0.5])
    with pytest.raises(ValueError, match="1 scores for 3"):
        rr.rerank("q", cands(), top_n=3)


def test_lexical_reranker_prefers_query_coverage() -> None:
    out = LexicalReranker().rerank("annual leave days", cands(), top_n=3)
    assert out[0].id == "b"
    assert all(0.0 <= c.relevance <= 1.0 for c in out)


def test_none_keeps_order_and_reorder_keeps_leftovers() -> None:
    assert [c.id for c in NoReranker().rerank("q", cands(), 2)] == ["a", "b"]
    assert [c.id for c in reorder(cands(), ["c", "zzz", "a"], 3)] == ["c", "a", "b"]


def test_missing_cross_encoder_extra_is_a_configuration_error() -> None:
    pytest.importorskip("pytest")  # always present; the check below is about the extra
    try:
        import sentence_transformers  # noqa: F401
    except ImportError:
        with pytest.raises(ConfigError, match=r"pip install 'hybrid-rag\[rerank\]'"):
            make_reranker("cross-encoder:BAAI/bge-reranker-v2-m3")
        with pytest.raises(ConfigError, match="hybrid-rag\\[rerank\\]"):
            Context(reranker="cross-encoder:BAAI/bge-reranker-v2-m3")
    else:
        with pytest.raises(ConfigError, match="not available locally"):
            make_reranker("cross-encoder:/nonexistent/model")
    with pytest.raises(ConfigError, match="reranker must be"):
        Context(reranker="magic")


def ask(tmp_path: Path, question: str, **kw: Any) -> dict[str, Any]:
    context = Context(data_home=str(tmp_path / "home"), search_provider="none", **kw)
    return asyncio.run(build_graph().ainvoke({"question": question}, context=context))


def test_chunk_language_is_stored_and_the_mix_is_known(sample_kb: KnowledgeBase) -> None:
    mix = sample_kb.languages()
    assert mix.get("zh", 0) > 0 and mix.get("en", 0) > 0
    hit = sample_kb.search("年假制度", k=1)[0]
    assert hit.metadata["lang"] == "zh"


def test_offline_mode_says_no_translation_was_done(
    sample_kb: KnowledgeBase, tmp_path: Path
) -> None:
    out = ask(tmp_path, "How many days of annual leave after 6 years?")
    assert out["crosslingual"]["question_language"] == "en"
    assert out["crosslingual"]["translated"] == []
    assert "no translation was done" in out["crosslingual"]["note"]
    # The note stays in the report: shown under every answer, same-language ones too, it
    # claimed the KB was matched across languages only weakly (per-language pools now).
    assert not any("translation" in w for w in out["warnings"])


def test_translated_query_is_fused_with_a_scripted_model(
    sample_kb: KnowledgeBase, tmp_path: Path, scripted: ScriptedChatModel
) -> None:
    # The KB also holds Chinese: the planner is asked for the translation in the same call.
    def plan(messages: Any) -> dict[str, Any]:
        assert "Simplified Chinese" in str(messages[0].content)
        return {"route": "knowledge", "reason": "policy", "kb_queries": ["NR-500 max payload"],
                "web_queries": ["NR-500"], "translations": ["NR-500 最大负载是多少？"]}  # fmt: skip

    scripted.structured = {
        "Plan": [plan],
        "PassageGrades": [grade_every("correct")],
        "Reflection": [{"sufficient": True}],
    }

    def answer(messages: list[Any]) -> str:
        assert "<source" in str(messages[-1].content)
        return "It lifts 1500 kg " + "".join(f"[internal-{i}]" for i in range(1, 6))

    scripted.answer = answer
    out = ask(tmp_path, "What is the maximum payload of the NR-500?", model="custom:scripted")
    assert out["crosslingual"]["translated"] == [
        {"language": "zh", "query": "NR-500 最大负载是多少？"}
    ]
    assert any(c["doc_id"] == "product/nr500-manual-zh.md" for c in out["citations"])
    # A plan (with the translation), one listwise grade, the answer and its sufficiency check.
    assert [name for name, _ in scripted.calls] == [
        "Plan",
        "PassageGrades",
        "answer",
        "sufficiency",
    ]


def test_lexical_reranker_runs_in_the_graph(sample_kb: KnowledgeBase, tmp_path: Path) -> None:
    # Compared with reranker="none" (not the offline default "auto", which is lexical
    # already): only the lexical run has a rerank step, and it rescores the candidates.
    question = "How many days of annual leave after 6 years?"
    plain = ask(tmp_path, question, reranker="none")
    out = ask(tmp_path, question, reranker="lexical", rerank_top_n=3)
    assert "rerank" not in plain["timings"] and "rerank" in out["timings"]
    assert out["citations"] and out["citations"][0]["doc_id"].startswith("hr/annual-leave")


def test_rerank_node_rescores_with_lexical_and_leaves_none_alone(
    sample_kb: KnowledgeBase, tmp_path: Path
) -> None:
    from langgraph.runtime import Runtime

    from nodes.rerank import rerank
    from tools.answer.sources import chunk_to_source

    question = "How many days of annual leave after 6 years?"
    docs = [chunk_to_source(h) for h in sample_kb.search(question, k=6)]
    state = {"question": question, "internal_docs": docs}

    def run(reranker: str) -> dict[str, Any]:
        ctx = Context(data_home=str(tmp_path / "home"), reranker=reranker)
        return asyncio.run(rerank(state, Runtime(context=ctx)))  # type: ignore[arg-type]

    assert run("none") == {}
    rescored = {d["id"]: d["relevance"] for d in run("lexical")["internal_docs"]}
    assert rescored.keys() == {d["id"] for d in docs}
    assert rescored != {d["id"]: round(d["relevance"], 4) for d in docs}


def test_llm_reranker_falls_back_on_unparseable_output(
    sample_kb: KnowledgeBase, tmp_path: Path, scripted: ScriptedChatModel
) -> None:
    scripted.structured = {
        "Plan": [{"route": "knowledge", "reason": "policy"}],
        "Ordering": ["unparseable"],
        "PassageGrades": [grade_every("correct")],
        "Reflection": [{"sufficient": True}],
    }
    scripted.answer = lambda m: "Annual leave is 18 days [internal-1]."
    out = ask(
        tmp_path, "annual leave days", model="custom:scripted", reranker="llm", crosslingual=False
    )
    assert any("llm reranking unusable" in w for w in out["warnings"])
    assert out["answer"].startswith("Annual leave is 18 days [internal-1]")


def test_auto_reranker_is_lexical_offline_and_none_with_a_model() -> None:
    from nodes.rerank import effective_reranker

    assert effective_reranker(Context(model="offline"), "offline") == "lexical"
    assert effective_reranker(Context(model="openai:gpt-4o-mini"), "openai:gpt-4o-mini") == "none"
    assert effective_reranker(Context(model="offline", reranker="none"), "offline") == "none"


def test_offline_agent_also_says_no_translation_was_done(
    sample_kb: KnowledgeBase, tmp_path: Path
) -> None:
    from graph.agent.agent_graph import build_agent_graph

    context = Context(data_home=str(tmp_path / "home"), search_provider="none")
    out = asyncio.run(
        build_agent_graph().ainvoke(
            {"question": "How many days of annual leave after 6 years?"}, context=context
        )
    )
    assert "no translation was done" in out["crosslingual"]["note"]
    # The note stays in the report: shown under every answer, same-language ones too, it
    # claimed the KB was matched across languages only weakly (per-language pools now).
    assert not any("translation" in w for w in out["warnings"])
