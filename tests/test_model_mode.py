"""Model mode as a weak real model drives it (issue 46): bounded calls, no repeated
searches, no junk translation, relevance of the fallback answers, notices in the user's
language, the deadline stated once and counted. A scripted fake reproduces what a real
135M model did (endless output, the same tool call again, "," as a translation)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import ToolMessage

from graph import Context, build_agent_graph, build_graph
from run.localize import localize
from run.models import load_chat_model, register_chat_model, unregister_chat_model
from run.run_settings import ModelEnv
from tests.agent_fakes import LocalLLMServer, ToolScriptedChatModel, ask, call
from tests.local_provider import BlackHole
from tests.test_agent import SEARCH_ENV
from tools.answer.crosslingual import planned_translations
from tools.policy.refusal import check_answer
from tools.policy.relevance import missing_terms, quotable_sources
from tools.policy.translation import translation_problem
from tools.text import count_cjk
from tools.websearch import SearchCache, set_default_cache

KB_Q = "How many days of annual leave after 6 years of service?"
BADGE_Q = "What do visitors receive as a badge at reception?"  # the KB: "Visitors receive a vest…"
HANG_GUARD_S = 120.0  # only so a regression fails instead of hanging the suite


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for var in (*SEARCH_ENV, "OPENAI_API_KEY", "OPENAI_BASE_URL", "HYBRID_RAG_MODEL_TIMEOUT"):
        monkeypatch.delenv(var, raising=False)
    set_default_cache(SearchCache())
    yield
    set_default_cache(None)


@pytest.fixture
def agent_model() -> Iterator[ToolScriptedChatModel]:
    fake = ToolScriptedChatModel()
    register_chat_model("weak", fake)
    yield fake
    unregister_chat_model("weak")


def context(home: Path, **kw: Any) -> Context:
    values: dict[str, Any] = {"data_home": str(home), "search_provider": "none"}
    return Context(**{**values, **kw})


def run(builder: Any, question: str, ctx: Context) -> dict[str, Any]:
    return asyncio.run(
        asyncio.wait_for(builder().ainvoke({"question": question}, context=ctx), HANG_GUARD_S)
    )


# --- 1. max_tokens on every model call --------------------------------------------------


def endless(body: dict[str, Any]) -> dict[str, Any]:
    """A model that writes until its token limit (a real 135M model wrote 3,000-4,500
    tokens per call): without one in the request, a long ramble."""
    limit = body.get("max_tokens") or body.get("max_completion_tokens")
    words = ["leave"] * (int(limit) if limit else 5000)
    return {"content": " ".join(words[:5000]), "usage": {"prompt_tokens": 10,
            "completion_tokens": len(words), "total_tokens": 10 + len(words)}}  # fmt: skip


@pytest.mark.parametrize("builder", [build_graph, build_agent_graph])
def test_every_model_call_is_bounded_by_max_output_tokens(
    sample_home: Path, monkeypatch: pytest.MonkeyPatch, builder: Any
) -> None:
    with LocalLLMServer(respond=endless) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.base_url}/v1")
        out = run(builder, "年假有几天？", context(sample_home, model="openai:weak",
                                                  max_output_tokens=64))  # fmt: skip
        bodies = list(server.requests)
    assert out["answer"] and bodies
    # Both names: LangChain's max_completion_tokens, and max_tokens for the local servers
    # that read only the older name (llama.cpp before 2026, llama-cpp-python).
    limits = [(b.get("max_completion_tokens"), b.get("max_tokens")) for b in bodies]
    assert limits == [(64, 64)] * len(bodies), limits


def test_max_output_tokens_is_a_context_field_with_a_default() -> None:
    assert Context().max_output_tokens == 1024
    with pytest.raises(Exception, match="max_output_tokens"):
        Context(max_output_tokens=0)


def test_only_a_local_server_also_gets_the_older_max_tokens() -> None:
    local = load_chat_model("openai:probe", ModelEnv("http://127.0.0.1:8080/v1", max_tokens=99))
    hosted = load_chat_model("openai:probe", ModelEnv("https://api.openai.com/v1", "sk-x"))
    assert getattr(local, "extra_body", None) == {"max_tokens": 99}
    assert getattr(hosted, "extra_body", None) is None
    assert getattr(hosted, "max_tokens", None) == 1024


# --- 2. the agent never re-runs an identical tool call ----------------------------------


def test_an_identical_tool_call_is_answered_from_the_first_then_the_agent_stops(
    sample_home: Path, agent_model: ToolScriptedChatModel
) -> None:
    agent_model.script = [ask(call("internal_search", query="annual leave  days"))]  # repeats
    out = run(build_agent_graph, KB_Q, context(sample_home, model="custom:weak"))
    assert [c["name"] for c in out["tool_calls"]] == ["internal_search"]  # ran once
    assert out["model_calls"] == 3  # asked, repeated (told), repeated again: stopped
    notes = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert len(notes) == 2 and "Not run again" in notes[1].text
    assert "[internal-1]" in notes[1].text  # the note points at the first call's results
    assert any("asked again for a search" in w for w in out["warnings"]), out["warnings"]
    # A repeat answered from the first call is not a call the budget refused (SmolLM2-135M
    # got "1 tool call(s) not run: max_tool_calls (8) reached" after 2 calls).
    assert not any("max_tool_calls" in w for w in out["warnings"]), out["warnings"]
    # The prompt does not grow by a second copy of the results.
    last_prompt = agent_model.calls[-1]["messages"]
    assert sum(isinstance(m, ToolMessage) and "<source" in m.text for m in last_prompt) == 1


def test_a_repeated_call_beside_a_new_one_runs_only_the_new_one(
    sample_home: Path, agent_model: ToolScriptedChatModel
) -> None:
    first = call("internal_search", query="annual leave")
    agent_model.script = [
        ask(first),
        ask(
            call("internal_search", query="Annual   LEAVE"), call("internal_search", query="NR-500")
        ),
        "Employees with 6 years of service get 18 days [internal-1].",
    ]
    out = run(build_agent_graph, KB_Q, context(sample_home, model="custom:weak"))
    assert [c["args"]["query"] for c in out["tool_calls"]] == ["annual leave", "NR-500"]
    assert out["citations"]
    assert not any("max_tool_calls" in w for w in out["warnings"]), out["warnings"]


# --- 3. junk translations ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "text", "target", "problem"),
    [
        ("年假有几天？", ",", "en", "not written in English"),
        ("年假有几天？", "knnweld", "en", "not written in English"),
        ("年假有几天？", "", "en", "empty"),
        ("年假有几天？", "年假有几天？", "en", "the question unchanged"),
        ("年假有几天？", "How many days " * 40, "en", "much longer than the question"),
        ("What is the maximum payload of the NR-500?", "最大负载", "zh", "'NR-500' of the question is missing"),
        ("What is the maximum payload of the NR-500?", "payload", "zh", "not written in Chinese"),
        ("工作6年后有几天年假？", "How many days of annual leave after years?", "en", "'6' of the question is missing"),
        ("年假有几天？", "How many days of annual leave?", "en", ""),
        ("What is the maximum payload of the NR-500?", "NR-500 最大负载是多少？", "zh", ""),
    ],
)  # fmt: skip
def test_translation_rule(question: str, text: str, target: str, problem: str) -> None:
    assert translation_problem(question, text, target) == problem


def test_planned_translations_reject_junk_and_say_why() -> None:
    queries, report = planned_translations("年假有几天？", ["en"], [","], {})
    assert queries == [] and report["translated"] == []
    assert report["rejected"] == [
        {"language": "en", "query": ",", "reason": "not written in English"}
    ]
    queries, _ = planned_translations("年假有几天？", ["en"], ["knnweld"], {})
    assert queries == []
    queries, _ = planned_translations(
        "年假有几天？", ["en"], ["How many days of annual leave?"], {}
    )
    assert queries == ["How many days of annual leave?"]


# --- 4. relevance of the extractive answers ---------------------------------------------


@pytest.mark.parametrize("builder", [build_graph, build_agent_graph])
def test_offline_a_question_on_visitor_badges_is_not_answered_with_the_vest(
    sample_home: Path, builder: Any
) -> None:
    out = run(builder, BADGE_Q, context(sample_home))
    assert "vest" not in out["answer"], out["answer"]
    assert out["answer"].startswith("No relevant information found."), out["answer"]


def test_the_agents_bounded_answer_checks_relevance(
    sample_home: Path, agent_model: ToolScriptedChatModel
) -> None:
    agent_model.script = [ask(call("internal_search", query="visitor")), ""]  # then nothing
    out = run(build_agent_graph, BADGE_Q, context(sample_home, model="custom:weak"))
    assert any("replied with nothing" in w for w in out["warnings"]), out["warnings"]
    assert "vest" not in out["answer"] and out["answer"].startswith("No relevant"), out["answer"]


@pytest.mark.parametrize(
    ("question", "texts", "missing"),
    [
        ("What do visitors receive as a badge at reception?",
         ["Visitors receive a vest and overshoes at the reception desk."], ["badge"]),
        ("How many minutes does the D9 drone fly?", ["The D9 drone flies 42 minutes."], []),
        ("Do visitors wear badges?", ["Every visitor wears a badge."], []),  # stems
        ("Who won the 2026 Tokyo marathon? Latest news please.",  # nor is "please"
         ["Jane Runner won the 2026 Tokyo marathon, the latest news says."], []),
        ("How many kilograms can the R2 warehouse robot carry?",  # a unit is no key term
         ["The R2 warehouse robot carries 300 kg."], []),
        ("What is the latest stable Python release today?",  # routing cues are not key
         ["Python 3.14.2 is the latest stable release of Python."], []),
        ("How many days of annual leave does an employee with 6 years of service get?",
         ["Employees with 5 to 10 years of service have 18 days of annual leave."], []),  # "get"
        ("访客的胸牌是什么颜色？", ["访客领取背心。"], ["胸牌"]),  # Chinese too (issue 56)
    ],
)  # fmt: skip
def test_key_terms_no_passage_mentions(question: str, texts: list[str], missing: list[str]) -> None:
    assert missing_terms(question, texts) == missing


def test_only_passages_on_the_point_are_quoted() -> None:
    web = {
        "kind": "web",
        "title": "Tesla Model 3 price",
        "text": "The Tesla Model 3 costs USD 42,490.",
    }
    note = {"kind": "internal", "text": "FleetCloud price replaces the per-site pricing model."}
    other = {"kind": "internal", "lang": "zh", "text": "特斯拉的价格。"}
    kept, missing = quotable_sources(
        "What is the current price of a Tesla Model 3?", [note, web, other]
    )
    assert kept == [web, other] and missing == []


# --- 5. notices in the user's language ---------------------------------------------------


@pytest.mark.parametrize(
    "notice",
    [
        "answer replaced by the refusal: the answer cites no source",
        "answer replaced by the refusal: refusal reworded",
        "answer replaced by the refusal: the model gave no answer",
        "answer replaced by the refusal: the answer copies the prompt's source markup",
        "answer replaced by the refusal: only 12% of the answer's terms occur in the sources it cites",
        "agent stopped: the model replied with nothing; answered extractively from the sources gathered",
        "agent stopped: the max_tool_calls bound (8) was reached; answered extractively from the sources gathered",
        "agent stopped: the model asked again for a search it had already made; answered extractively from the sources gathered",
        "model call failed: APITimeoutError; the offline rules answer",
        "google_search: web search failed: web search is disabled (search_provider=none)",
        # seen with SmolLM2-135M (bench/README.md): a plan cut off by max_tokens, a bad gl
        "planner output unusable (LengthFinishReasonError); routed to both",
        # the model's sufficiency check (nodes.sufficiency_check)
        "answer replaced by the refusal: the model judged that no source states the answer",
        "sufficiency check failed (APITimeoutError); answer kept",
        "sufficiency check: the model replied neither yes nor no ('Perhaps')",
        "google_search: Error: google_search arguments rejected: invalid gl 'zh-CN': expected a two-letter country code like 'us'. Fix them and call again.",
        "google_search: Error: google_search arguments rejected: invalid hl 'xx_1': expected a language code like 'en' or 'zh-CN'. Fix them and call again.",
    ],
)  # fmt: skip
def test_every_notice_has_chinese_text(notice: str) -> None:
    text = localize(notice, "zh")
    ascii_words = [w for w in text.split() if w.isascii() and w.isalpha() and len(w) > 3]
    assert count_cjk(text) > 0 and ascii_words == [], text


def test_a_chinese_questions_refusal_warning_is_chinese(
    sample_home: Path, agent_model: ToolScriptedChatModel
) -> None:
    agent_model.script = [ask(call("internal_search", query="年假")), "年假很多。"]  # no label
    out = run(build_agent_graph, "年假有几天？", context(sample_home, model="custom:weak"))
    assert out["answer"].startswith("没找到相关信息"), out["answer"]
    assert "回答已替换为拒答：回答没有引用任何来源" in out["warnings"], out["warnings"]
    assert not any("answer replaced" in w for w in out["warnings"])


# --- 6-8. no "offline" in model mode; the deadline once, and counted -----------------------


def test_the_agents_bounded_answer_in_chinese_never_says_offline(
    sample_home: Path, agent_model: ToolScriptedChatModel
) -> None:
    agent_model.script = [ask(call("internal_search", query="annual leave")), ""]
    out = run(build_agent_graph, "工作6年后年假有几天？", context(sample_home, model="custom:weak"))
    assert "离线" not in out["answer"] and "offline" not in out["answer"].lower(), out["answer"]
    assert "模型的回复为空" in out["answer"], out["answer"]  # the reason, in Chinese too


def test_a_failed_answer_model_is_not_called_offline(
    sample_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # refused at once
    monkeypatch.setenv("HYBRID_RAG_MODEL_TIMEOUT", "2")
    out = run(build_graph, KB_Q, context(sample_home, model="openai:down", crosslingual=False))
    assert "18 days" in out["answer"]
    assert "Offline mode" not in out["answer"] and "language model did not answer" in out["answer"]


@pytest.mark.parametrize("builder", [build_graph, build_agent_graph])
def test_at_the_deadline_the_answer_says_it_once_and_the_cut_call_is_counted(
    sample_home: Path, monkeypatch: pytest.MonkeyPatch, builder: Any
) -> None:
    with BlackHole() as hole:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{hole.url}/v1")
        ctx = context(sample_home, model="openai:hung", crosslingual=False, run_timeout_s=2)
        out = run(builder, KB_Q, ctx)
    answer = out["answer"]
    assert answer.count("The run deadline (2 s) was reached") == 1, answer
    assert "Offline mode" not in answer and "run deadline" not in answer.replace(
        "The run deadline (2 s) was reached", ""
    ), answer
    assert not any("deadline" in w for w in out["warnings"]), out["warnings"]
    if builder is build_agent_graph:
        assert out["model_calls"] == 1  # the one call the deadline cut off


def test_an_answer_copying_the_prompts_source_block_is_refused() -> None:
    """SmolLM2-135M answered a Chinese question with its prompt's source block, label
    included: the citation was valid and the words were the source's, so it was kept."""
    src = {"label": "[内部-1]", "title": "北风机器人年假制度",
           "text": "公司鼓励每位员工在当年内休完年假，未休年假最多可结转5天。"}  # fmt: skip
    echo = ('来源：\n<internal_sources>\n<source label="[内部-1]" title="北风机器人年假制度" '
            'doc_id="hr/annual-leave-zh.md">\n公司鼓励每位员工在当年内休完年假')  # fmt: skip
    check = check_answer(echo, "每年最多可以结转几天未休年假？", [src], "zh")
    assert check.refused and check.answer == "没找到相关信息。", check
    assert check.reason == "the answer copies the prompt's source markup"
    kept = check_answer(
        "未休年假最多可结转5天[内部-1]。", "每年最多可以结转几天未休年假？", [src], "zh"
    )
    assert not kept.refused, kept
