"""Human approval of paid web search (``Context.approve_web_search``), in both graphs.

Web search is configured against a local Serper-shaped provider on 127.0.0.1, so the
provider's request log shows exactly what was searched, and when.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from graph import Context, build_agent_graph, build_graph
from graph.persistence import open_graph, run_config
from prompts.answer import WEB_NOT_AVAILABLE_SENTENCE_EN
from run.approval_interrupt import CheckpointerRequiredError
from run.models import register_chat_model, unregister_chat_model
from tests.agent_fakes import ToolScriptedChatModel, ask, call
from tests.local_provider import LocalServer, Reply
from tests.test_agent import SEARCH_ENV
from tests.test_graph_web import SERPER_BODY
from tools.answer.search_service import WEB_DISABLED
from tools.kb.knowledge_base import KnowledgeBase
from tools.websearch import (
    SKIPPED_BY_USER,
    SearchCache,
    WebSearchSettings,
    approval_request,
    set_default_cache,
)
from tools.websearch.approval import InvalidDecisionError

WEB_Q = "What is the latest stable Python release today?"
BOTH_Q = "What is the latest news on our annual leave policy, 5 to 10 years of service?"
SKIPPED_SENTENCE = f"Live web results were unavailable: {SKIPPED_BY_USER}."
PAYLOAD_KEYS = {"type", "message", "queries", "provider", "failover", "price_per_query_usd",
                "estimated_cost_usd", "cached_queries", "price_note", "max_queries", "resume",
                "action_requests", "review_configs"}  # fmt: skip


@pytest.fixture(autouse=True)
def _fresh_cache(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for var in (*SEARCH_ENV, "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    set_default_cache(SearchCache())
    yield
    set_default_cache(None)


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalServer]:
    with LocalServer() as srv:
        srv.route("/search", Reply(SERPER_BODY))
        monkeypatch.setenv("SERPER_API_KEY", "test-key")
        monkeypatch.setenv("SERPER_BASE_URL", srv.url)
        yield srv


def ctx(home: Path, **kw: Any) -> Context:
    values: dict[str, Any] = {"data_home": str(home), "search_provider": "serper",
                              "approve_web_search": True, "max_iterations": 0}  # fmt: skip
    values.update(kw)
    return Context(**values)


def searched(provider: LocalServer) -> list[str]:
    """The queries the provider received, sorted: one step's searches run concurrently."""
    return sorted(r.body["q"] for r in provider.hits("/search"))


