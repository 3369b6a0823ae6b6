"""What a real small model (Qwen2.5-Coder-1.5B on a CPU, issue 56) exposed, each played by
a fake: a right answer without labels, a route to a web that is off, a fact past the
first 280 characters of its passage, a plan cut off at ``max_tokens``, too many calls."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage

from graph import Context, build_agent_graph, build_graph
from prompts.internal import REFLECT_SYSTEM
from run.models import register_chat_model, unregister_chat_model
from tests.agent_fakes import LocalLLMServer, ToolScriptedChatModel, ask, call
from tests.fakes import ScriptedChatModel, grade_every
from tests.test_agent import SEARCH_ENV
from tools.answer.attribution import attach_labels
from tools.answer.passage_focus import focus_passage

LEAVE_Q = "What is the annual leave entitlement for an employee with 6 years of service?"
PAYLOAD_Q = "What is the rated payload of the NR-200 Porter robot?"
LEAVE_ZH = "司龄满10年的员工每年可以休多少天年假？"
HANG_GUARD_S = 120.0


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in (*SEARCH_ENV, "OPENAI_API_KEY", "OPENAI_BASE_URL", "HYBRID_RAG_MODEL_TIMEOUT"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def agent_model() -> Iterator[ToolScriptedChatModel]:
    fake = ToolScriptedChatModel()
    register_chat_model("small", fake)
    yield fake
    unregister_chat_model("small")


def ctx(home: Path, **kw: Any) -> Context:
    return Context(**{"data_home": str(home), "search_provider": "none", **kw})


def run(builder: Any, question: str, context: Context) -> dict[str, Any]:
    graph = builder()
    return asyncio.run(
        asyncio.wait_for(graph.ainvoke({"question": question}, context=context), HANG_GUARD_S)
    )


def plan(route: str) -> dict[str, Any]:
    return {"route": route, "reason": "r", "kb_queries": [], "web_queries": ["q"]}


# --- a. a right draft without labels ----------------------------------------------------


def test_a_right_answer_without_labels_gets_its_sources_label_not_the_refusal(
    sample_home: Path, scripted: ScriptedChatModel
) -> None:
    scripted.structured = {"Plan": [plan("knowledge")], "PassageGrades": [grade_every("correct")]}
    scripted.answer = lambda m: "The rated payload of the NR-200 Porter robot is 300 kg."
    out = run(build_graph, PAYLOAD_Q, ctx(sample_home, model="custom:scripted"))
    assert out["answer"].startswith("The rated payload of the NR-200 Porter robot is 300 kg [")
    assert out["citations"][0]["doc_id"] == "product/nr200-porter-manual.md"
    assert out["citation_validity"] == 1.0
    assert not any("refusal" in w for w in out["warnings"]), out["warnings"]


def test_the_agents_unlabeled_chinese_answer_is_kept_with_its_label(
    sample_home: Path, agent_model: ToolScriptedChatModel
) -> None:
    agent_model.script = [ask(call("internal_search", query="司龄 10年 年假")),
                          "司龄满10年的员工每年可以休22天年假。"]  # fmt: skip
    out = run(build_agent_graph, LEAVE_ZH, ctx(sample_home, model="custom:small"))
    assert out["answer"].startswith("司龄满10年的员工每年可以休22天年假 [内部-"), out["answer"]
    assert out["citations"] and out["citations"][0]["doc_id"] == "hr/annual-leave-zh.md"


def test_only_what_a_source_supports_gets_a_label() -> None:
    sources = [{"label": "[internal-1]", "title": "Manual", "text": "| Rated payload | 300 kg |"}]
    assert attach_labels("The payload is 500 kg.", PAYLOAD_Q, sources) == (
        "The payload is 500 kg.", 0)  # fmt: skip
    assert attach_labels("No relevant information found.", PAYLOAD_Q, sources)[1] == 0
    two = "It carries 300 kg. It also flies to the moon."
    assert attach_labels(two, PAYLOAD_Q, sources) == (
        "It carries 300 kg [internal-1]. It also flies to the moon.", 1)  # fmt: skip


# --- b. a route to a web that is off ------------------------------------------------------


def test_a_plan_to_search_a_disabled_web_reads_the_knowledge_base(
    sample_home: Path, scripted: ScriptedChatModel
) -> None:
    prompts: list[str] = []

    def planned(messages: list[BaseMessage]) -> dict[str, Any]:
        prompts.append(str(messages[0].content))
        return plan("search")

    scripted.structured = {"Plan": [planned], "PassageGrades": [grade_every("correct")]}
    scripted.answer = lambda m: "Six years of service give 18 days [internal-1]."
    out = run(build_graph, LEAVE_Q, ctx(sample_home, model="custom:scripted"))
    assert out["route"] == "knowledge" and "web search is off" in out["route_reason"]
    assert out["citations"][0]["doc_id"] == "hr/annual-leave.md"
    assert "NOT available" in prompts[0] and '"knowledge" (the only source' in prompts[0]


def test_the_agent_is_offered_only_the_knowledge_base_when_web_search_is_off(
    sample_home: Path, agent_model: ToolScriptedChatModel
) -> None:
    agent_model.script = [ask(call("internal_search", query="annual leave")),
                          "Six years of service give 18 days [internal-1]."]  # fmt: skip
    run(build_agent_graph, LEAVE_Q, ctx(sample_home, model="custom:small"))
    assert {n for c in agent_model.calls for n in c["tools"]} == {"internal_search"}
    system = str(agent_model.calls[0]["messages"][0].content)
    assert "google_search" not in system and "Web search is not available" in system


# --- c. the fact past the snippet ---------------------------------------------------------


def test_the_answer_model_reads_the_row_that_answers_not_the_first_280_characters(
    sample_home: Path, scripted: ScriptedChatModel
) -> None:
    seen: list[str] = []

    def answer(messages: list[BaseMessage]) -> str:
        seen.append(str(messages[-1].content))
        return "Six years of service give 18 days [internal-1]."

    scripted.structured = {"Plan": [plan("knowledge")], "PassageGrades": [grade_every("correct")]}
    scripted.answer = answer
    run(build_graph, LEAVE_Q, ctx(sample_home, model="custom:scripted"))
    assert "| 5 to less than 10 years | 18 days |" in seen[0]


def test_a_focused_passage_keeps_the_matching_row_whole_with_its_header() -> None:
    rows = "\n".join(f"| {n} to {n + 1} years | {n + 9} days |" for n in range(1, 30))
    text = "Intro. " * 80 + "\n| Years | Days |\n|---|---|\n" + rows + "\nClosing words. " * 40
    shown = focus_passage(text, "How many days after 17 years?", 300)
    assert "| 17 to 18 years | 26 days |" in shown and "| Years | Days |" in shown
    assert len(shown) <= 300


# --- d. a plan cut off at max_tokens; reflection's language -----------------------------


def cut_plan(body: dict[str, Any]) -> dict[str, Any]:
    """The planner's JSON runs to the token limit; the answer is a labelled sentence."""
    if body.get("response_format"):
        text = '{"route": "knowledge", "reason": "HR policy", "kb_queries": ["annual leave years'
        return {"content": text, "finish": "length"}
    if body.get("tools"):
        return {"content": "{}"}
    return {"content": "Six years of service give 18 days [internal-1]."}


