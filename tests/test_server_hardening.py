"""Issue 27: a server to put in front of users.

In-process checks first (question of the turn, run deadline, notices in the answer's
language, context rules, build context), then the same through ``langgraph dev`` and
langgraph-sdk on 127.0.0.1 where the point is about the server.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from graph import Context, build_graph
from graph.agent_graph import build_agent_graph
from graph.context import DEPLOYMENT_FIELDS, PER_RUN_FIELDS, api_context
from nodes.prepare import current_question
from tests.local_provider import BlackHole
from tools.answer.notices import localize
from tools.errors import ConfigError

KB_QUESTION = "How many days of annual leave after 6 years of service?"
NEW_QUESTION = "Who approves a purchase of CNY 80,000?"
HANG_GUARD_S = 120.0  # only so a regression fails instead of hanging the suite


# --- 1. the question of the turn -------------------------------------------------------


def test_a_new_question_wins_over_an_unanswered_message_of_a_cancelled_turn() -> None:
    # The cancelled turn's prepare took "old" (asked_id) and added its message; the run
    # never answered. The next input is a plain question.
    old = HumanMessage("old question", id="m1")
    state: dict[str, Any] = {"messages": [old], "asked_id": "m1", "question": NEW_QUESTION}
    assert current_question(state) == (NEW_QUESTION, True)


def test_a_new_chat_message_wins_over_the_previous_turns_question_field() -> None:
    state: dict[str, Any] = {
        "messages": [HumanMessage(KB_QUESTION, id="m1"), AIMessage("18 days", id="a1"),
                     HumanMessage("And carry-over?", id="m2")],
        "asked_id": "m1",
        "question": KB_QUESTION,  # left over from the previous turn
    }  # fmt: skip
    assert current_question(state) == ("And carry-over?", False)


def test_a_new_question_wins_over_a_chat_message_no_prepare_took() -> None:
    # Cancelled before prepare ended: the chat message m2 was never taken.
    state: dict[str, Any] = {
        "messages": [HumanMessage("q0", id="m1"), AIMessage("a0", id="a1"),
                     HumanMessage("never answered", id="m2")],
        "asked_id": "m1",
        "question": NEW_QUESTION,
    }  # fmt: skip
    assert current_question(state) == (NEW_QUESTION, True)


async def test_after_a_cancelled_run_the_thread_answers_the_new_question(
    sample_home: Path, tmp_path: Path
) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    graph = build_graph(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t1"}}
    ctx = Context(data_home=str(sample_home), search_provider="none")
    # A run cancelled after prepare (interrupt_before stands for the cancel).
    await graph.ainvoke({"question": KB_QUESTION}, config, context=ctx, interrupt_before=["route"])
    out = await graph.ainvoke({"question": NEW_QUESTION}, config, context=ctx)
    assert out["question"] == NEW_QUESTION
    assert [m.content for m in out["messages"] if isinstance(m, HumanMessage)][-1] == NEW_QUESTION


# --- 2, 3. what an API caller may set --------------------------------------------------


def test_deployment_fields_are_refused_from_api_callers() -> None:
    assert {"data_home", "chroma_host", "chroma_port"} <= DEPLOYMENT_FIELDS
    assert not DEPLOYMENT_FIELDS & PER_RUN_FIELDS
    for values in ({"data_home": "/tmp/x"}, {"chroma_host": "10.0.0.1"}, {"chroma_port": 1}):
        with pytest.raises(ConfigError, match="set per deployment"):
            api_context(values)
    assert api_context({"data_home": ""}).data_home == ""  # the default is harmless


def test_other_configurable_keys_pass_and_misspelt_fields_fail() -> None:
    ctx = api_context({"user_id": "u1", "thread_ts": "x", "top_k_web": 3})
    assert ctx.top_k_web == 3
    with pytest.raises(ConfigError, match=r"confidnce_threshold \(did you mean"):
        api_context({"confidnce_threshold": 0.5})


# --- 4. one run deadline ---------------------------------------------------------------


@pytest.mark.parametrize("builder", [build_graph, build_agent_graph])
async def test_a_hung_model_ends_at_the_run_deadline_with_an_answer(
    sample_home: Path, monkeypatch: pytest.MonkeyPatch, builder: Any
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("HYBRID_RAG_MODEL_TIMEOUT", raising=False)  # 60 s per call, retried
    with BlackHole() as hole:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{hole.url}/v1")
        ctx = Context(
            data_home=str(sample_home), model="openai:hung", search_provider="none",
            crosslingual=False, run_timeout_s=2,
        )  # fmt: skip
        out = await asyncio.wait_for(
            builder().ainvoke({"question": KB_QUESTION}, context=ctx), HANG_GUARD_S
        )
    if builder is build_graph:  # it retrieved before the deadline; the agent's model hung first
        assert "18 days" in out["answer"], out["answer"]
    assert out["answer"].count("The run deadline (2 s) was reached") == 1, out["answer"]
    assert any("run deadline" in w for w in out["warnings"]), out["warnings"]


# --- 10. notices in the answer's language ----------------------------------------------


def test_notices_are_localized() -> None:
    text = "web search not configured: set one of SERPER_API_KEY, X (or use provider 'ddgs' after pip install ddgs)"
    zh = localize(text, "zh")
    assert zh.startswith("未配置网络搜索：请设置 SERPER_API_KEY, X 之一"), zh
    assert localize(text, "en") == text
    assert localize("web search failed: web search is disabled (search_provider=none)", "zh") == (
        "网络搜索失败：网络搜索已关闭（search_provider=none）"
    )


async def test_a_chinese_answer_carries_chinese_reasons(sample_home: Path) -> None:
    ctx = Context(data_home=str(sample_home))
    out = await build_graph().ainvoke({"question": "今天上海的天气怎么样？"}, context=ctx)
    assert out["language"] == "zh"
    assert "实时网络结果不可用：未配置网络搜索" in out["answer"], out["answer"]
    assert "web search" not in out["answer"]
    assert out["warnings"] and not any("web search" in w for w in out["warnings"]), out["warnings"]