async def ask_and_answer(
    graph: Any, config: RunnableConfig, context: Context, question: str, decision: Any
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Ask, then answer every approval request with ``decision``; the final state and the
    requests made (bounded: a run never asks more than a few times)."""
    out = await graph.ainvoke({"question": question}, config, context=context)
    asked: list[dict[str, Any]] = []
    while "__interrupt__" in out:
        assert len(asked) < 4, asked
        asked.append(out["__interrupt__"][0].value)
        out = await graph.ainvoke(Command(resume=decision), config, context=context)
    return out, asked


def thread(name: str) -> RunnableConfig:
    return {"configurable": {"thread_id": name}}


# --- the state graph -------------------------------------------------------------------


async def test_approve_runs_the_planned_search_only_after_approval(
    sample_kb: KnowledgeBase, provider: LocalServer
) -> None:
    graph = build_graph(checkpointer=InMemorySaver())
    context = ctx(sample_kb.home)
    paused = await graph.ainvoke({"question": WEB_Q}, thread("a"), context=context)
    request = paused["__interrupt__"][0].value
    assert searched(provider) == []  # nothing is spent before the answer
    assert set(request) == PAYLOAD_KEYS and request["type"] == "web_search_approval"
    assert request["queries"][0] == WEB_Q and len(request["queries"]) == 2
    assert request["provider"] == "serper" and request["price_per_query_usd"] == 0.001
    assert request["estimated_cost_usd"] == pytest.approx(0.002)
    assert "USD 0.002" in request["message"]
    state = await graph.aget_state(thread("a"))
    assert state.next == ("search_web",)
    out = await graph.ainvoke(Command(resume={"action": "approve"}), thread("a"), context=context)
    assert "__interrupt__" not in out
    assert searched(provider) == sorted(request["queries"])
    assert "[web-1]" in out["answer"] and out["citation_validity"] == 1.0
    assert out["citations"][0]["url"].startswith("https://www.python.org/")
    assert out["search_calls"] == 2 and out["search_cost"] == pytest.approx(0.002)
    # Asked again on another thread: every query is cached, it costs nothing, so nothing
    # is asked (a second approval for a free search was asked before) and nothing is sent.
    again = await graph.ainvoke({"question": WEB_Q}, thread("a2"), context=context)
    assert "__interrupt__" not in again and "[web-1]" in again["answer"]
    assert searched(provider) == sorted(request["queries"])  # no second request
    assert again["search_cost"] == 0


async def test_edit_searches_the_new_queries(
    sample_kb: KnowledgeBase, provider: LocalServer
) -> None:
    graph = build_graph(checkpointer=InMemorySaver())
    decision = {"action": "edit", "queries": ["  python 3.14   release ", "python.org news"]}
    out, asked = await ask_and_answer(graph, thread("e"), ctx(sample_kb.home), WEB_Q, decision)
    assert len(asked) == 1
    assert searched(provider) == ["python 3.14 release", "python.org news"]
    assert "[web-1]" in out["answer"] and out["citations"]
    assert out["search_calls"] == 2 and "Live web results were unavailable" not in out["answer"]


async def test_skip_answers_from_the_kb_and_says_web_search_was_skipped(
    sample_kb: KnowledgeBase, provider: LocalServer
) -> None:
    graph = build_graph(checkpointer=InMemorySaver())
    # Default max_iterations: a skipped search is not offered again by reflection.
    context = ctx(sample_kb.home, max_iterations=2)
    out, asked = await ask_and_answer(graph, thread("s"), context, BOTH_Q, "skip")
    assert len(asked) == 1 and searched(provider) == []
    assert out["route"] == "both"
    assert re.search(r"\[internal-\d+\]", out["answer"])  # the KB path answered
    assert out["answer"].endswith(SKIPPED_SENTENCE)  # the web-unavailable note, one rule
    assert SKIPPED_BY_USER not in out["warnings"]  # said once, in the answer's note (issue 45)
    assert out["search_cost"] == 0 and out["search_calls"] == 0
    assert [m.type for m in out["messages"]] == ["human", "ai"]


async def test_both_route_keeps_the_kb_branch_while_waiting(
    sample_kb: KnowledgeBase, provider: LocalServer
) -> None:
    graph = build_graph(checkpointer=InMemorySaver())
    context = ctx(sample_kb.home)
    paused = await graph.ainvoke({"question": BOTH_Q}, thread("b"), context=context)
    assert paused["__interrupt__"]
    tasks = {t.name: t for t in (await graph.aget_state(thread("b"))).tasks}
    assert set(tasks) == {"retrieve_internal", "search_web"}  # one step, as without approval
    assert tasks["retrieve_internal"].result["internal_docs"]  # done while waiting
    assert tasks["search_web"].interrupts and searched(provider) == []
    parts = [
        part
        async for part in graph.astream(
            Command(resume="approve"),
            thread("b"),
            context=context,
            stream_mode=["updates", "custom"],
        )
    ]
    steps = [data["step"] for mode, data in parts if mode == "custom"]
    ran = [next(iter(data)) for mode, data in parts if mode == "updates"]
    assert "retrieving" not in steps and "searching" in steps  # only search_web ran again
    assert ran.count("rerank") == 1 and ran.count("search_web") == 1  # one join, not two
    out = (await graph.aget_state(thread("b"))).values
    assert re.search(r"\[internal-\d+\]", out["answer"]) and out["internal_docs"]
    assert out["web_docs"] and searched(provider) and "unavailable" not in out["answer"]


@pytest.mark.parametrize(
    ("decision", "problem"),
    [
        ({"action": "edit", "queries": []}, "edit needs 1 to 5 queries, got 0"),
        ({"action": "edit", "queries": [f"q{i}" for i in range(6)]}, "got 6"),
        ({"action": "edit", "queries": ["python", "   "]}, "query 2: web search query is empty"),
        ({"action": "edit", "queries": ["x" * 2100]}, "query 1: web search query is too long"),
        ({"action": "edit", "queries": "python"}, "queries must be a list of strings"),
        ({"action": "edit"}, "action 'edit' needs 'queries'"),
        ({"action": "maybe"}, "action must be approve, edit or skip, got 'maybe'"),
        ({"action": "skip", "queries": ["x"]}, "'queries' only go with action 'edit'"),
        (42, "resume with {'action'"),
    ],
)
async def test_an_invalid_answer_names_the_problem_and_can_be_answered_again(
    sample_kb: KnowledgeBase, provider: LocalServer, decision: Any, problem: str
) -> None:
    graph = build_graph(checkpointer=InMemorySaver())
    context = ctx(sample_kb.home)
    await graph.ainvoke({"question": WEB_Q}, thread("x"), context=context)
    with pytest.raises(InvalidDecisionError, match=re.escape(problem)):
        await graph.ainvoke(Command(resume=decision), thread("x"), context=context)
    state = await graph.aget_state(thread("x"))
    assert state.next == ("search_web",) and state.interrupts  # still waiting
    assert searched(provider) == []
    out = await graph.ainvoke(Command(resume="approve"), thread("x"), context=context)
    assert "[web-1]" in out["answer"] and len(searched(provider)) == 2


async def test_without_a_checkpointer_the_run_fails_upfront_naming_the_problem(
    sample_kb: KnowledgeBase, provider: LocalServer
) -> None:
    for graph in (build_graph(), build_agent_graph()):
        with pytest.raises(CheckpointerRequiredError, match="approve_web_search needs a check"):
            await graph.ainvoke({"question": WEB_Q}, context=ctx(sample_kb.home))
    assert searched(provider) == []


@pytest.mark.parametrize("search_provider", ["auto", "none"])
async def test_nothing_is_asked_when_web_search_is_not_configured(
    sample_kb: KnowledgeBase, search_provider: str
) -> None:
    # No search key in the environment and no checkpointer: nothing to pay for, no pause.
    context = ctx(sample_kb.home, search_provider=search_provider)
    for graph in (build_graph(), build_agent_graph()):
        out = await graph.ainvoke({"question": WEB_Q}, context=context)
        assert "__interrupt__" not in out
        # Not set up: said plainly (issue 56), no configuration detail in an answer; a
        # run's own setting stays readable to its operator (tools/policy/disclosure.py).
        said = WEB_NOT_AVAILABLE_SENTENCE_EN if search_provider == "auto" else WEB_DISABLED
        assert said in out["answer"]
        assert SKIPPED_BY_USER not in out["answer"]


async def test_switch_off_never_asks(sample_kb: KnowledgeBase, provider: LocalServer) -> None:
    out = await build_graph().ainvoke(
        {"question": WEB_Q}, context=ctx(sample_kb.home, approve_web_search=False)
    )
    assert "__interrupt__" not in out and "[web-1]" in out["answer"]


async def test_the_sqlite_checkpointer_resumes_after_a_restart(
    sample_kb: KnowledgeBase, provider: LocalServer, tmp_path: Path
) -> None:
    db = tmp_path / "approval.sqlite"
    context = ctx(sample_kb.home)
    async with open_graph(db) as graph:
        paused = await graph.ainvoke({"question": WEB_Q}, run_config("u1"), context=context)
    assert paused["__interrupt__"][0].value["provider"] == "serper"
    async with open_graph(db) as graph:  # a new process would do the same
        state = await graph.aget_state(run_config("u1"))
        assert state.interrupts[0].value == paused["__interrupt__"][0].value
        out = await graph.ainvoke(
            Command(resume={"action": "edit", "queries": ["python release"]}),
            run_config("u1"),
            context=context,
        )
    assert searched(provider) == ["python release"] and "[web-1]" in out["answer"]


@pytest.mark.parametrize("builder", [build_graph, build_agent_graph])
async def test_an_approval_answered_hours_later_gets_a_fresh_deadline(
    sample_kb: KnowledgeBase, provider: LocalServer, monkeypatch: pytest.MonkeyPatch, builder: Any
) -> None:
    """The resumed run is a new run: its own settings and deadline, not the paused run's,
    long past (it would answer late: no search, "the run deadline was reached"). Told
    apart through the state alone: the untracked settings channel, empty on resume
    (issue 42 item 2: no private LangGraph key, run.deadline.resumed_run)."""
    import time

    graph = builder(checkpointer=InMemorySaver())
    context = ctx(sample_kb.home, run_timeout_s=60)
    paused = await graph.ainvoke({"question": WEB_Q}, thread("late"), context=context)
    assert paused["__interrupt__"]
    state = await graph.aget_state(thread("late"))
    assert "run_settings" not in state.values and "deadline" not in state.values  # per run
    now = time.time()
    monkeypatch.setattr(time, "time", lambda: now + 3 * 3600)  # answered three hours later
    out = await graph.ainvoke(Command(resume="approve"), thread("late"), context=context)
    assert "__interrupt__" not in out
    assert "deadline" not in out["answer"], out["answer"]
    assert not any("deadline" in w for w in out["warnings"]), out["warnings"]
    assert searched(provider) and "[web-1]" in out["answer"]


def test_a_node_without_its_runs_settings_fails_naming_the_problem(
    sample_kb: KnowledgeBase, provider: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing below prepare reads the environment, not even as a fallback: a node called
    on its own without the settings prepare resolves gets a clear error, and the search
    it would have made reads no environment variable (issue 42 item 2)."""
    import asyncio
    import os

    from langgraph.runtime import Runtime

    from nodes.retrieve import search_web
    from run.run_settings import resolve_run_settings
    from run.run_view import RunSettingsMissingError

    context = ctx(sample_kb.home, approve_web_search=False)
    state: dict[str, Any] = {"question": WEB_Q, "route": "search", "web_queries": [WEB_Q]}
    with pytest.raises(RunSettingsMissingError, match=r"run's settings are missing.*prepare"):
        asyncio.run(search_web(state, Runtime(context=context)))  # type: ignore[arg-type]
    assert searched(provider) == []
    # With them (as prepare resolves them), the environment is not read again.
    state["run_settings"] = resolve_run_settings(context)
    monkeypatch.setattr(os, "environ", {})  # a read would find no key and search nothing
    out = asyncio.run(search_web(state, Runtime(context=context)))  # type: ignore[arg-type]
    assert out["web_docs"] and searched(provider) == [WEB_Q]


# --- the agent graph (same helper, same payload, same answers) --------------------------


@pytest.mark.parametrize(
    ("decision", "expected_queries"),
    [
        ("approve", [WEB_Q]),
        ({"action": "edit", "queries": ["python release", "python news"]},
         ["python release", "python news"]),
        ("skip", []),
    ],
)  # fmt: skip
async def test_offline_agent_asks_inside_google_search(
    sample_kb: KnowledgeBase,
    provider: LocalServer,
    decision: Any,
    expected_queries: list[str],
) -> None:
    graph = build_agent_graph(checkpointer=InMemorySaver())
    out, asked = await ask_and_answer(graph, thread("g"), ctx(sample_kb.home), WEB_Q, decision)
    assert len(asked) == 1 and set(asked[0]) == PAYLOAD_KEYS
    assert asked[0]["queries"] == [WEB_Q] and asked[0]["estimated_cost_usd"] == 0.001
    assert searched(provider) == sorted(expected_queries)
    assert [m.type for m in out["messages"]] == ["human", "ai", "tool", "ai"]
    tool = out["messages"][2]
    assert isinstance(tool, ToolMessage) and tool.name == "google_search"
    if decision == "skip":
        assert "google_search was not run: web search was skipped by the user" in tool.content
        assert out["answer"].endswith(SKIPPED_SENTENCE) and out["search_cost"] == 0
        assert out["tool_calls"][0]["ok"] is False
    else:
        assert "[web-1]" in out["answer"] and out["citation_validity"] == 1.0
        assert out["search_calls"] == len(expected_queries)
    if isinstance(decision, dict):
        assert "The user edited this web search to: 'python release'" in tool.content


@pytest.fixture
def model() -> Iterator[ToolScriptedChatModel]:
    fake = ToolScriptedChatModel()
    register_chat_model("approval-agent", fake)
    yield fake
    unregister_chat_model("approval-agent")


async def test_model_agent_skip_is_a_tool_message_and_is_not_asked_twice(
    sample_kb: KnowledgeBase, provider: LocalServer, model: ToolScriptedChatModel
) -> None:
    model.script = [
        ask(call("google_search", query="python release", hl="en", gl="us")),
        ask(call("google_search", query="python 3.14", hl="en", gl="us"),
            call("internal_search", query="python")),
        "No web results were allowed; nothing in the knowledge base.",
    ]  # fmt: skip
    graph = build_agent_graph(checkpointer=InMemorySaver())
    context = ctx(sample_kb.home, model="custom:approval-agent")
    out, asked = await ask_and_answer(graph, thread("m"), context, WEB_Q, {"action": "skip"})
    assert len(asked) == 1 and asked[0]["queries"] == ["python release"]
    assert searched(provider) == []
    tools = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert [t.name for t in tools] == ["google_search", "google_search", "internal_search"]
    assert all(SKIPPED_BY_USER in str(t.content) for t in tools[:2])
    seen = [str(m.content) for m in model.calls[1]["messages"] if isinstance(m, ToolMessage)]
    assert "tell the user that web search was skipped" in seen[0]
    assert out["answer"].endswith(SKIPPED_SENTENCE)
    assert isinstance(out["messages"][-1], AIMessage)


async def test_model_agent_approve(
    sample_kb: KnowledgeBase, provider: LocalServer, model: ToolScriptedChatModel
) -> None:
    model.script = [ask(call("google_search", query="python release", hl="en", gl="us")),
                    "Python 3.14.2 is the latest release [web-1]."]  # fmt: skip
    graph = build_agent_graph(checkpointer=InMemorySaver())
    context = ctx(sample_kb.home, model="custom:approval-agent")
    out, asked = await ask_and_answer(graph, thread("ma"), context, WEB_Q, "approve")
    assert len(asked) == 1 and searched(provider) == ["python release"]
    assert out["answer"] == "Python 3.14.2 is the latest release [web-1]."
    assert len(model.calls) == 2  # the model is not asked again on resume


# --- the request itself ----------------------------------------------------------------


def test_request_prices_cached_queries_at_zero_and_names_unknown_prices() -> None:
    serper = WebSearchSettings(provider="serper,searxng", api_keys={"serper": "k"},
                               base_urls={"searxng": "http://127.0.0.1:1"})  # fmt: skip
    request = approval_request(serper, ["a b", "a  b", "c"])
    assert request["queries"] == ["a b", "c"] and request["failover"] == ["searxng"]
    assert request["estimated_cost_usd"] == pytest.approx(0.002)
    assert "WEBSEARCH_PRICE_SERPER" in request["price_note"]
    priced = WebSearchSettings(provider="serper", api_keys={"serper": "k"}, prices={"serper": 0.01})
    assert approval_request(priced, ["a"])["price_note"] == "price per query from " + (
        "WEBSEARCH_PRICE_SERPER"
    )
    searxng = WebSearchSettings(provider="searxng", base_urls={"searxng": "http://127.0.0.1:1"})
    free = approval_request(searxng, ["a"])
    assert free["price_per_query_usd"] is None and free["estimated_cost_usd"] is None
    assert "searxng has no known per-query price" in free["price_note"]
    assert "unknown" in free["message"]


# --- the offline answer after an approved search (issue 46) ------------------------------

CAR_Q = "What is the current price of a Tesla Model 3?"
CAR_BODY = {"organic": [
    {"title": "Tesla Model 3 price", "link": "https://cars.example.com/model3", "position": 1,
     "snippet": "The Tesla Model 3 currently costs USD 42,490 in the United States."},
    {"title": "Car prices", "link": "https://cars.example.com/prices", "position": 2,
     "snippet": "Electric car prices fell this year."},
]}  # fmt: skip


@pytest.mark.parametrize("builder", [build_graph, build_agent_graph])
async def test_the_offline_answer_quotes_the_approved_web_result_not_unrelated_kb_notes(
    sample_kb: KnowledgeBase, provider: LocalServer, builder: Any
) -> None:
    provider.route("/search", Reply(CAR_BODY))
    graph = builder(checkpointer=InMemorySaver())
    out, asked = await ask_and_answer(
        graph, thread(f"car-{builder.__name__}"), ctx(sample_kb.home), CAR_Q, "approve"
    )
    assert len(asked) == 1 and out["search_calls"] >= 1
    assert "USD 42,490 in the United States. [web-1]" in out["answer"], out["answer"]
    # The KB's FleetCloud price note shares only "price" with the question: not quoted.
    assert "[internal-" not in out["answer"] and "FleetCloud" not in out["answer"], out["answer"]