def test_a_plan_cut_off_at_max_tokens_still_routes_without_a_traceback(
    sample_home: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with LocalLLMServer(respond=cut_plan) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.base_url}/v1")
        with caplog.at_level(logging.INFO, logger="hybrid_rag"):
            out = run(build_graph, LEAVE_Q, ctx(sample_home, model=f"openai:cut-{server.port}"))
    assert out["route"] == "knowledge" and out["route_reason"] == "HR policy"
    assert not any("planner output unusable" in w for w in out["warnings"]), out["warnings"]
    assert not any(r.exc_info for r in caplog.records), [r.getMessage() for r in caplog.records]


def test_reflection_asks_for_a_query_in_the_questions_language() -> None:
    assert "same language as the question" in REFLECT_SYSTEM


# --- e. fewer calls for a small local model -----------------------------------------------


def test_a_small_model_spends_one_call_on_a_question_the_kb_answers(
    sample_home: Path, scripted: ScriptedChatModel
) -> None:
    """One answer call: no plan, no grading, and no sufficiency check (a 1.5B model says
    yes to every one: nodes.sufficiency_check)."""
    scripted.structured = {"Plan": ["unparseable"], "PassageGrades": ["unparseable"]}
    scripted.answer = lambda m: "Six years of service give 18 days [internal-1]."
    out = run(build_graph, LEAVE_Q, ctx(sample_home, model="custom:scripted", small_model=True))
    assert [name for name, _ in scripted.calls] == ["answer"]
    assert out["answer"].startswith("Six years of service give 18 days [internal-1].")
    assert out["route"] == "knowledge" and out["route_reason"].startswith("small model")


def test_a_small_models_agent_searches_the_kb_first_then_answers_in_one_call(
    sample_home: Path, agent_model: ToolScriptedChatModel
) -> None:
    # The 1.5B model answered "No relevant information found" without searching.
    agent_model.script = ["Six years of service give 18 days [internal-1]."]
    out = run(build_agent_graph, LEAVE_Q, ctx(sample_home, model="custom:small", small_model=True))
    assert out["model_calls"] == 1 and len(agent_model.calls) == 1
    assert [c["name"] for c in out["tool_calls"]] == ["internal_search"]
    assert out["tool_calls"][0]["args"] == {"query": LEAVE_Q}
    # The one call is the answer step's prompt: fenced sources, no tools to call.
    assert agent_model.calls[0]["tools"] == []
    assert "| 5 to less than 10 years | 18 days |" in str(
        agent_model.calls[0]["messages"][-1].content
    )
    assert out["answer"].startswith("Six years of service give 18 days [internal-1].")
